package engine

import (
	"log/slog"
	"runtime"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/queueindex"
)

// freeKeep bounds the recycled timers kept: after a herd the free list
// would otherwise hold one timer per message of it for the life of the
// process, and the garbage collector would scan them all at every cycle.
const freeKeep = 1 << 14

// dispatchBurstMs is how much of DispatchRate, in ms of it, the dispatcher
// may spend at once after a quieter spell: the token bucket's depth. At the
// default rate that is 50,000 messages, so a herd of 20,000 is made
// visible as fast as its fire records are written (the issue-8 target: a
// herd of 20,000 at 8 HTTP consumers within 100 ms), while the rate still
// bounds every longer span: in any interval of t ms at most
// rate*(t+dispatchBurstMs)/1000 messages fire. It was 10 ms until the fourth
// pass of issue 8 (docs/architecture.md, "The consumer path"). Fairness
// across topics does not depend on it: fire batches take from the topics in
// turn, and while two topics have messages due a batch is at most a quarter
// of DispatchBatch (batchSizeLocked).
const dispatchBurstMs = 100

// fire makes a batch visible: one fire record, then the queue indexes.
//
// The batch is applied once its record is written, not once it is
// durable: the record's fdatasync follows at once in the same group
// commit, but the messages do not wait for it (invariant E21). Under a
// send load the fsync that a fire record waited for was most of the
// lateness consumers saw. A fire record lost in a crash loses nothing:
// its messages are still pending in the log and fire again at recovery,
// so a message received in that window may be delivered again (as one
// received and not acknowledged before a crash is), never lost or early.
// What a consumer does next and the broker records (an ack, a nack, a
// trail entry) follows the fire record in the log, so its durability
// implies the fire's; state kept outside the log that depends on a fire
// syncs the log first (the remoting adapter's consumer offsets).
func (e *Engine) fire(batch []fireEntry, visible int64) {
	missed := windowMissed(batch, visible, e.readStored, e.opts.Logger)
	e.gate.RLock()
	defer e.gate.RUnlock()
	_, err := e.clog.AppendUnsynced(encodeFire(visible, batch))
	if err != nil {
		e.life.storageErr(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.opts.Logger.Error("fire record write failed; will retry", "messages", len(batch), "err", err)
		e.stats.FireErrors.Add(1)
		e.side.health.fireFailed(err, e.Now())
		e.disp.fireFailedLocked(batch)
		e.disp.recycleBatchLocked(batch)
		return
	}
	e.disp.fireWrittenLocked()
	e.side.health.fireOK()
	e.applyFireLocked(visible, batch, true)
	e.stats.WindowMissed.Add(missed)
	e.disp.recycleBatchLocked(batch)
}

// applyFireLocked appends fired messages to their queue indexes and
// updates the accounting. It runs live and in replay.
func (e *Engine) applyFireLocked(visible int64, batch []fireEntry, live bool) {
	type qk struct {
		topic uint32
		queue uint16
	}
	// Sized by a first pass: a fire of thousands grew each queue's slice
	// by doubling, three times the entries' bytes in garbage.
	counts := map[qk]int{}
	for _, fe := range batch {
		counts[qk{fe.topic, fe.queue}]++
	}
	groups := make(map[qk][]queueindex.Entry, len(counts))
	for k, n := range counts {
		groups[k] = make([]queueindex.Entry, 0, n)
	}
	for _, fe := range batch {
		e.disp.firedLocked(fe.pos)
		e.ovl.firedLocked(fe.pos, visible)
		e.segs.firedLocked(fe.pos, visible)
		k := qk{fe.topic, fe.queue}
		groups[k] = append(groups[k], queueindex.Entry{Pos: fe.pos, Due: fe.due, Visible: visible, Size: fe.size})
		if t := e.cat.byIDLocked(fe.topic); t != nil {
			t.pending--
			if live {
				t.fired++
			}
		}
		if live {
			e.stats.Lateness.Observe(float64(visible-fe.due) / 1000)
		}
	}
	for k, es := range groups {
		t := e.cat.byIDLocked(k.topic)
		if t == nil || int(k.queue) >= len(t.queues) {
			e.opts.Logger.Error("fire for unknown topic queue", "topic", k.topic, "queue", k.queue)
			continue
		}
		first, err := t.queues[k.queue].Append(es)
		if err != nil {
			// The fire record is durable; the index is re-derived from it
			// at the next recovery.
			e.opts.Logger.Error("queue index write failed", "topic", t.name, "err", err)
		}
		if e.cons.forGroupWaitingLocked() {
			e.cons.passOverLocked(t, k.queue, first, es, err == nil)
		}
	}
	e.stats.Pending.Add(-int64(len(batch)))
	e.side.fc.fired(batch)
	if live {
		e.stats.Fired.Add(uint64(len(batch)))
		e.life.notifyVisibleLocked()
	}
}

// herdShrink is the size above which the due heaps' arrays are given back
// once a herd has drained: a herd of a million leaves tens of megabytes
// behind otherwise. (The near index gives its memory back as it drains:
// near.go.)
const herdShrink = 1 << 16

// loop is the one goroutine that advances time: it has the dispatcher load
// buckets, advance the wheels and take a fire batch, hands the lease timers
// that end and the dead letters and trail that are due to the consumers,
// and writes the fire records. It owns nothing; all state it touches is
// under mu.
func (e *Engine) loop() {
	defer e.life.loopExited()
	defer e.disp.waitFires() // no fire outlives the loop
	sleeper := newLoopWait(e.opts.Clock, e.life, e.opts.Logger)
	defer sleeper.close()
	for {
		e.mu.Lock()
		if e.life.failureLocked() != nil {
			// Stopped: nothing more becomes visible.
			e.mu.Unlock()
			<-e.life.stopping()
			return
		}
		// base first: a clock moved between the two readings then shows
		// as a move after the timer starts, not as one already in base.
		base := e.opts.Clock.Since()
		now := e.Now()
		busy := e.disp.stepLoadLocked(now)
		if e.disp.advanceLocked(now, e.cons.timerEndedLocked) {
			busy = true
		}
		batch := e.disp.takeBatchLocked(now)
		wait := e.disp.waitLocked(now)
		dead := e.cons.deadLettersDueLocked(now)
		trail := e.cons.takeTrailLocked()
		e.mu.Unlock()
		if len(trail) > 0 {
			// Before the dead letters: a nack that ran out of attempts
			// comes before its dead-lettering in the log, as it happened.
			e.cons.writeTrail(trail)
		}
		if dead {
			e.cons.moveDeadLetters(e.applyMessageLocked)
		}
		if len(batch) > 0 {
			// The fire record's fsync runs beside the loop, which goes on
			// expiring and loading meanwhile: a herd's expiry does not wait
			// for its fires, so another topic's message due just after the
			// herd reaches its heap (and its fair share) at once. One fire
			// at a time (takeBatchLocked), so fires apply in log order.
			e.disp.goFire(func() {
				e.fire(batch, now)
				e.life.kickLoop()
			})
			continue
		}
		if busy {
			// More bounded steps to do at once; let the goroutines that
			// waited for the lock during this one run first.
			runtime.Gosched()
			continue
		}
		if !sleeper.sleep(wait, base) {
			return
		}
	}
}

// loopWait is how the loop sleeps between its steps: on the clock's
// waker when it has one (the system clock: clock.WakerClock), else on a
// timer of its own a wait (the manual clocks of tests). Only the loop's
// goroutine uses it.
type loopWait struct {
	clock clock.Clock
	waker clock.Waker // nil: a timer a wait
	life  *lifecycle
}

func newLoopWait(c clock.Clock, life *lifecycle, log *slog.Logger) *loopWait {
	w := &loopWait{clock: c, life: life}
	if wc, ok := c.(clock.WakerClock); ok {
		var err error
		if w.waker, err = wc.NewWaker(); err != nil {
			log.Warn("the dispatch loop's waker", "err", err)
		}
	}
	return w
}

// close releases the waker.
func (w *loopWait) close() {
	if w.waker != nil {
		w.waker.Close()
	}
}

// sleep waits until wait has passed, the loop is kicked, or the engine
// stops (it then reports false). base is the clock's Since when wait
// was computed.
func (w *loopWait) sleep(wait, base time.Duration) bool {
	var fired <-chan struct{}
	var tc <-chan time.Time
	if w.waker != nil {
		w.waker.Arm(wait)
		fired = w.waker.C()
	} else {
		timer := w.clock.NewTimer(wait)
		defer timer.Stop()
		tc = timer.C()
	}
	if w.clock.Since()-base >= time.Millisecond {
		// The clock moved on between computing wait and starting the
		// timer (a preempted loop; a test's clock advanced): the timer
		// would fire that much too late, or, on a manual clock, never.
		// Compute again.
		return true
	}
	select {
	case <-fired: // perhaps a spurious wake (clock.Waker): the loop computes again
	case <-tc:
	case <-w.life.kicked():
	case <-w.life.stopping():
		return false
	}
	return true
}

// windowMissed counts the fired messages of batch, made visible at
// visible, whose tolerance window had ended. Only windowed messages that
// fire late at all are read; a read error is logged, not counted. Called
// without locks; read reads a stored message (Engine.readStored).
func windowMissed(batch []fireEntry, visible int64, read func(uint64) (*message.Stored, int, error), log *slog.Logger) uint64 {
	var n uint64
	for _, fe := range batch {
		if !fe.windowed || visible <= fe.due {
			continue
		}
		s, _, err := read(fe.pos)
		if err != nil {
			log.Warn("window check: message unreadable", "pos", fe.pos, "err", err)
			continue
		}
		if visible > windowEnd(s) {
			n++
		}
	}
	return n
}
