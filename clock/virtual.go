package clock

import (
	"sync"
	"time"
)

// Virtual is the clock of a broker run for users' integration tests
// (hourglass serve --clock virtual): its wall and monotonic time move only
// when AdvanceTo is called, so a test checks "the order closes after 30
// minutes" without waiting 30 minutes.
//
// Its timers are hybrids, and that is the point of the type (Fake's timers
// fire on Advance only): a timer fires when virtual time passes its
// deadline OR when its duration has passed in real time, whichever comes
// first. So
//
//   - an advance wakes everything waiting on virtual time at once (the
//     engine's dispatch loop sleeps on these timers);
//   - a waiter that computed its duration from a reading taken just before
//     an advance (a lost wake-up a purely virtual timer would keep for
//     ever) still wakes within that duration of real time, and the
//     engine's loop never sleeps more than a second;
//   - periodic chores (checkpoints) and long-poll receives still end in
//     real time, so a user's receive with wait 2s returns after at most
//     2 s even if nobody advances the clock.
//
// A spurious early wake-up is harmless to every user of Clock: each one
// re-reads Now and waits again.
type Virtual struct {
	mu struct {
		sync.Mutex
		wall   time.Time
		mono   time.Duration
		timers map[*virtualTimer]struct{}
	}
}

// NewVirtual returns a virtual clock reading start.
func NewVirtual(start time.Time) *Virtual {
	v := &Virtual{}
	v.mu.wall = start
	v.mu.timers = map[*virtualTimer]struct{}{}
	return v
}

// Now returns the virtual wall time.
func (v *Virtual) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.mu.wall
}

// Since returns the virtual monotonic time: it moves with the wall time,
// so an advance is never reported as a wall-clock jump.
func (v *Virtual) Since() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.mu.mono
}

// AdvanceTo moves the virtual time forward to t and fires every timer whose
// virtual deadline it passes. A t at or before the current time changes
// nothing: the clock never runs backwards. It returns the time after the
// call.
func (v *Virtual) AdvanceTo(t time.Time) time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	if d := t.Sub(v.mu.wall); d > 0 {
		v.mu.wall = t
		v.mu.mono += d
		for vt := range v.mu.timers {
			if vt.at <= v.mu.mono {
				v.fireLocked(vt)
			}
		}
	}
	return v.mu.wall
}

// NewTimer returns a timer that fires after d of virtual time or of real
// time, whichever passes first.
func (v *Virtual) NewTimer(d time.Duration) Timer {
	v.mu.Lock()
	defer v.mu.Unlock()
	vt := &virtualTimer{v: v, at: v.mu.mono + d, c: make(chan time.Time, 1)}
	if d <= 0 {
		vt.c <- v.mu.wall
		return vt
	}
	v.mu.timers[vt] = struct{}{}
	vt.real = time.AfterFunc(d, func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		if _, ok := v.mu.timers[vt]; ok {
			v.fireLocked(vt)
		}
	})
	return vt
}

// Waiters returns the number of timers neither fired nor stopped.
func (v *Virtual) Waiters() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.mu.timers)
}

// fireLocked delivers vt's one value and forgets it.
func (v *Virtual) fireLocked(vt *virtualTimer) {
	delete(v.mu.timers, vt)
	if vt.real != nil {
		vt.real.Stop()
	}
	vt.c <- v.mu.wall // buffered, and sent at most once
}

type virtualTimer struct {
	v    *Virtual
	at   time.Duration // virtual monotonic deadline
	c    chan time.Time
	real *time.Timer // set before the timer is shared; the real-time bound
}

func (t *virtualTimer) C() <-chan time.Time { return t.c }

func (t *virtualTimer) Stop() bool {
	t.v.mu.Lock()
	defer t.v.mu.Unlock()
	if _, ok := t.v.mu.timers[t]; !ok {
		return false
	}
	delete(t.v.mu.timers, t)
	t.real.Stop()
	return true
}
