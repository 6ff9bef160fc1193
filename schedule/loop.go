package schedule

import (
	"container/heap"
	"time"
)

// The runner's loop: one goroutine that wakes when a schedule falls due
// (or is kicked), takes what is due and sends it.

func (r *Runner) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// loop is the one goroutine that sends firings.
func (r *Runner) loop() {
	defer close(r.loopDone)
	for {
		r.opMu.Lock()
		// base first: a clock moved between the two readings then shows
		// as a move after the timer starts (read the other way round, it
		// would be in base and missed).
		base := r.opts.Clock.Since()
		now := r.opts.Broker.Now()
		r.mu.Lock()
		batch := r.takeLocked(now)
		wait := r.waitLocked(now)
		r.mu.Unlock()
		if len(batch) > 0 {
			r.fire(batch, now)
			r.opMu.Unlock()
			continue
		}
		r.opMu.Unlock()
		t := r.opts.Clock.NewTimer(wait)
		if r.opts.Clock.Since()-base >= time.Millisecond {
			// The clock moved on between computing wait and starting the
			// timer (a preempted loop; a test's clock advanced): the timer
			// would fire that much too late, or, on a manual clock, not
			// until the clock moves again. Compute again.
			t.Stop()
			continue
		}
		select {
		case <-t.C():
		case <-r.kick:
			t.Stop()
		case <-r.done:
			t.Stop()
			return
		}
	}
}

// takeLocked takes the firings due at now, up to MaxBatch: from each
// schedule due, its firings in order, as many as are due (several after a
// catch-up or a clock jump). The schedules taken leave the heap until fire
// puts them back.
func (r *Runner) takeLocked(now int64) []*group {
	if r.failed != nil {
		return nil
	}
	lead := r.opts.Lead.Milliseconds()
	var batch []*group
	n := 0
	for len(r.due) > 0 && r.due[0].due <= now && n < r.opts.MaxBatch {
		e := heap.Pop(&r.due).(*entry)
		g := &group{e: e}
		for t := e.next; t != 0 && t-lead <= now && n < r.opts.MaxBatch; t = e.spec.Next(t, e.sc.Created) {
			g.fs = append(g.fs, &firing{fire: t, key: FireKey(keyOf(e.sc), t)})
			n++
		}
		batch = append(batch, g)
	}
	r.firing = len(batch) > 0
	return batch
}

// waitLocked is how long the loop may sleep: until the next entry is due,
// at most a second (a clock step or a lost wake-up costs no more).
func (r *Runner) waitLocked(now int64) time.Duration {
	d := time.Second
	if len(r.due) > 0 {
		d = min(d, time.Duration(r.due[0].due-now)*time.Millisecond)
	}
	return max(d, time.Millisecond)
}
