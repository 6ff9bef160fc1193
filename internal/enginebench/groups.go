package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
)

const groupName = "lateness-group"

// groupLatenessPlan places the window of the grouplateness scenario on the
// timer-bucket grid. Buckets are BucketWidth wide and aligned to multiples
// of it; the engine loads the bucket starting at b when its clock reaches
// b - Lookahead, and a send whose due time is at or after the loaded limit
// goes to the timer index on disk, not to the in-memory wheel.
//
//	sends end      load of bucket B-w      T0   load of bucket B    B        T0+window
//	    |   >= 5 s        |                 |          |            |            |
//	----+-----------------+-----------------+----------+------------+------------+--->
//	                                          <- messages of bucket B-w -><- of B ->
//
// With the defaults (w = 60 s, Lookahead 30 s, window 60 s, T0 = B - 45 s)
// the first 45 s of the window come from a bucket loaded 15 s before the
// window (written to its file while the broker was sending), and the last
// 15 s from a bucket loaded 15 s into the window, while messages fire and
// consumers ack.
type groupLatenessPlan struct {
	t0, boundary, sendBy int64 // Unix ms
}

// planGroupWindow picks T0 so that every window message is still a
// far-future message (beyond the loaded limit) when sending ends, if
// sending ends within sendFor of now.
func planGroupWindow(now int64, sendFor, width, lookahead time.Duration) groupLatenessPlan {
	w, la := width.Milliseconds(), lookahead.Milliseconds()
	sendBy := now + sendFor.Milliseconds()
	// The loaded limit when sending ends, at the latest.
	limit := floorDiv(sendBy+la, w)*w + w
	// The bucket of T0 (B - w) must start at or after that limit and be
	// loaded at least 5 s after sendBy: B - w - la >= sendBy + 5 s.
	b := limit + w
	for b-w-la < sendBy+5000 {
		b += w
	}
	return groupLatenessPlan{t0: b - w*3/4, boundary: b, sendBy: sendBy}
}

// groupSample is what a consumer saw of one message.
type groupSample struct {
	lateNs  int64 // time.Now() after Receive returned minus the due instant
	indexMs int64 // Visible - Due, stamped by the engine
	dueMs   int64
}

// runGroupLateness preloads far-future pending messages plus the messages
// of a window that are themselves far-future when sent (they go to timer
// the timer index on disk), waits until the window, and measures lateness at consumer
// goroutines calling Receive and Ack on a consumer group, while far-future
// sends go on. Go runtime timers for the same due times are the baseline.
func runGroupLateness(c config, dir string) (*report, error) {
	r := newReport("grouplateness", dir)
	count := c.windowCount()
	e, err := openLatenessEngine(dir)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	if err := e.CreateGroup(latenessTopic, groupName, engine.GroupConfig{}); err != nil {
		return nil, err
	}
	eo := engine.NewOptions(dir)
	body := make([]byte, pendingBody)
	w, err := sendGroupWindow(e, c, eo, count, body)
	if err != nil {
		return nil, err
	}
	if t := time.Now().UnixMilli(); t > w.plan.sendBy {
		return r, fmt.Errorf("sending ended %d ms after the plan's limit; the window messages may have gone to the wheel; raise -send-for", t-w.plan.sendBy)
	}
	w.note(r, c, eo, count, e.Stats().Pending.Load())
	mon := startCheckpointMonitor(e)
	if c.allocprofile != "" {
		go windowAllocs(c.allocprofile, time.UnixMilli(w.plan.t0), c.window)
	}
	if c.tracefile != "" {
		go windowTrace(c.tracefile, time.UnixMilli(w.plan.t0), c.window)
	}
	g, err := consumeGroupWindow(e, c, body, w.plan.t0, count)
	if c.bgRate > 0 {
		r.note("from 5 s before the window to its end, %s far-future messages with keys were also sent (%s/s in batches of 100, due like the preload)", humanInt(int64(g.bgSent)), humanInt(int64(c.bgRate)))
	}
	if err != nil {
		return r, err
	}
	r.note("consumers: %d goroutines, each looping Receive (Max 256, Wait 1 s, Invisible 30 s) on one group, then Ack of the receipts; lateness = time.Now() when Receive returned minus the due instant", c.consumers)
	return r, reportGroupLateness(r, e, mon, w, g, count)
}

// windowAllocs writes the allocation profile to file.start at start and
// to file.end once window has passed: their difference is what the
// window allocated, which sets how often the garbage collector runs in it
// (its collections were the window's lateness tail: docs/benchmarks.md,
// group-lateness). A failure only loses the profile.
func windowAllocs(file string, start time.Time, window time.Duration) {
	write := func(name string) {
		f, err := os.Create(name)
		if err == nil {
			err = errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "enginebench: allocation profile:", err)
		}
	}
	time.Sleep(time.Until(start))
	write(file + ".start")
	time.Sleep(window)
	write(file + ".end")
}

// windowTrace writes a runtime execution trace of the window alone to
// file (the preload before it would make the trace of the whole
// scenario too large to read).
func windowTrace(file string, start time.Time, window time.Duration) {
	f, err := os.Create(file)
	if err == nil {
		time.Sleep(time.Until(start))
		if err = trace.Start(f); err == nil {
			time.Sleep(window)
			trace.Stop()
		}
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "enginebench: trace:", err)
	}
}

// groupWindow is what the grouplateness scenario sent before its window.
type groupWindow struct {
	plan      groupLatenessPlan
	rel       []int64 // due times of the window, ms from its start, sorted
	sendStart int64   // Unix ms when sending began
	win, pre  preloadResult
}

// sendGroupWindow places the window on the bucket grid, then sends its
// count messages (far-future when sent) and after them the far-future
// preload with keys.
func sendGroupWindow(e *engine.Engine, c config, eo engine.Options, count int, body []byte) (groupWindow, error) {
	w := groupWindow{sendStart: e.Now()}
	w.plan = planGroupWindow(w.sendStart, c.sendFor, eo.BucketWidth, eo.Lookahead)
	w.rel = windowDueTimes(c.window, count)
	var err error
	w.win, err = preload(e, preloadSpec{topic: latenessTopic, n: count, batch: c.batch, senders: c.senders, body: body,
		due: func(i int, _ *rand.Rand) int64 { return w.plan.t0 + w.rel[i] }})
	if err != nil {
		return w, err
	}
	now := e.Now()
	w.pre, err = preload(e, preloadSpec{topic: pendingTopic, keyPrefix: "order-", n: c.preload, batch: c.batch,
		senders: c.senders, body: body, due: uniformDue(now+c.offset.Milliseconds(), c.horizon.Milliseconds())})
	return w, err
}

// note writes what was sent and where the window lies on the bucket
// grid; pending is the engine's pending count when the wait began.
func (w groupWindow) note(r *report, c config, eo engine.Options, count int, pending int64) {
	plan := w.plan
	r.note("size: %s messages due uniformly over a %v window (%s/s), sent first (in %s) while they were still far-future: the window starts %.0f s after sending began, so they went to the timer index on disk, not to the in-memory wheel; then %s far-future pending messages with keys (due over %v from %v after the start; sent in %s); %s pending when the wait began; 16 B bodies, topic of %d queues, engine defaults (sync flush, BucketWidth %v, Lookahead %v, DispatchRate %s/s)",
		humanInt(int64(count)), c.window, humanInt(int64(c.rate)), secs(w.win.took), float64(plan.t0-w.sendStart)/1000,
		humanInt(int64(c.preload)), c.horizon, c.offset, secs(w.pre.took), humanInt(pending), latenessQueues, eo.BucketWidth, eo.Lookahead,
		humanInt(int64(eo.DispatchRate)))
	r.note("bucket loads: the bucket holding the first %.0f s of the window was loaded %.0f s before it; the bucket holding the rest was loaded %.0f s into the window, while messages were firing",
		float64(plan.boundary-plan.t0)/1000, float64(plan.t0-(plan.boundary-eo.BucketWidth.Milliseconds()-eo.Lookahead.Milliseconds()))/1000,
		float64(plan.boundary-eo.Lookahead.Milliseconds()-plan.t0)/1000)
}

// groupRun is what the group's consumers saw of the window, and how many
// background sends went on meanwhile.
type groupRun struct {
	samples []groupSample
	dups    int
	ackLat  []int64 // ns per Ack call
	bgSent  int
}

// consumeGroupWindow runs the consumers on the group until every window
// message was received (the window starts at t0, Unix ms) and, with
// -bg-rate, far-future sends from 5 s before the window to its end. The
// error joins the consumers' and the sender's.
func consumeGroupWindow(e *engine.Engine, c config, body []byte, t0 int64, count int) (groupRun, error) {
	var g groupRun
	var wg sync.WaitGroup
	var bgErr error
	if c.bgRate > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.bgSent, bgErr = sendBackground(e, c, body, t0-5000, t0+c.window.Milliseconds())
		}()
	}
	var consErr error
	g.samples, g.dups, g.ackLat, consErr = consumeGroup(e, c.consumers, count, time.UnixMilli(t0).Add(c.window+2*time.Minute))
	wg.Wait()
	return g, errors.Join(consErr, bgErr)
}

// reportGroupLateness writes the checkpoints near the window, the worst
// stretches, and, after closing the engine, the lateness figures against
// Go runtime timers for the same due times.
func reportGroupLateness(r *report, e *engine.Engine, mon *checkpointMonitor, w groupWindow, g groupRun, count int) error {
	t0 := w.plan.t0
	for _, ck := range mon.finish() {
		if ck.end.UnixMilli() >= t0-5000 {
			r.note("checkpoint ended at %+.3f s from the window start, took %.3f s", float64(ck.end.UnixMilli()-t0)/1000, ck.took)
		}
	}
	lateNs := make([]int64, len(g.samples))
	idxMs := make([]int64, len(g.samples))
	dueMs := make([]int64, len(g.samples))
	for i, s := range g.samples {
		lateNs[i], idxMs[i], dueMs[i] = s.lateNs, s.indexMs, s.dueMs
	}
	r.note("worst 100 ms stretches of due times (max consumer lateness): %s", worstBins(dueMs, lateNs, t0, 5))
	if err := e.Close(); err != nil {
		return err
	}
	clk := summarize(lateNs)
	idx := summarize(idxMs)
	base := goTimerLateness(w.rel)
	r.cmp("lateness p50 / p99 / p99.9 / max at the group's consumers", clk.nsAsMs(), base.nsAsMs(), float64(clk.p99)/float64(max(base.p99, 1)), "p99 < 5 ms")
	r.fig("lateness p50 / p99 / p99.9 / max, queue index (Visible - Due)", idx.ms())
	r.fig("received / early / redelivered (duplicates)", fmt.Sprintf("%s / %d / %d of %s", humanInt(int64(len(g.samples))), countBelow(lateNs, 0), g.dups, humanInt(int64(count))))
	al := summarize(g.ackLat)
	r.fig("Ack latency p50 / p99 / max", fmt.Sprintf("%.3f / %.3f / %.3f ms", float64(al.p50)/1e6, float64(al.p99)/1e6, float64(al.max)/1e6))
	r.note("baseline: Go runtime timers (time.AfterFunc), one per message, all created 2 s before a window of the same relative due times, after the engine was closed")
	return nil
}

// consumeGroup runs n consumers on the lateness topic's group until want
// distinct messages were received or the deadline passes. It returns one
// sample per distinct message, the number of repeated deliveries and the
// latency of each Ack call.
func consumeGroup(e *engine.Engine, n, want int, deadline time.Time) ([]groupSample, int, []int64, error) {
	var mu sync.Mutex
	seen := make(map[uint64]struct{}, want)
	samples := make([]groupSample, 0, want)
	var ackLat []int64
	dups := 0
	var got atomic.Int64
	err := parallel(n, func(int) error {
		var local []groupSample
		var lat []int64
		defer func() {
			mu.Lock()
			ackLat = append(ackLat, lat...)
			mu.Unlock()
		}()
		for got.Load() < int64(want) && time.Now().Before(deadline) {
			rs, err := e.Receive(bg, engine.ReceiveRequest{Topic: latenessTopic, Group: groupName, Max: 256, Invisible: 30 * time.Second, Wait: time.Second})
			if err != nil {
				return err
			}
			if len(rs) == 0 {
				continue
			}
			t := time.Now().UnixNano()
			receipts := make([]string, len(rs))
			local = local[:0]
			for i, m := range rs {
				receipts[i] = m.Receipt
				local = append(local, groupSample{lateNs: t - m.Due*int64(time.Millisecond), indexMs: m.Visible.Visible - m.Due, dueMs: m.Due})
			}
			a := time.Now()
			if err := e.Ack(bg, latenessTopic, groupName, receipts...); err != nil {
				return err
			}
			lat = append(lat, int64(time.Since(a)))
			mu.Lock()
			for i, m := range rs {
				k := uint64(m.Queue)<<48 | m.Offset
				if _, ok := seen[k]; ok {
					dups++
					continue
				}
				seen[k] = struct{}{}
				samples = append(samples, local[i])
			}
			got.Store(int64(len(seen)))
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return samples, dups, ackLat, err
	}
	if len(samples) < want {
		return samples, dups, ackLat, fmt.Errorf("received %d of %d messages before the deadline", len(samples), want)
	}
	return samples, dups, ackLat, nil
}
