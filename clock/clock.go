// Package clock is the time source hourglass reads, injected so that tests
// advance time instead of sleeping.
//
// Real is the system clock. Fake is a manual clock for deterministic tests:
// time moves only when the test calls Advance or Set, and Set may move the
// wall clock backwards to simulate a clock jump.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time and wakes a waiter at a time.
type Clock interface {
	// Now returns the current wall-clock time.
	Now() time.Time
	// Since returns the monotonic time elapsed since an arbitrary fixed
	// origin of this clock; it never goes backwards, whatever the wall
	// clock does. It is used to detect wall-clock jumps.
	Since() time.Duration
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer, like time.Timer.
type Timer interface {
	// C delivers the fire time once.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// Real is the system clock.
type Real struct{ origin time.Time }

// NewReal returns the system clock.
func NewReal() *Real { return &Real{origin: time.Now()} }

// Now returns time.Now().
func (r *Real) Now() time.Time { return time.Now() }

// Since returns the monotonic time since the clock was made.
func (r *Real) Since() time.Duration { return time.Since(r.origin) }

// NewTimer wraps time.NewTimer.
func (r *Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

// Fake is a manual clock. Its zero value is not usable; use NewFake.
type Fake struct {
	mu struct {
		sync.Mutex
		wall   time.Time
		mono   time.Duration
		timers []*fakeTimer
	}
}

// NewFake returns a fake clock reading wall.
func NewFake(wall time.Time) *Fake {
	f := &Fake{}
	f.mu.wall = wall
	return f
}

// Now returns the fake wall time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.wall
}

// Since returns the fake monotonic time.
func (f *Fake) Since() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.mono
}

// Advance moves both wall and monotonic time forward by d and fires every
// timer that came due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.mu.wall = f.mu.wall.Add(d)
	f.mu.mono += d
	f.fireLocked()
	f.mu.Unlock()
}

// Jump moves only the wall clock by d (forward or back), as an NTP step or
// an operator would; monotonic time and timers are unaffected.
func (f *Fake) Jump(d time.Duration) {
	f.mu.Lock()
	f.mu.wall = f.mu.wall.Add(d)
	f.mu.Unlock()
}

// NewTimer returns a timer driven by Advance.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, at: f.mu.mono + d, c: make(chan time.Time, 1)}
	f.mu.timers = append(f.mu.timers, t)
	f.fireLocked()
	return t
}

// Waiters returns the number of timers not yet fired or stopped; tests use it
// to wait until a goroutine is parked on the clock.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.mu.timers)
}

func (f *Fake) fireLocked() {
	kept := f.mu.timers[:0]
	for _, t := range f.mu.timers {
		if t.at <= f.mu.mono {
			t.c <- f.mu.wall
			continue
		}
		kept = append(kept, t)
	}
	for i := len(kept); i < len(f.mu.timers); i++ {
		f.mu.timers[i] = nil
	}
	f.mu.timers = kept
}

type fakeTimer struct {
	f  *Fake
	at time.Duration
	c  chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	for i, o := range t.f.mu.timers {
		if o == t {
			t.f.mu.timers = append(t.f.mu.timers[:i], t.f.mu.timers[i+1:]...)
			return true
		}
	}
	return false
}
