package clock

import (
	"testing"
	"time"
)

func TestVirtualAdvanceFiresTimersAndNeverRunsBackwards(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	v := NewVirtual(t0)
	long := v.NewTimer(time.Hour) // real bound far away: only an advance fires it
	later := v.NewTimer(2 * time.Hour)
	if got := v.AdvanceTo(t0.Add(-time.Minute)); !got.Equal(t0) {
		t.Fatalf("AdvanceTo into the past moved the clock to %v", got)
	}
	if got := v.AdvanceTo(t0.Add(90 * time.Minute)); !got.Equal(t0.Add(90 * time.Minute)) {
		t.Fatalf("AdvanceTo returned %v", got)
	}
	select {
	case at := <-long.C():
		if !at.Equal(t0.Add(90 * time.Minute)) {
			t.Fatalf("timer delivered %v, want the virtual time", at)
		}
	default:
		t.Fatal("a timer whose virtual deadline passed did not fire")
	}
	if v.Since() != 90*time.Minute {
		t.Fatalf("monotonic time %v, want 90m", v.Since())
	}
	if v.Waiters() != 1 || !later.Stop() || later.Stop() {
		t.Fatalf("the 2h timer should be the one waiter, and stop once (waiters %d)", v.Waiters())
	}
	v.AdvanceTo(t0.Add(3 * time.Hour))
	select {
	case <-later.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	if z := v.NewTimer(0); len(z.C()) != 1 {
		t.Fatal("a zero timer must fire at once")
	}
}

// TestVirtualTimerRealBound: a timer fires after its duration in real time
// even when nobody advances the virtual clock (long polls and the engine's
// loop rely on it).
func TestVirtualTimerRealBound(t *testing.T) {
	v := NewVirtual(time.Unix(0, 0))
	start := time.Now()
	tm := v.NewTimer(20 * time.Millisecond)
	select {
	case at := <-tm.C():
		if !at.Equal(time.Unix(0, 0)) {
			t.Fatalf("delivered %v, want the unchanged virtual time", at)
		}
		if el := time.Since(start); el < 20*time.Millisecond {
			t.Fatalf("fired after %v of real time, before its 20ms", el)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the real-time bound never fired")
	}
	if v.Waiters() != 0 || tm.Stop() {
		t.Fatal("a fired timer must be forgotten and not stoppable")
	}
}
