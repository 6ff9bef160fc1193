package clock

import "time"

// Waker is a reusable one-shot wake-up for a goroutine that sleeps until
// a time it computes again after every wake: the engine's loop. Unlike a
// Timer it is armed again rather than made anew, and a wake may be
// spurious (an arming it replaced may still deliver one): the waiter
// must treat a receive from C as "look again", never as "the time has
// come".
type Waker interface {
	// Arm makes C deliver once, d from now, replacing any earlier
	// arming that has not fired. d <= 0 delivers at once.
	Arm(d time.Duration)
	// C delivers the wake-ups.
	C() <-chan struct{}
	// Close releases the waker. The waiter must not Arm it after: what
	// C then delivers is unspecified.
	Close()
}

// WakerClock is a Clock that can make a Waker. Real is one; the manual
// clocks of tests are not, and their users arm a Timer for each wait.
type WakerClock interface {
	// NewWaker returns a usable Waker, and a non-nil error when it is not
	// the kind the platform prefers (the waker then works, on the
	// runtime's timers): for the caller to log.
	NewWaker() (Waker, error)
}

// timerWaker is the portable Waker, on the runtime's timers.
type timerWaker struct {
	t *time.Timer
	c chan struct{}
}

// newTimerWaker returns a disarmed timerWaker that delivers to c (a
// channel of capacity 1), the fdWaker's own when it is its backup.
func newTimerWaker(c chan struct{}) *timerWaker {
	w := &timerWaker{c: c}
	w.t = time.AfterFunc(time.Hour, func() { wake(w.c) })
	w.t.Stop()
	return w
}

func (w *timerWaker) Arm(d time.Duration) {
	w.t.Stop()
	drain(w.c)
	w.t.Reset(max(d, 0))
}

func (w *timerWaker) C() <-chan struct{} { return w.c }
func (w *timerWaker) Close()             { w.t.Stop() }

// wake delivers a wake-up unless one is pending already (one is enough).
func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// drain drops a pending wake-up of an arming being replaced.
func drain(c chan struct{}) {
	select {
	case <-c:
	default:
	}
}
