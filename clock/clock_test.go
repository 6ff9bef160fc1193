package clock

import (
	"testing"
	"time"
)

func TestFakeTimersFireOnAdvanceNotOnJump(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFake(t0)
	a := f.NewTimer(10 * time.Second)
	b := f.NewTimer(20 * time.Second)
	f.Jump(time.Hour) // the wall clock moves, monotonic time does not
	select {
	case <-a.C():
		t.Fatal("a wall-clock jump fired a timer")
	default:
	}
	if f.Now() != t0.Add(time.Hour) || f.Since() != 0 {
		t.Fatalf("after jump: now %v since %v", f.Now(), f.Since())
	}
	f.Advance(10 * time.Second)
	select {
	case <-a.C():
	default:
		t.Fatal("timer a did not fire at its deadline")
	}
	if !b.Stop() || b.Stop() {
		t.Fatal("Stop should report true once, then false")
	}
	f.Advance(time.Minute)
	select {
	case <-b.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	if f.Waiters() != 0 {
		t.Fatalf("%d waiters left", f.Waiters())
	}
	if c := f.NewTimer(0); len(c.C()) != 1 {
		t.Fatal("a zero-duration timer must fire at once")
	}
}
