package main

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

const latenessTopic = "lateness"

// consumer follows every queue of a topic and measures, for each message it
// sees, visible minus due twice: from the queue index entry (Visible and Due,
// in ms, stamped by the engine) and from its own clock (time.Now() when the
// message was read, minus the due instant, in ns).
type consumer struct {
	e      *engine.Engine
	topic  string
	queues int
	offs   []uint64

	indexMs []int64 // entry.Visible - entry.Due
	clockNs []int64 // time seen - due instant
	dueMs   []int64 // entry.Due
}

func newConsumer(e *engine.Engine, topic string, queues, want int) *consumer {
	return &consumer{e: e, topic: topic, queues: queues, offs: make([]uint64, queues),
		indexMs: make([]int64, 0, want), clockNs: make([]int64, 0, want), dueMs: make([]int64, 0, want)}
}

// run reads until want messages were seen or the deadline passes. It waits
// on VisibleSignal between rounds, taking the channel before reading so no
// wake-up is lost.
func (c *consumer) run(want int, deadline time.Time) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for len(c.clockNs) < want {
		ch := c.e.VisibleSignal()
		got := 0
		for q := 0; q < c.queues; q++ {
			for {
				vs, err := c.e.ReadQueue(c.topic, q, c.offs[q], 4096)
				if err != nil {
					return err
				}
				now := time.Now().UnixNano()
				for _, v := range vs {
					c.indexMs = append(c.indexMs, v.Visible-v.Due)
					c.clockNs = append(c.clockNs, now-v.Due*int64(time.Millisecond))
					c.dueMs = append(c.dueMs, v.Due)
					c.offs[q] = v.Offset + 1
				}
				got += len(vs)
				if len(vs) < 4096 {
					break
				}
			}
		}
		if got > 0 {
			continue
		}
		select {
		case <-ch:
		case <-timer.C:
			return fmt.Errorf("saw %d of %d messages before the deadline", len(c.clockNs), want)
		}
	}
	return nil
}

// runLateness preloads far-future pending messages, then makes -rate
// messages per second fall due for -window and measures how late each
// became visible; Go runtime timers for the same due times are the baseline.
func runLateness(c config, dir string) (*report, error) {
	r := newReport("lateness", dir)
	count := c.windowCount()
	e, err := openLatenessEngine(dir)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	body := make([]byte, pendingBody)
	now := e.Now()
	pre, err := preload(e, preloadSpec{topic: pendingTopic, keyPrefix: "order-", n: c.preload, batch: c.batch,
		senders: c.senders, body: body, due: uniformDue(now+c.offset.Milliseconds(), c.horizon.Milliseconds())})
	if err != nil {
		return nil, err
	}
	r.note("size: %s pending messages first (due over %v from %v after the start; sent in %s), then %s messages due uniformly over a %v window (%s/s), 16 B bodies, topic of %d queues, engine defaults (sync flush, DispatchRate %s/s)",
		humanInt(int64(c.preload)), c.horizon, c.offset, secs(pre.took), humanInt(int64(count)), c.window, humanInt(int64(c.rate)), latenessQueues, humanInt(int64(engine.NewOptions("").DispatchRate)))

	if c.settle {
		if err := waitCheckpoints(e, 2, 10*time.Minute); err != nil {
			return r, err
		}
		r.note("the window started after a checkpoint that began after the preload had finished (-settle): the preload's dirty timer buckets were synced before the window")
	}

	w := latenessWindow{rel: windowDueTimes(c.window, count), start: e.Now() + 2000 + c.lead.Milliseconds()}
	if c.presend {
		w.start += int64(count/c.batch)*20 + 2000 // room to send everything first
	}
	mon := startCheckpointMonitor(e)
	err = w.run(e, c, body)
	if c.bgRate > 0 {
		r.note("during the window, %s far-future messages with keys were also sent (%s/s in batches of 100, due like the preload), as producers keep scheduling in real use", humanInt(int64(w.bgSent)), humanInt(int64(c.bgRate)))
	}
	if err != nil {
		return r, err
	}
	return r, w.report(r, e, c, mon)
}

// windowDueTimes returns count due times spread uniformly over a window,
// in ms relative to its start, sorted. The seed is fixed, so every run
// and the Go timer baseline use the same times.
func windowDueTimes(window time.Duration, count int) []int64 {
	rng := rand.New(rand.NewPCG(42, 42))
	rel := make([]int64, count)
	for i := range rel {
		rel[i] = rng.Int64N(window.Milliseconds())
	}
	slices.Sort(rel)
	return rel
}

// latenessWindow is one window of the lateness scenario: its due times,
// and what the sender, the consumer and the background sender saw.
type latenessWindow struct {
	rel   []int64 // due times, ms from start, sorted
	start int64   // Unix ms

	cons      *consumer
	sendLat   []int64 // ns per SendBatch
	lateSends int     // batches sent after their first due time
	bgSent    int
}

// run sends the window, follows its queues until every message was seen
// and, with -bg-rate, sends far-future messages from -lead before the
// window to its end. The error joins the three goroutines'.
func (w *latenessWindow) run(e *engine.Engine, c config, body []byte) error {
	count := len(w.rel)
	w.cons = newConsumer(e, latenessTopic, latenessQueues, count)
	var wg sync.WaitGroup
	var consErr, sendErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		consErr = w.cons.run(count, time.UnixMilli(w.start).Add(c.window+2*time.Minute))
	}()
	go func() {
		defer wg.Done()
		sendErr = w.send(e, c, body)
	}()
	var bgErr error
	if c.bgRate > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.bgSent, bgErr = sendBackground(e, c, body, w.start-c.lead.Milliseconds(), w.start+c.window.Milliseconds())
		}()
	}
	wg.Wait()
	return errors.Join(sendErr, consErr, bgErr)
}

// send sends the window in batches of c.batch, each -lead before its
// first due time (or all at once with -presend), recording each
// SendBatch's latency and counting batches sent after their first due time.
func (w *latenessWindow) send(e *engine.Engine, c config, body []byte) error {
	count := len(w.rel)
	w.sendLat = make([]int64, 0, count/c.batch+1)
	reqs := make([]engine.SendRequest, c.batch)
	for i := 0; i < count; i += c.batch {
		k := min(c.batch, count-i)
		first := w.start + w.rel[i]
		if !c.presend {
			time.Sleep(time.Until(time.UnixMilli(first - c.lead.Milliseconds())))
		}
		for j := 0; j < k; j++ {
			reqs[j] = engine.SendRequest{Message: message.Message{Topic: latenessTopic, Body: body},
				When: message.When{At: w.start + w.rel[i+j]}}
		}
		t := time.Now()
		if t.UnixMilli() >= first {
			w.lateSends++
		}
		if _, err := e.SendBatch(bg, reqs[:k]); err != nil {
			return err
		}
		w.sendLat = append(w.sendLat, int64(time.Since(t)))
	}
	return nil
}

// report writes the method, the checkpoints near the window and the worst
// stretches, then closes the engine and writes the lateness figures
// against Go runtime timers for the same due times.
func (w *latenessWindow) report(r *report, e *engine.Engine, c config, mon *checkpointMonitor) error {
	if c.presend {
		r.note("method: the whole window was sent before it started (pre-send then wait)")
	} else {
		r.note("method: sending overlaps firing: each SendBatch of %d is sent %v before the first due time in it", c.batch, c.lead)
	}
	if w.lateSends > 0 {
		r.note("WARNING: %d batches were sent after their first due time (the sender fell behind)", w.lateSends)
	}
	r.note("visible minus due from the queue index: Visible and Due fields in ms, Visible stamped by the engine before the fire record's fsync; from the consumer's clock: time.Now() after ReadQueue returned the message minus the due instant, in ns")
	for _, ck := range mon.finish() {
		if ck.end.UnixMilli() >= w.start-c.lead.Milliseconds() {
			r.note("checkpoint ended at %+.3f s from the window start, took %.3f s", float64(ck.end.UnixMilli()-w.start)/1000, ck.took)
		}
	}
	cons := w.cons
	r.note("worst 100 ms stretches of due times (max consumer-clock lateness): %s", worstBins(cons.dueMs, cons.clockNs, w.start, 5))
	st := e.Stats()
	if err := e.Close(); err != nil {
		return err
	}
	idx := summarize(cons.indexMs)
	clk := summarize(cons.clockNs)
	base := goTimerLateness(w.rel)
	r.cmp("lateness p50 / p99 / p99.9 / max, consumer clock", clk.nsAsMs(), base.nsAsMs(), float64(clk.p99)/float64(max(base.p99, 1)), "p99 < 5 ms")
	r.fig("lateness p50 / p99 / p99.9 / max, queue index", idx.ms())
	r.fig("early (seen before due), consumer clock / index", fmt.Sprintf("%d / %d of %s (min %.3f ms / %d ms)",
		countBelow(cons.clockNs, 0), countBelow(cons.indexMs, 0), humanInt(int64(len(w.rel))), float64(clk.min)/1e6, idx.min))
	r.fig("engine Lateness histogram p50 / p99 (bucket upper bounds, all fired messages)",
		fmt.Sprintf("%g / %g ms", st.Lateness.Quantile(0.5)*1000, st.Lateness.Quantile(0.99)*1000))
	sl := summarize(w.sendLat)
	r.fig("SendBatch latency during the window p50 / p99 / max", fmt.Sprintf("%.3f / %.3f / %.3f ms", float64(sl.p50)/1e6, float64(sl.p99)/1e6, float64(sl.max)/1e6))
	r.fig("checkpoints during the run", fmt.Sprintf("%d", st.Checkpoints.Load()))
	r.note("baseline: Go runtime timers (time.AfterFunc), one per message, all created %v before the window, for the same relative due times, after the engine was closed; lateness = time.Now() in the callback minus the due instant", 2*time.Second)
	return nil
}

// windowCount is how many messages fall due in the window: -rate per
// second for -window.
func (c config) windowCount() int { return int(int64(c.rate) * int64(c.window) / int64(time.Second)) }

// latenessQueues is the queue count of the lateness topic.
const latenessQueues = 4

// openLatenessEngine opens dir with the lateness topic (latenessQueues
// queues) and the pending topic of the far-future preload.
func openLatenessEngine(dir string) (*engine.Engine, error) {
	e, err := engine.Open(engineOptions(dir))
	if err != nil {
		return nil, err
	}
	if err := e.CreateTopic(latenessTopic, engine.TopicConfig{Queues: latenessQueues}); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.CreateTopic(pendingTopic, engine.TopicConfig{}); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// checkpointEvent is one completed checkpoint seen by the monitor.
type checkpointEvent struct {
	end  time.Time
	took float64 // seconds, from the CheckpointSeconds sum
}

// checkpointMonitor polls the engine's checkpoint counter every 10 ms to
// timestamp checkpoints, so that lateness spikes can be matched to them.
type checkpointMonitor struct {
	stop   chan struct{}
	done   chan struct{}
	events []checkpointEvent
}

func startCheckpointMonitor(e *engine.Engine) *checkpointMonitor {
	m := &checkpointMonitor{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		st := e.Stats()
		n := st.Checkpoints.Load()
		_, _, sum := st.CheckpointSeconds.Snapshot()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
			if n2 := st.Checkpoints.Load(); n2 != n {
				_, _, sum2 := st.CheckpointSeconds.Snapshot()
				m.events = append(m.events, checkpointEvent{end: time.Now(), took: sum2 - sum})
				n, sum = n2, sum2
			}
		}
	}()
	return m
}

func (m *checkpointMonitor) finish() []checkpointEvent {
	close(m.stop)
	<-m.done
	return m.events
}

// worstBins groups samples by 100 ms of due time and names the k groups
// with the largest lateness, as "+due s: max ms".
func worstBins(dueMs, lateNs []int64, start int64, k int) string {
	worst := map[int64]int64{}
	for i, d := range dueMs {
		b := floorDiv(d-start, 100)
		worst[b] = max(worst[b], lateNs[i])
	}
	bins := make([]int64, 0, len(worst))
	for b := range worst {
		bins = append(bins, b)
	}
	slices.SortFunc(bins, func(a, b int64) int { return cmp.Compare(worst[b], worst[a]) })
	out := ""
	for i, b := range bins[:min(k, len(bins))] {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%+.1f s: %.0f ms", float64(b)/10, float64(worst[b])/1e6)
	}
	return out
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// waitCheckpoints waits until n more checkpoints have completed.
func waitCheckpoints(e *engine.Engine, n uint64, limit time.Duration) error {
	st := e.Stats()
	want := st.Checkpoints.Load() + n
	deadline := time.Now().Add(limit)
	for st.Checkpoints.Load() < want {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d checkpoints did not complete within %v", n, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// sendBackground sends far-future messages at c.bgRate per second, in
// batches of 100, from the Unix ms from until to.
func sendBackground(e *engine.Engine, c config, body []byte, from, to int64) (int, error) {
	const batch = 100
	rng := rand.New(rand.NewPCG(99, 99))
	every := time.Second * batch / time.Duration(c.bgRate)
	time.Sleep(time.Until(time.UnixMilli(from)))
	reqs := make([]engine.SendRequest, batch)
	sent := 0
	next := time.Now()
	for time.Now().UnixMilli() < to {
		now := e.Now()
		for j := range reqs {
			reqs[j] = engine.SendRequest{
				Message: message.Message{Topic: pendingTopic, Key: "bg-" + strconv.Itoa(sent+j), Body: body},
				When:    message.When{At: now + c.offset.Milliseconds() + rng.Int64N(c.horizon.Milliseconds())},
			}
		}
		if _, err := e.SendBatch(bg, reqs); err != nil {
			return sent, err
		}
		sent += batch
		next = next.Add(every)
		time.Sleep(time.Until(next))
	}
	return sent, nil
}

func countBelow(xs []int64, v int64) int {
	n := 0
	for _, x := range xs {
		if x < v {
			n++
		}
	}
	return n
}

// goTimerLateness runs one time.AfterFunc per due time (ms relative to a
// window starting 2 s from now) and returns their lateness in ns.
func goTimerLateness(rel []int64) quantiles {
	late := make([]int64, len(rel))
	var wg sync.WaitGroup
	wg.Add(len(rel))
	start := (time.Now().UnixMilli() + 2000) * int64(time.Millisecond)
	for i, d := range rel {
		due := start + d*int64(time.Millisecond)
		time.AfterFunc(time.Until(time.Unix(0, due)), func() {
			late[i] = time.Now().UnixNano() - due
			wg.Done()
		})
	}
	wg.Wait()
	return summarize(late)
}
