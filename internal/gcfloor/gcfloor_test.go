package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

const mib = 1 << 20

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live, roots, floor uint64
		base, want         int
	}{
		{live: 100 * mib, floor: 64 * mib, base: 100, want: 100},                 // live alone past the floor
		{live: 40 * mib, floor: 64 * mib, base: 100, want: 100},                  // the default goal (80) is past it
		{live: 16 * mib, floor: 64 * mib, base: 100, want: 301},                  // 16 + 16 × 3.01 >= 64
		{live: 16 * mib, roots: 16 * mib, floor: 64 * mib, base: 100, want: 151}, // roots count in the goal
		{live: 16 * mib, floor: 64 * mib, base: 400, want: 400},                  // never below base
		{live: 1 << 10, floor: 128 * mib, base: 100, want: 3200},                 // the least goal (4 MiB × p/100) is the floor
		{live: 0, floor: 128 * mib, base: 100, want: 3200},
		{live: 1 * mib, floor: 128 * mib, base: 10000, want: 10000}, // a base past the bound stays
		{live: 1 * mib, floor: 128 * mib, base: -200, want: 3200},   // nonsense base: treated as 0
	} {
		got := Percent(c.live, c.roots, c.floor, c.base)
		if got != c.want {
			t.Errorf("Percent(%d, %d, %d, %d) = %d, want %d", c.live, c.roots, c.floor, c.base, got, c.want)
		}
		if goal := c.live + (c.live+c.roots)*uint64(got)/100; got < 3200 && got > c.base && goal < c.floor {
			t.Errorf("Percent(%d, %d, %d, %d) = %d leaves the goal at %d, under the floor", c.live, c.roots, c.floor, c.base, got, goal)
		}
	}
}

// TestOperatorChoiceWins: with GOGC or GOMEMLIMIT set the floor stays
// off and the GC percent is not touched.
func TestOperatorChoiceWins(t *testing.T) {
	for _, k := range []string{"GOGC", "GOMEMLIMIT"} {
		before := debug.SetGCPercent(100)
		if f := Start(1<<30, func(name string) (string, bool) { return "50", name == k }); f != nil {
			f.Stop()
			t.Fatalf("the floor started with %s set", k)
		}
		if now := debug.SetGCPercent(before); now != 100 {
			t.Fatalf("with %s set the GC percent moved from 100 to %d", k, now)
		}
	}
}

func noEnv(string) (string, bool) { return "", false }

// TestOneFloorAtATime: a second floor would take the first's raised
// percent for its base and leave it set after both stop; it does not start.
func TestOneFloorAtATime(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	a := Start(128*mib, noEnv)
	if a == nil {
		t.Fatal("the first floor did not start")
	}
	if b := Start(128*mib, noEnv); b != nil {
		b.Stop()
		a.Stop()
		t.Fatal("a second floor started beside the first")
	}
	a.Stop()
	c := Start(128*mib, noEnv)
	if c == nil {
		t.Fatal("no floor could start after the first stopped")
	}
	c.Stop()
}

func gcMetrics() (gogc, goal uint64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// TestFloorFollowsTheAllocationRate: allocating the floor's bytes a
// second or more raises the goal to the floor (for this test process's
// small live heap), a rate between half and all of that changes nothing
// (no flapping), and under half the watch's sample puts the default back;
// Stop restores the base and a stopped floor sets nothing more.
func TestFloorFollowsTheAllocationRate(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const floor = 128 * mib
	// Driven by this test's figures only: no finalizer, no watch.
	f := newFloor(floor, 100)
	defer f.Stop()
	t0, allocs := time.Now(), uint64(1<<30)
	step := func(d time.Duration, rate uint64) (time.Time, uint64) {
		t0, allocs = t0.Add(d), allocs+uint64(float64(rate)*d.Seconds())
		return t0, allocs
	}
	live, roots := uint64(10*mib), uint64(1*mib)
	f.collectedAt(t0, live, roots, allocs)
	if p := f.Percent(); p != 100 {
		t.Fatalf("after one collection (no rate known) the percent is %d, want 100", p)
	}
	now, a := step(minWindow/2, 700*mib) // too short a window: no rate yet
	f.collectedAt(now, live, roots, a)
	if p := f.Percent(); p != 100 {
		t.Fatalf("a rate over %v raised the percent to %d", minWindow/2, p)
	}
	now, a = step(minWindow, 700*mib) // a drain: 700 MiB a second
	f.collectedAt(now, live, roots, a)
	gogc, goal := gcMetrics()
	want := Percent(live, roots, floor, 100)
	if int(gogc) != want || f.Percent() != want || live+(live+roots)*gogc/100 < floor {
		t.Fatalf("busy: GC percent %d (floor set %d, want %d), goal %d MiB", gogc, f.Percent(), want, goal/mib)
	}
	// Between half and all of the floor a second: still busy, at every
	// collection and every watch sample.
	for i := 0; i < 5; i++ {
		now, a = step(time.Second, 100*mib)
		f.collectedAt(now, live, roots, a)
		now, a = step(busyGap, 80*mib)
		f.quiet(now, a)
	}
	if f.Percent() != want {
		t.Fatalf("at 80 to 100 MiB a second the percent went to %d, want %d kept", f.Percent(), want)
	}
	// Quiet: the watch's sample puts the default back and gives the
	// memory back, once.
	now, a = step(busyGap, 1*mib)
	f.quiet(now, a)
	if gogc, _ := gcMetrics(); gogc != 100 || f.Percent() != 100 || f.frees != 1 {
		t.Fatalf("after a quiet second the GC percent is %d (floor set %d), memory given back %d times; want 100 and once", gogc, f.Percent(), f.frees)
	}
	now, a = step(busyGap, 1*mib)
	f.quiet(now, a)
	if f.frees != 1 {
		t.Fatalf("a second quiet second gave the memory back again (%d times)", f.frees)
	}
	// Busy with a live heap past the floor: nothing raised, so nothing to
	// give back after.
	now, a = step(busyGap, 500*mib)
	f.collectedAt(now, 2*floor, roots, a)
	now, a = step(busyGap, 1*mib)
	f.quiet(now, a)
	if f.Percent() != 100 || f.frees != 1 {
		t.Fatalf("busy with a large live heap: percent %d, memory given back %d times; want 100 and still once", f.Percent(), f.frees)
	}
	// Busy again, then Stop.
	now, a = step(minWindow, 500*mib)
	f.collectedAt(now, live, roots, a)
	if f.Percent() != want {
		t.Fatalf("busy again: the percent is %d, want %d", f.Percent(), want)
	}
	f.Stop()
	if gogc, _ := gcMetrics(); gogc != 100 {
		t.Fatalf("after Stop the GC percent is %d, want the 100 it started with", gogc)
	}
	now, a = step(minWindow, 500*mib) // a finalizer that ran late
	f.collectedAt(now, live, roots, a)
	f.quiet(now.Add(busyGap), a)
	if gogc, _ := gcMetrics(); gogc != 100 {
		t.Fatalf("a collection seen after Stop set the GC percent to %d", gogc)
	}
}

// sink keeps the garbage of TestFloorSeesRealCollections from being
// optimised away.
var sink []byte

// TestFloorSeesRealCollections: the finalizer runs after real
// collections and re-arms, so collections in a row with fast allocation
// between them raise the percent.
func TestFloorSeesRealCollections(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	f := Start(128*mib, noEnv)
	if f == nil {
		t.Fatal("the floor did not start")
	}
	defer f.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for f.Percent() <= 100 {
		if time.Now().After(deadline) {
			t.Fatal("collections in a row did not raise the percent: the finalizer did not run, or did not re-arm")
		}
		sink = make([]byte, 16<<20) // hundreds of MiB a second
		runtime.GC()
		runtime.Gosched()
	}
	sink = nil
	if gogc, _ := gcMetrics(); int(gogc) != f.Percent() {
		t.Fatalf("the runtime's GC percent is %d, the floor set %d", gogc, f.Percent())
	}
}
