package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// pauseSend is one Send of the pause scenario: when it started and how
// long it took.
type pauseSend struct {
	start time.Time
	took  time.Duration
}

// runPause measures whether a checkpoint pauses sends: -preload keyed
// far-future messages, then single Sends at -rate per second, each due
// -lead later (so -rate per second also fall due), for -window. Twice, each
// in a fresh engine: with no checkpoint in the window (CheckpointInterval
// 1 h: the baseline) and with one every second. Send latency is reported
// for all sends of each run and, in each run with checkpoints, apart for
// those that overlapped one and those that did not.
func runPause(c config, dir string) (*report, error) {
	r := newReport("pause", dir)
	r.note("size: %s pending messages first (unique keys, due over %v from %v after the start), then single Sends with unique keys at %s/s, each due %v after it is sent, for %v, from %d goroutines; 16 B bodies, sync flush, engine defaults except CheckpointInterval; a fresh engine per run",
		humanInt(int64(c.preload)), c.horizon, c.offset, humanInt(int64(c.rate)), c.lead, c.window, c.producers)
	r.note("a send \"overlaps a checkpoint\" if it ran at some time between 10 ms before a checkpoint began and 10 ms after it ended (the checkpoint counter is polled every 10 ms)")
	var base quantiles
	for i, run := range []struct {
		name     string
		interval time.Duration
	}{{"no checkpoint in the window (CheckpointInterval 1 h)", time.Hour}, {"a checkpoint every 1 s", time.Second}} {
		sends, ckpts, gate, err := pauseOnce(c, filepath.Join(dir, fmt.Sprint("run", i)), run.interval)
		if err != nil {
			return r, fmt.Errorf("%s: %w", run.name, err)
		}
		q := summarize(latencies(sends))
		p := run.name + ": "
		r.fig(p+"checkpoints in the window", fmt.Sprint(len(ckpts)))
		if i == 0 {
			base = q
			r.fig(p+"Send latency p50 / p99 / p99.9 / max ("+humanInt(int64(len(sends)))+" sends)", q.nsAsMs())
		} else {
			r.cmp(p+"Send latency p50 / p99 / p99.9 / max ("+humanInt(int64(len(sends)))+" sends)", q.nsAsMs(),
				base.nsAsMs()+" (no checkpoint)", float64(q.p999)/float64(max(base.p999, 1)), "p99.9 under 10 ms (ratio of p99.9)")
		}
		pauseSplit(r, p, sends, ckpts, gate)
	}
	return r, nil
}

// pauseSplit adds the rows that split a window's sends by whether they
// overlapped a checkpoint: the sends that did not are the same window's
// own baseline, under the same load of the machine.
func pauseSplit(r *report, p string, sends []pauseSend, ckpts []checkpointEvent, gate string) {
	var during, outside []int64
	for _, s := range sends {
		if overlaps(s, ckpts) {
			during = append(during, int64(s.took))
		} else {
			outside = append(outside, int64(s.took))
		}
	}
	if len(during) == 0 {
		return
	}
	qd, qo := summarize(during), summarize(outside)
	r.fig(p+"the sends that overlapped a checkpoint ("+humanInt(int64(len(during)))+"), p50 / p99 / p99.9 / max", qd.nsAsMs())
	r.cmp(p+"the sends that overlapped none ("+humanInt(int64(len(outside)))+"), p50 / p99 / p99.9 / max; ratio: p99.9 overlapped / none", qo.nsAsMs(), "",
		float64(qd.p999)/float64(max(qo.p999, 1)), "")
	took := make([]float64, len(ckpts))
	for k, ck := range ckpts {
		took[k] = ck.took * 1000
	}
	r.fig(p+"checkpoint duration median (range)", fmt.Sprintf("%.0f ms (%.0f to %.0f)", median(took), slices.Min(took), slices.Max(took)))
	r.fig(p+"exclusive section per checkpoint, mean: waiting for appends in flight + capture", gate)
}

// overlaps reports whether s ran within 10 ms of a checkpoint.
func overlaps(s pauseSend, ckpts []checkpointEvent) bool {
	end := s.start.Add(s.took)
	for _, ck := range ckpts {
		from := ck.end.Add(-time.Duration(ck.took*float64(time.Second)) - 10*time.Millisecond)
		till := ck.end.Add(10 * time.Millisecond)
		if end.After(from) && s.start.Before(till) {
			return true
		}
	}
	return false
}

// pauseOnce runs one window of the pause scenario on a fresh engine. It
// returns the sends, the checkpoints and the mean exclusive section of the
// checkpoints in the window, as text.
func pauseOnce(c config, dir string, interval time.Duration) ([]pauseSend, []checkpointEvent, string, error) {
	opts := engineOptions(dir)
	opts.CheckpointInterval = interval
	if interval >= time.Hour {
		// The window without checkpoints: the log's size must not ask
		// for one either.
		opts.CheckpointBytes = -1
	}
	e, err := engine.Open(opts)
	if err != nil {
		return nil, nil, "", err
	}
	defer e.Close()
	if err := e.CreateTopic(pendingTopic, engine.TopicConfig{}); err != nil {
		return nil, nil, "", err
	}
	body := make([]byte, pendingBody)
	if _, err := preload(e, preloadSpec{topic: pendingTopic, keyPrefix: "order-", n: c.preload, batch: c.batch, senders: c.senders, body: body,
		due: uniformDue(e.Now()+c.offset.Milliseconds(), c.horizon.Milliseconds())}); err != nil {
		return nil, nil, "", err
	}
	// Let the preload's checkpoints (if any) finish before the window.
	if interval < time.Hour {
		if err := waitCheckpoints(e, 2, 10*time.Minute); err != nil {
			return nil, nil, "", err
		}
	}
	st := e.Stats()
	_, n0, wait0 := st.CheckpointGateWaitSeconds.Snapshot()
	_, _, cap0 := st.CheckpointCaptureSeconds.Snapshot()
	mon := startCheckpointMonitor(e)
	sends, err := pacedSends(e, c, body)
	ckpts := mon.finish()
	_, n1, wait1 := st.CheckpointGateWaitSeconds.Snapshot()
	_, _, cap1 := st.CheckpointCaptureSeconds.Snapshot()
	gate := "no checkpoint"
	if n := float64(n1 - n0); n > 0 {
		gate = fmt.Sprintf("%.2f ms + %.2f ms", (wait1-wait0)/n*1000, (cap1-cap0)/n*1000)
	}
	return sends, ckpts, gate, err
}

// pacedSends runs c.producers goroutines that together call Send c.rate
// times a second for c.window, each message due c.lead after its send.
func pacedSends(e *engine.Engine, c config, body []byte) ([]pauseSend, error) {
	return pacedCalls(c, func(p, i int) error {
		m := message.Message{Topic: pendingTopic, Key: fmt.Sprintf("p%d-%d", p, i), Body: body}
		_, err := e.Send(context.Background(), m, message.When{Delay: c.lead})
		return err
	})
}

// pacedCalls runs c.producers goroutines that together make c.rate calls
// of call a second for c.window, each goroutine on its own fixed schedule
// (producer p's i-th call), and returns when each call started and how
// long it took. The first error stops its goroutine and is returned.
func pacedCalls(c config, call func(p, i int) error) ([]pauseSend, error) {
	every := time.Duration(c.producers) * time.Second / time.Duration(c.rate)
	start := time.Now()
	var mu sync.Mutex
	var out []pauseSend
	var firstErr error
	var wg sync.WaitGroup
	for p := 0; p < c.producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []pauseSend
			next := start.Add(every * time.Duration(p) / time.Duration(c.producers))
			for i := 0; next.Sub(start) < c.window; i++ {
				time.Sleep(time.Until(next))
				next = next.Add(every)
				t := time.Now()
				if err := call(p, i); err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					return
				}
				mine = append(mine, pauseSend{start: t, took: time.Since(t)})
			}
			mu.Lock()
			out = append(out, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out, firstErr
}

// cmpErr keeps the first error.
func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
