package clock

import (
	"runtime"
	"testing"
	"time"
)

// wakers are the Waker implementations this platform has: Real's and the
// portable one on the runtime's timers (Real's is that one off Linux).
func wakers() map[string]func() Waker {
	return map[string]func() Waker{
		"real":  func() Waker { w, _ := NewReal().NewWaker(); return w },
		"timer": func() Waker { return newTimerWaker(make(chan struct{}, 1)) },
	}
}

// awaitWake returns how long after start C delivered, failing the test
// after limit.
func awaitWake(t *testing.T, w Waker, start time.Time, limit time.Duration) time.Duration {
	t.Helper()
	select {
	case <-w.C():
		return time.Since(start)
	case <-time.After(limit):
		t.Fatalf("no wake-up within %v", limit)
		return 0
	}
}

func TestWakerWakesNoSoonerThanArmed(t *testing.T) {
	for name, mk := range wakers() {
		t.Run(name, func(t *testing.T) {
			w := mk()
			defer w.Close()
			for _, d := range []time.Duration{20 * time.Millisecond, 3 * time.Millisecond} {
				start := time.Now()
				w.Arm(d)
				if got := awaitWake(t, w, start, 10*time.Second); got < d {
					t.Fatalf("armed for %v, woke after %v: early", d, got)
				}
			}
		})
	}
}

func TestWakerArmAtOrBeforeNowWakesAtOnce(t *testing.T) {
	for name, mk := range wakers() {
		t.Run(name, func(t *testing.T) {
			w := mk()
			defer w.Close()
			for _, d := range []time.Duration{0, -time.Second} {
				w.Arm(d) // a zero it_value would disarm a timerfd: never a wake
				awaitWake(t, w, time.Now(), 10*time.Second)
			}
		})
	}
}

func TestWakerRearmReplacesTheEarlierArming(t *testing.T) {
	for name, mk := range wakers() {
		t.Run(name, func(t *testing.T) {
			w := mk()
			defer w.Close()
			w.Arm(time.Hour)
			start := time.Now()
			w.Arm(5 * time.Millisecond) // the hour is replaced, not kept
			awaitWake(t, w, start, 10*time.Second)
		})
	}
}

func TestWakerClosedArmsNothingAndWakesAtOnce(t *testing.T) {
	for name, mk := range wakers() {
		t.Run(name, func(t *testing.T) {
			w := mk()
			w.Close()
			if name == "timer" {
				return // its Arm after Close is Reset of a stopped timer: nothing to check
			}
			// The timerfd's number may belong to another file by now:
			// Arm must not touch it, and must not leave the waiter
			// asleep for ever either.
			w.Arm(time.Hour)
			awaitWake(t, w, time.Now(), 10*time.Second)
		})
	}
}

func TestWakerCloseEndsItsReader(t *testing.T) {
	before := runtime.NumGoroutine()
	ws := make([]Waker, 20)
	for i := range ws {
		ws[i], _ = NewReal().NewWaker()
	}
	for _, w := range ws {
		w.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after closing 20 wakers, %d before", runtime.NumGoroutine(), before)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}
