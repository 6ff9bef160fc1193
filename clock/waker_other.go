//go:build !linux

package clock

// NewWaker returns a Waker on the runtime's timers (the timerfd of the
// Linux build has no portable equivalent).
func (r *Real) NewWaker() (Waker, error) { return newTimerWaker(make(chan struct{}, 1)), nil }
