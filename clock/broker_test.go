package clock

import (
	"testing"
	"time"
)

func TestBrokerNeverRunsBackwards(t *testing.T) {
	start := time.UnixMilli(1_000_000)
	f := NewFake(start)
	var jumps []time.Duration
	b := NewBroker(f, time.Second, func(d time.Duration) { jumps = append(jumps, d) })
	if got := b.Now(); got != 1_000_000 {
		t.Fatalf("Now = %d, want 1000000", got)
	}
	f.Advance(10 * time.Millisecond)
	if got := b.Now(); got != 1_000_010 {
		t.Fatalf("Now = %d, want 1000010", got)
	}
	// The wall clock steps back a minute: the broker clock holds.
	f.Jump(-time.Minute - 10*time.Millisecond)
	if got := b.Now(); got != 1_000_010 {
		t.Fatalf("after a backward step Now = %d, want 1000010", got)
	}
	if len(jumps) != 1 || jumps[0] > -59*time.Second {
		t.Fatalf("jumps = %v, want one of about -1m", jumps)
	}
	if got := b.Behind(); got < 60_000 {
		t.Fatalf("Behind = %d, want >= 60000", got)
	}
}

func TestBrokerRaiseHoldsAcrossRestart(t *testing.T) {
	// A restart with the wall clock 10 minutes behind the previous run:
	// the persisted high-water mark keeps the broker time where it was.
	prev := int64(2_000_000_000)
	f := NewFake(time.UnixMilli(prev - 600_000))
	b := NewBroker(f, time.Second, nil)
	b.Raise(prev)
	if got := b.Now(); got != prev {
		t.Fatalf("Now = %d, want %d", got, prev)
	}
	b.Raise(prev - 5) // never lowers
	f.Advance(601 * time.Second)
	if got := b.Now(); got != prev+1000 {
		t.Fatalf("after the wall caught up Now = %d, want %d", got, prev+1000)
	}
}
