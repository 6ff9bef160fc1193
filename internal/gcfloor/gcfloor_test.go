package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live, floor uint64
		base, want  int
	}{
		{live: 100 << 20, floor: 64 << 20, base: 100, want: 100}, // goal 200 MiB already
		{live: 32 << 20, floor: 64 << 20, base: 100, want: 100},  // goal exactly the floor
		{live: 16 << 20, floor: 64 << 20, base: 100, want: 300},  // 16 * 4 = 64
		{live: 10 << 20, floor: 64 << 20, base: 100, want: 540},  // rounded up: 10 * 6.4
		{live: 16 << 20, floor: 64 << 20, base: 400, want: 400},  // never below base
		{live: 1 << 10, floor: 64 << 20, base: 100, want: maxPercent},
		{live: 0, floor: 64 << 20, base: 100, want: maxPercent},
	} {
		if got := Percent(c.live, c.floor, c.base); got != c.want {
			t.Errorf("Percent(%d, %d, %d) = %d, want %d", c.live, c.floor, c.base, got, c.want)
		}
		if got := Percent(c.live, c.floor, c.base); got < maxPercent && c.live*uint64(100+got) < c.floor*100 {
			t.Errorf("Percent(%d, %d, %d) = %d leaves the goal under the floor", c.live, c.floor, c.base, got)
		}
	}
}

// TestOperatorChoiceWins: with GOGC or GOMEMLIMIT set the floor stays
// off and the GC percent is not touched.
func TestOperatorChoiceWins(t *testing.T) {
	for _, k := range []string{"GOGC", "GOMEMLIMIT"} {
		before := debug.SetGCPercent(100)
		debug.SetGCPercent(before)
		f := Start(1<<30, func(name string) (string, bool) { return "50", name == k })
		if f != nil {
			f.Stop()
			t.Fatalf("the floor started with %s set", k)
		}
		if now := debug.SetGCPercent(before); now != before {
			t.Fatalf("with %s set the GC percent moved from %d to %d", k, before, now)
		}
	}
}

// TestFloorRaisesTheGoal: in this test process (a live heap of a few
// megabytes) a floor of 256 MiB raises the GC percent after a collection
// so that the goal reaches it, and Stop gives the percent back.
func TestFloorRaisesTheGoal(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	const floor = 256 << 20
	f := Start(floor, func(string) (string, bool) { return "", false })
	if f == nil {
		t.Fatal("the floor did not start")
	}
	sample := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/heap/live:bytes"}}
	// waitFor collects until the percent is what want says of it.
	waitFor := func(what string, want func(gogc, live uint64) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			runtime.GC() // the finalizer runs, and re-arms, after each cycle
			metrics.Read(sample)
			gogc, live := sample[0].Value.Uint64(), sample[1].Value.Uint64()
			if int(gogc) == f.Percent() && want(gogc, live) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("GC percent %d with %d live bytes: %s", gogc, live, what)
			}
			runtime.Gosched()
		}
	}
	raised := func(gogc, live uint64) bool {
		return gogc > 100 && (gogc == maxPercent || live*(100+gogc) >= floor*100)
	}
	waitFor("the goal did not reach the floor", raised)
	// A live heap above half the floor needs no help: the percent goes
	// back to the base at a later collection, and up again once the heap
	// is small.
	hold := make([]byte, floor/2+1<<20) // never written: no resident memory
	waitFor("the percent stayed up under a large live heap", func(gogc, _ uint64) bool { return gogc == 100 })
	runtime.KeepAlive(hold)
	hold = nil
	waitFor("the percent did not rise again", raised)
	f.Stop()
	if now := debug.SetGCPercent(100); now != 100 {
		t.Fatalf("after Stop the GC percent is %d, want the 100 it started with", now)
	}
	// A stopped floor sets nothing more.
	runtime.GC()
	runtime.GC()
	if now := debug.SetGCPercent(100); now != 100 {
		t.Fatalf("a finalizer after Stop set the GC percent to %d", now)
	}
}
