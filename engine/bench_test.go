package engine_test

// Quick benchmarks of the engine for `make bench`; each runs in seconds.
// The large scenarios (10 M pending, 1 M herd, lateness under load) are in
// internal/enginebench.

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

var benchT0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func benchOpen(b *testing.B, opts engine.Options) *engine.Engine {
	b.Helper()
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := engine.Open(opts)
	if err != nil {
		b.Fatalf("open: %v", err)
	}
	return e
}

func benchClose(b *testing.B, e *engine.Engine) {
	b.Helper()
	if err := e.Close(); err != nil {
		b.Fatalf("close: %v", err)
	}
}

// fsyncCount is the number of commit-log fdatasyncs so far.
func fsyncCount(e *engine.Engine) uint64 {
	_, n, _ := e.Stats().FsyncSeconds.Snapshot()
	return n
}

// BenchmarkSendSync64 is durable produce: 64 goroutines call Send with a
// 1 KiB body (due in an hour) on a real directory with sync flush, so each
// Send returns after fdatasync. One op is one message; msgs/fsync shows how
// well group commit shares an fdatasync among producers.
func BenchmarkSendSync64(b *testing.B) {
	e := benchOpen(b, engine.Options{Dir: b.TempDir()})
	defer benchClose(b, e)
	if err := e.CreateTopic("bench", engine.TopicConfig{}); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 1024)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	syncs0 := fsyncCount(e)
	b.ResetTimer()
	start := time.Now()
	for p := 0; p < 64; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				_, err := e.Send(context.Background(), message.Message{Topic: "bench", Body: body}, message.When{Delay: time.Hour})
				if err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatalf("send: %v", err)
	}
	if got := e.Stats().Pending.Load(); got != int64(b.N) {
		b.Fatalf("pending %d after %d sends", got, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(b.N)/float64(max(fsyncCount(e)-syncs0, 1)), "msgs/fsync")
}

// BenchmarkFireHerd10k measures dispatch: 10,000 messages due at the same
// millisecond become visible (fire records written and synced on a real
// directory, queue index entries appended). The clock is fake: each op
// advances it past the due instant and waits until all are visible, so
// the figure is the engine's work, not waiting for wall time. Sending is
// not timed. DispatchRate is unbounded; checkpoints are kept out.
func BenchmarkFireHerd10k(b *testing.B) {
	const herd = 10_000
	clk := clock.NewFake(benchT0)
	e := benchOpen(b, engine.Options{Dir: b.TempDir(), Clock: clk, DispatchRate: -1, CheckpointInterval: 1000 * time.Hour})
	defer benchClose(b, e)
	if err := e.CreateTopic("herd", engine.TopicConfig{}); err != nil {
		b.Fatal(err)
	}
	reqs := make([]engine.SendRequest, 1000)
	body := make([]byte, 16)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		due := clk.Now().Add(time.Second).UnixMilli()
		for sent := 0; sent < herd; sent += len(reqs) {
			for j := range reqs {
				reqs[j] = engine.SendRequest{Message: message.Message{Topic: "herd", Body: body}, When: message.When{At: due}}
			}
			if _, err := e.SendBatch(context.Background(), reqs); err != nil {
				b.Fatal(err)
			}
		}
		want := uint64(i+1) * herd
		b.StartTimer()
		clk.Advance(time.Second)
		deadline := time.After(time.Minute)
		nudge := time.NewTicker(5 * time.Millisecond)
		for e.Stats().Fired.Load() < want {
			ch := e.VisibleSignal()
			if e.Stats().Fired.Load() >= want {
				break
			}
			select {
			case <-ch:
			case <-nudge.C:
				// The loop may have parked on a fake timer it created just
				// after the Advance above; move the clock on so it wakes.
				clk.Advance(time.Millisecond)
			case <-deadline:
				b.Fatalf("fired %d of %d within a minute", e.Stats().Fired.Load(), want)
			}
		}
		nudge.Stop()
	}
	b.StopTimer()
	var visible uint64
	for _, t := range e.Topics() {
		for _, n := range t.Lengths {
			visible += n
		}
	}
	if visible != uint64(b.N)*herd {
		b.Fatalf("queue indexes hold %d entries, want %d", visible, b.N*herd)
	}
	b.ReportMetric(float64(b.N*herd)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkRecover100k measures Open of a data directory holding 100,000
// pending messages with unique keys, due over one day, on the in-memory FS
// (the cost is CPU: decoding, indexes, buckets). "checkpointed" reopens
// after a clean Close; "replay" opens the power-loss image taken before any
// checkpoint, so recovery replays all 100,000 message records.
func BenchmarkRecover100k(b *testing.B) {
	const n = 100_000
	build := func(b *testing.B, clean bool) *vfs.Mem {
		fs := vfs.NewMem()
		clk := clock.NewFake(benchT0)
		e := benchOpen(b, engine.Options{Dir: "data", FS: fs, Clock: clk, CheckpointInterval: 1000 * time.Hour})
		if err := e.CreateTopic("orders", engine.TopicConfig{}); err != nil {
			b.Fatal(err)
		}
		reqs := make([]engine.SendRequest, 1000)
		due := clk.Now().Add(time.Hour).UnixMilli()
		for i := 0; i < n; i += len(reqs) {
			for j := range reqs {
				k := i + j
				reqs[j] = engine.SendRequest{
					Message: message.Message{Topic: "orders", Key: "order-" + strconv.Itoa(k), Body: []byte("0123456789abcdef")},
					When:    message.When{At: due + int64(k)*int64(24*time.Hour/time.Millisecond)/n},
				}
			}
			if _, err := e.SendBatch(context.Background(), reqs); err != nil {
				b.Fatal(err)
			}
		}
		if !clean {
			img := fs.Crash(nil)
			benchClose(b, e)
			return img
		}
		benchClose(b, e)
		return fs
	}
	for _, tc := range []struct {
		name  string
		clean bool
	}{{"checkpointed", true}, {"replay", false}} {
		b.Run(tc.name, func(b *testing.B) {
			base := build(b, tc.clean)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				fs := base.Clone()
				b.StartTimer()
				e := benchOpen(b, engine.Options{Dir: "data", FS: fs, Clock: clock.NewFake(benchT0), CheckpointInterval: 1000 * time.Hour})
				b.StopTimer()
				if got := e.Stats().Pending.Load(); got != n {
					b.Fatalf("pending %d after recovery, want %d", got, n)
				}
				if _, err := e.LookupKey("orders", "order-"+strconv.Itoa(n-1)); err != nil {
					b.Fatalf("key of the last message: %v", err)
				}
				benchClose(b, e)
				b.StartTimer()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
