package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// BenchmarkHerdWindow is a herd of 100,000 messages due at one instant,
// received and acked by 4 consumers of one group, once without a tolerance
// window and once with a 10 s window, in one process. It reports the peak
// rate at the consumers (the most messages received in any 100 ms, as a
// rate), the same of the broker's visible times (what the dispatcher did,
// apart from the consumers' own stalls), when the last one arrived after
// the instant, and how many commit-log fdatasyncs of the run took over
// 100 ms (a fire waits for its fsync, and what falls due meanwhile leaves
// in the next fire at once, so a stalled disk shows as a burst). Run it once per
// process: go test -run '^$' -bench HerdWindow -benchtime 1x ./engine
func BenchmarkHerdWindow(b *testing.B) {
	for _, mode := range []struct {
		name   string
		window time.Duration
	}{{"nowindow", 0}, {"window10s", 10 * time.Second}} {
		b.Run(mode.name, func(b *testing.B) {
			for range b.N {
				r := herdRun(b, mode.window)
				b.ReportMetric(r.peak, "peak-msgs/s")
				b.ReportMetric(r.vpeak, "peak-visible-msgs/s")
				b.ReportMetric(r.last.Seconds(), "last-after-s")
				b.ReportMetric(float64(r.slowFsyncs), "fsyncs>100ms")
			}
		})
	}
}

// herdResult is what one herd run measured.
type herdResult struct {
	peak, vpeak float64
	last        time.Duration
	slowFsyncs  uint64
}

func herdRun(b *testing.B, window time.Duration) herdResult {
	const n, consumers = 100_000, 4
	e := benchOpen(b, engine.Options{Dir: b.TempDir()})
	defer benchClose(b, e)
	if err := e.CreateTopic("herd", engine.TopicConfig{}); err != nil {
		b.Fatal(err)
	}
	if err := e.CreateGroup("herd", "g", engine.GroupConfig{}); err != nil {
		b.Fatal(err)
	}
	at := sendHerd(b, e, n, window)
	b.ResetTimer()
	var mu sync.Mutex
	bins := map[int64]int{}  // received, 10 ms bins after the instant
	vbins := map[int64]int{} // made visible, the same
	var got, lastMs int64
	var wg sync.WaitGroup
	for c := 0; c < consumers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				done := got >= n
				mu.Unlock()
				if done {
					return
				}
				rs, err := e.Receive(context.Background(), engine.ReceiveRequest{Topic: "herd", Group: "g", Max: 256, Wait: 200 * time.Millisecond})
				if err != nil {
					b.Error(err)
					return
				}
				if len(rs) == 0 {
					continue
				}
				now := time.Now().UnixMilli()
				receipts := make([]string, len(rs))
				for i, r := range rs {
					receipts[i] = r.Receipt
				}
				if err := e.Ack(context.Background(), "herd", "g", receipts...); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				for _, r := range rs {
					vbins[(r.Visible.Visible-at)/10]++
				}
				bins[(now-at)/10] += len(rs)
				got += int64(len(rs))
				lastMs = max(lastMs, now-at)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	res := herdResult{peak: peakRate(bins), vpeak: peakRate(vbins), last: time.Duration(lastMs) * time.Millisecond}
	h := e.Stats().FsyncSeconds
	counts, _, _ := h.Snapshot()
	for i, c := range counts {
		if i == len(h.Bounds) || h.Bounds[i] > 0.1 {
			res.slowFsyncs += c
		}
	}
	return res
}

// sendHerd sends n messages of 256 bytes to topic "herd", all due at one
// instant 5 s ahead with the given window, and returns the instant.
func sendHerd(b *testing.B, e *engine.Engine, n int, window time.Duration) int64 {
	b.Helper()
	at := time.Now().Add(5 * time.Second).UnixMilli()
	reqs := make([]engine.SendRequest, 1000)
	for i := 0; i < n; i += len(reqs) {
		for j := range reqs {
			reqs[j] = engine.SendRequest{Message: message.Message{Topic: "herd", Body: make([]byte, 256)},
				When: message.When{At: at, Window: window}}
		}
		if _, err := e.SendBatch(context.Background(), reqs); err != nil {
			b.Fatal(err)
		}
	}
	if time.Now().UnixMilli() >= at {
		b.Fatal("sending the herd took past its due time; the run measures nothing")
	}
	return at
}

// peakRate is the most messages in any 100 ms of 10 ms bins, per second.
func peakRate(bins map[int64]int) float64 {
	peak := 0
	for k := range bins {
		sum := 0
		for i := k; i < k+10; i++ {
			sum += bins[i]
		}
		peak = max(peak, sum)
	}
	return float64(peak) * 10
}
