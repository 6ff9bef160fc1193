package engine

import (
	"runtime"
	"time"

	"github.com/hourglass-mq/hourglass/queueindex"
)

// pushDispatchLocked stages a message timer that is not in the wheel in
// its topic's due heap; it fires once it is due (and within the rate),
// unless a change makes its entry stale first (dueSet).
func (e *Engine) pushDispatchLocked(ref timerRef) {
	t := e.newTimerLocked(ref)
	e.disp.near.put(ref.pos, t)
	e.disp.due.stage(t)
}

// stagedLocked reports whether the message at pos is staged: in a due heap
// before its time, not yet taken for a fire record. It is still pending.
func (e *Engine) stagedLocked(pos uint64, timer int64) bool {
	t := e.disp.near.get(pos)
	return t != nil && !t.Scheduled() && timer > e.Now()
}

// takenLocked reports whether the message at pos was taken for the fire
// record being written.
func (e *Engine) takenLocked(pos uint64) bool {
	_, ok := e.disp.taken[pos]
	return ok
}

// validLocked reports whether a timer loaded from a bucket should fire:
// its record still exists, it was not cancelled, moved or fired, and it is
// not one the recovery filter knows to be visible already.
func (e *Engine) validLocked(pos uint64, due int64) bool {
	return e.validFromLocked(pos, due, uint64(e.clog.Start()))
}

// validFromLocked is validLocked with the log's start given, for a caller
// that checks millions of entries while the log cannot shrink (recovery).
func (e *Engine) validFromLocked(pos uint64, due int64, logStart uint64) bool {
	if e.physLocked(pos) < logStart || e.disp.near.has(pos) || e.takenLocked(pos) {
		return false
	}
	if ov := e.ovl.entries[pos]; ov != nil {
		return !ov.Changing && !ov.Cancelled && !ov.Fired && ov.Due == due
	}
	return !e.firedAtRecoveryLocked(pos, due)
}

// expireLocked is the message wheel's fire callback: it stages the
// message, maybe before its time (stageAhead). The timer stays in near:
// staging a herd touches no map, which was most of its cost.
func (e *Engine) expireLocked(t *wheelTimer) {
	e.disp.due.stage(t)
}

// expireLeaseLocked is the lease wheel's fire callback.
func (e *Engine) expireLeaseLocked(t *wheelTimer) {
	ref := t.Value
	e.recycleTimerLocked(t)
	switch ref.kind {
	case refLease:
		e.leaseExpiredLocked(ref)
	case refRetry:
		e.retryReadyLocked(ref)
	}
}

// newTimerLocked returns a recycled or new wheel timer.
func (e *Engine) newTimerLocked(ref timerRef) *wheelTimer {
	var t *wheelTimer
	if n := len(e.disp.free); n > 0 {
		t = e.disp.free[n-1]
		e.disp.free = e.disp.free[:n-1]
	} else {
		t = &wheelTimer{}
	}
	t.Value = ref
	return t
}

// freeKeep bounds the recycled timers kept: after a herd the free list
// would otherwise hold one timer per message of it for the life of the
// process, and the garbage collector would scan them all at every cycle.
const freeKeep = 1 << 14

// recycleTimerLocked gives back a timer that is in no wheel and no map.
func (e *Engine) recycleTimerLocked(t *wheelTimer) {
	t.Value = timerRef{}
	if len(e.disp.free) < freeKeep {
		e.disp.free = append(e.disp.free, t)
	}
}

// addWheelLocked schedules a lease or retry timer in the lease wheel; one
// already due fires at the next tick.
func (e *Engine) addWheelLocked(ref timerRef) *wheelTimer {
	if ref.due <= e.disp.leaseAt {
		ref.due = e.disp.leaseAt + 1
	}
	t := e.newTimerLocked(ref)
	e.disp.leases.Add(t, ref.due)
	return t
}

// takeBatchLocked takes the next fire batch from the dispatch heap, within
// the rate limit: messages due at now and not after the message wheel's
// time, since every timer still in the wheel is due after that: so messages
// leave in due order even when the wheel lags (FIFO topics rely on it).
func (e *Engine) takeBatchLocked(now int64) []fireEntry {
	upTo := min(now, e.disp.lastAdvance)
	if !e.disp.due.ready(upTo) {
		e.disp.batchRamp = 0 // idle: the next batch starts small again
		return nil
	}
	if len(e.disp.inflight) > 0 || now < e.disp.fireRetryAt {
		return nil // a fire in flight (one at a time), or a pause after a failed one
	}
	n := e.batchSizeLocked(upTo)
	if e.opts.DispatchRate > 0 {
		rate := float64(e.opts.DispatchRate)
		e.disp.tokens += float64(now-e.disp.tokensAt) * rate / 1000
		e.disp.tokensAt = now
		if burst := e.rateBurst(); e.disp.tokens > burst {
			e.disp.tokens = burst
		}
		if int(e.disp.tokens) < n {
			n = int(e.disp.tokens)
		}
	}
	n = min(n, e.disp.due.len())
	if n <= 0 {
		return nil
	}
	batch := e.disp.due.take(n, upTo, &e.disp.near, e.disp.taken, e.recycleTimerLocked, make([]fireEntry, 0, n))
	if e.opts.DispatchRate > 0 {
		e.disp.tokens -= float64(len(batch))
	}
	if len(batch) == 0 {
		return nil // only stale entries were due
	}
	e.disp.inflight = batch
	return batch
}

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

// rateBurst is the token bucket's depth: dispatchBurstMs of DispatchRate,
// and never less than one full fire batch. So a rate under 40,960/s bounds
// a herd only past its first DispatchBatch (README says so). A shallower
// bucket was tried: under a virtual clock, whose time moves only by
// advances, an advance then made only a tenth of the rate visible and
// never settled, since tokens accrue in broker time and the bucket caps
// what a jump brings.
func (e *Engine) rateBurst() float64 {
	return max(float64(e.opts.DispatchBatch), float64(e.opts.DispatchRate)*dispatchBurstMs/1000)
}

// frontierLocked is the fire frontier: every timer due at or before it has
// been made visible. It is never past the broker clock, though the wheel
// is (stageAhead): recovery raises the clock to the checkpoint's frontier.
func (e *Engine) frontierLocked() int64 {
	f := min(e.disp.lastAdvance, e.Now())
	if first, ok := e.disp.due.min(); ok && first-1 < f {
		f = first - 1
	}
	if ld := e.disp.load; ld != nil {
		// Timers added while their bucket loads are not in the wheel yet.
		for _, r := range ld.delta {
			f = min(f, r.due-1)
		}
	}
	for _, fe := range e.disp.inflight {
		if fe.due-1 < f {
			f = fe.due - 1
		}
	}
	return f
}

// loop is the one goroutine that advances time: it loads buckets, advances
// the wheel and writes fire records. It owns nothing else; all state it
// touches is under mu.
func (e *Engine) loop() {
	defer close(e.life.loopDone)
	defer e.disp.fires.Wait() // no fire outlives the loop
	for {
		e.mu.Lock()
		if e.life.failed != nil {
			// Stopped: nothing more becomes visible.
			e.mu.Unlock()
			<-e.life.done
			return
		}
		// base first: a clock moved between the two readings then shows
		// as a move after the timer starts, not as one already in base.
		base := e.opts.Clock.Since()
		now := e.Now()
		busy := e.stepLoadLocked(now)
		if e.advanceLocked(now) {
			busy = true
		}
		batch := e.takeBatchLocked(now)
		wait := e.waitLocked(now)
		dead := len(e.cons.deadLetters) > 0 && now >= e.cons.deadLetterAfter
		e.mu.Unlock()
		if dead {
			e.moveDeadLetters()
		}
		if len(batch) > 0 {
			// The fire record's fsync runs beside the loop, which goes on
			// expiring and loading meanwhile: a herd's expiry does not wait
			// for its fires, so another topic's message due just after the
			// herd reaches its heap (and its fair share) at once. One fire
			// at a time (takeBatchLocked), so fires apply in log order.
			e.disp.fires.Add(1)
			go func() {
				defer e.disp.fires.Done()
				e.fire(batch, now)
				e.kickLoop()
			}()
			continue
		}
		if busy {
			// More bounded steps to do at once; let the goroutines that
			// waited for the lock during this one run first.
			runtime.Gosched()
			continue
		}
		timer := e.opts.Clock.NewTimer(wait)
		if e.opts.Clock.Since()-base >= time.Millisecond {
			// The clock moved on between computing wait and starting the
			// timer (a preempted loop; a test's clock advanced): the timer
			// would fire that much too late, or, on a manual clock, never.
			// Compute again.
			timer.Stop()
			continue
		}
		select {
		case <-timer.C():
		case <-e.life.kick:
			timer.Stop()
		case <-e.life.done:
			timer.Stop()
			return
		}
	}
}

// waitLocked says how long the loop may sleep.
func (e *Engine) waitLocked(now int64) time.Duration {
	next := e.disp.loadedUntil - e.opts.Lookahead.Milliseconds()
	if d, ok := e.disp.wheel.NextDeadline(); ok && d-stageAhead < next {
		next = d - stageAhead
	}
	if d, ok := e.disp.leases.NextDeadline(); ok && d < next {
		next = d
	}
	if first, ok := e.disp.due.nextAfter(now); ok && first < next {
		next = first // a staged message falls due (see nextAfter)
	}
	if e.disp.due.ready(now) {
		ms, ok := e.tokenWaitLocked(now)
		switch {
		case now < e.disp.fireRetryAt && len(e.disp.inflight) == 0:
			// After a failed fire: tokens or not, the next one waits for
			// the pause's end.
			next = min(next, max(e.disp.fireRetryAt, now+ms))
		case ok && now+ms < next:
			next = now + ms
		}
	}
	d := time.Duration(next-now) * time.Millisecond
	if d < time.Millisecond {
		d = time.Millisecond
	}
	if d > time.Second {
		// Wake at least once a second to notice wall-clock steps.
		d = time.Second
	}
	return d
}

// tokenWaitLocked says, while messages are due, in how many ms the loop
// must wake to take the next fire batch: when enough tokens for a useful
// batch have accrued (at least 1 ms). A useful batch is a full one while
// one topic has messages due, and firstBatch while several have (see
// tokenWantLocked). It need not wake (false) while a fire is in flight, since
// the fire's goroutine kicks the loop when done (one fire at a time), nor
// without a rate. Before, a full bucket made the wait negative and the
// loop woke every millisecond of a herd's fires, taking the engine's lock
// each time for nothing.
func (e *Engine) tokenWaitLocked(now int64) (int64, bool) {
	if len(e.disp.inflight) > 0 || e.opts.DispatchRate <= 0 {
		return 0, false
	}
	need := float64(e.tokenWantLocked(now)) - e.disp.tokens
	return max(1, int64(need*1000/float64(e.opts.DispatchRate))+1), true
}

// The pause after a failed fire record, in ms: it doubles with each
// failure in a row, from fireBackoffMin up to fireBackoffMax.
const (
	fireBackoffMin = 100
	fireBackoffMax = 5000
)

// fire makes a batch visible: one fire record, then the queue indexes.
func (e *Engine) fire(batch []fireEntry, visible int64) {
	missed := e.windowMissed(batch, visible)
	e.gate.RLock()
	defer e.gate.RUnlock()
	_, err := e.clog.Append(encodeFire(visible, batch))
	if err != nil {
		e.storageErr(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.disp.inflight = nil
	if err != nil {
		// Put the batch back; it is retried after a pause. Nothing is lost:
		// the timers are still in their buckets and the log.
		e.opts.Logger.Error("fire record write failed; will retry", "messages", len(batch), "err", err)
		e.stats.FireErrors.Add(1)
		e.side.health.fireFailed(err, e.Now())
		for _, fe := range batch {
			delete(e.disp.taken, fe.pos)
			e.pushDispatchLocked(timerRef{pos: fe.pos, due: fe.due, topic: fe.topic, queue: fe.queue, windowed: fe.windowed})
		}
		// Pause before the next fire, longer after each failure in a row:
		// not a token debt, which at a low rate stalled dispatch for
		// DispatchBatch/rate seconds after one failure, and without a rate
		// was no pause at all (a full disk logged thousands of failures a
		// second).
		d := e.disp
		d.fireBackoff = min(max(2*d.fireBackoff, fireBackoffMin), fireBackoffMax)
		d.fireRetryAt = e.Now() + d.fireBackoff
		return
	}
	e.disp.fireBackoff = 0
	e.side.health.fireOK()
	e.applyFireLocked(visible, batch, true)
	e.stats.WindowMissed.Add(missed)
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
		delete(e.disp.taken, fe.pos) // its fire is done
		if ov := e.ovl.entries[fe.pos]; ov != nil {
			ov.Fired, ov.Visible = true, visible
			e.journalLocked(fe.pos)
		}
		k := qk{fe.topic, fe.queue}
		groups[k] = append(groups[k], queueindex.Entry{Pos: fe.pos, Due: fe.due, Visible: visible, Size: fe.size})
		if t := e.cat.topicsByID[fe.topic]; t != nil {
			t.pending--
			if live {
				t.fired++
			}
		}
		seg := e.segOfLocked(e.physLocked(fe.pos))
		e.segs.pending[seg]--
		if visible > e.segs.last[seg] {
			e.segs.last[seg] = visible
		}
		if live {
			e.stats.Lateness.Observe(float64(visible-fe.due) / 1000)
		}
	}
	for k, es := range groups {
		t := e.cat.topicsByID[k.topic]
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
		if len(e.cons.forGroup) > 0 {
			e.passOverLocked(t, k.queue, first, es, err == nil)
		}
	}
	e.stats.Pending.Add(-int64(len(batch)))
	e.forecastFiredLocked(batch)
	if live {
		e.stats.Fired.Add(uint64(len(batch)))
		e.notifyVisibleLocked()
	}
}

// herdShrink is the size above which the due heaps' arrays are given back
// once a herd has drained: a herd of a million leaves tens of megabytes
// behind otherwise. (The near index gives its memory back as it drains:
// near.go.)
const herdShrink = 1 << 16

// advanceLocked advances the wheels by a bounded step: the lease wheel
// towards now, the message wheel towards now + stageAhead (its timers are
// staged, not fired: see dispatch.go). The message wheel never passes a
// timer bucket that is not in the wheel yet: while a bucket loads it stops
// short of it (see bucketLoad), and otherwise short of loadedUntil, which is
// behind now only until the loop's next turn starts the next load (after
// one ended, or after a failed read, whose bucket is retried). Past either,
// the fire frontier would vouch for timers still in their bucket files, and
// recovery would skip them as visible. It returns whether expired timers
// are left for the next step.
func (e *Engine) advanceLocked(now int64) bool {
	d := e.disp
	more := false
	if now > d.leaseAt || d.leasing {
		to := max(now, d.leaseAt)
		_, d.leasing = d.leases.AdvanceN(to, expireChunk, e.expireLeaseLocked)
		if !d.leasing {
			d.leaseAt = to
		}
		more = d.leasing
	}
	to := min(now+stageAhead, d.loadedUntil-1)
	if d.load != nil {
		to = min(to, d.load.bucket-1)
	}
	if to <= d.lastAdvance && !d.advancing {
		return more
	}
	to = max(to, d.lastAdvance)
	_, d.advancing = d.wheel.AdvanceN(to, expireChunk, e.expireLocked)
	if !d.advancing {
		d.lastAdvance = to
	}
	return more || d.advancing
}
