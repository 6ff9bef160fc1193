package engine

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
)

// Waiting for the dispatch loop to settle, for the tests that check what
// an engine serves at a time.

// settled reports whether e has made visible everything due at or before
// t: the timer buckets up to t are loaded, no timer due by t is left in the
// wheel, and none waits for dispatch or for its fire record. (An idle loop
// need not have advanced its wheel to t.)
func settled(e *Engine, t int64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.disp.loadedUntil <= t || e.disp.due.ready(t) || len(e.disp.inflight) > 0 || e.disp.load != nil || e.disp.advancing {
		return false
	}
	early := false
	e.disp.near.each(func(_ uint64, w *wheelTimer) { early = early || w.Value.due <= t })
	return !early
}

// engineState describes what keeps e from settling, for failure messages.
func engineState(e *Engine) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	nearMin := int64(-1)
	e.disp.near.each(func(_ uint64, w *wheelTimer) {
		if nearMin < 0 || w.Value.due < nearMin {
			nearMin = w.Value.due
		}
	})
	s := fmt.Sprintf("now=%d lastAdvance=%d loadedUntil=%d dispatch=%d inflight=%d near=%d (earliest %d) fire-errors=%d timer-load-errors=%d",
		e.Now(), e.disp.lastAdvance, e.disp.loadedUntil, e.disp.due.len(), len(e.disp.inflight), e.disp.near.len(), nearMin,
		e.stats.FireErrors.Load(), e.stats.TimerLoadErrors.Load())
	if first, ok := e.disp.due.min(); ok {
		s += fmt.Sprintf(" earliest due=%d", first)
	}
	if e.disp.load != nil {
		s += fmt.Sprintf(" loading bucket %d (ready %v, %d/%d)", e.disp.load.bucket, e.disp.load.ready, e.disp.load.next, len(e.disp.load.entries))
	}
	return s
}

// waitSettled waits, in real time, until e settled at t.
//
// With a fake clock the dispatch loop can miss a wake-up that a real clock
// would not: if the test advances the clock after the loop read the time
// but before it armed its timer, the timer is armed from the new time and,
// time standing still, never fires. A real clock moves on and fires it a
// moment late. So when the engine is slow to settle, the loop is woken, as
// the passing of time would.
// nudges counts the wake-ups waitSettled gave, for the tests' logs.
var nudges atomic.Int64

// waitParked waits until e's dispatch loop and checkpointer both sleep on
// the fake clock clk with no wake-up pending, so that a following Advance
// reaches them (see waitSettled).
func waitParked(e *Engine, clk *clock.Fake) {
	deadline := time.Now().Add(time.Second)
	for (clk.Waiters() < 2 || e.life.kickPending() || firing(e)) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Microsecond)
	}
}

// firing reports whether a fire record is being written (the loop may be
// parked meanwhile: fires run beside it).
func firing(e *Engine) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.disp.inflight) > 0
}

func waitSettled(e *Engine, t int64, timeout time.Duration) bool {
	start := time.Now()
	nudge := start.Add(20 * time.Millisecond)
	for !settled(e, t) {
		now := time.Now()
		if now.After(start.Add(timeout)) {
			return false
		}
		if now.After(nudge) {
			e.life.kickLoop()
			nudges.Add(1)
			nudge = now.Add(20 * time.Millisecond)
		}
		select {
		case <-e.VisibleSignal():
		case <-time.After(200 * time.Microsecond):
		}
	}
	return true
}
