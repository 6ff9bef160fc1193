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

// TestFloorFollowsTheAllocationRate: collections less than busyGap apart
// raise the goal to the floor (this test process holds a few megabytes);
// one after a quiet spell puts the default back; Stop restores the base
// and a stopped floor sets nothing more.
func TestFloorFollowsTheAllocationRate(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const floor = 128 * mib
	// Driven by this test's times only: no finalizer, no watch.
	f := newFloor(floor, 100)
	defer f.Stop()
	t0 := time.Now()
	f.collected(t0)
	if p := f.Percent(); p != 100 {
		t.Fatalf("after one collection (no rate known) the percent is %d, want 100", p)
	}
	f.collected(t0.Add(busyGap / 10))
	gogc, goal := gcMetrics()
	if int(gogc) != f.Percent() || gogc <= 100 || goal < floor*7/8 || goal > floor*9/8 {
		t.Fatalf("busy: GC percent %d (floor set %d), goal %d MiB; want it raised and the goal near %d MiB", gogc, f.Percent(), goal/mib, floor/mib)
	}
	f.collected(t0.Add(busyGap/10 + 2*busyGap))
	if gogc, _ := gcMetrics(); gogc != 100 || f.Percent() != 100 {
		t.Fatalf("after a quiet spell the GC percent is %d (floor set %d), want 100", gogc, f.Percent())
	}
	// Raised again, then no collection for busyGap: the watch's check
	// puts the default back without one.
	t1 := t0.Add(10 * busyGap)
	f.collected(t1)
	f.collected(t1.Add(busyGap / 10))
	if f.Percent() <= 100 {
		t.Fatalf("busy again: the percent is %d", f.Percent())
	}
	f.quiet(t1.Add(busyGap/10 + busyGap/2))
	if f.Percent() <= 100 {
		t.Fatalf("half a gap without a collection put the percent back to %d", f.Percent())
	}
	f.quiet(t1.Add(busyGap/10 + busyGap))
	if gogc, _ := gcMetrics(); gogc != 100 || f.Percent() != 100 {
		t.Fatalf("a gap without a collection left the GC percent at %d (floor set %d), want 100", gogc, f.Percent())
	}
	f.collected(t1.Add(5 * busyGap))
	f.collected(t1.Add(5*busyGap + busyGap/10))
	f.Stop()
	if gogc, _ := gcMetrics(); gogc != 100 {
		t.Fatalf("after Stop the GC percent is %d, want the 100 it started with", gogc)
	}
	f.collected(t1.Add(6 * busyGap)) // a finalizer that ran late
	f.collected(t1.Add(6*busyGap + busyGap/10))
	if gogc, _ := gcMetrics(); gogc != 100 {
		t.Fatalf("a collection seen after Stop set the GC percent to %d", gogc)
	}
}

// TestFloorSeesRealCollections: the finalizer runs after real
// collections and re-arms, so collections in a row raise the percent.
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
		runtime.GC()
		runtime.Gosched()
	}
	if gogc, _ := gcMetrics(); int(gogc) != f.Percent() {
		t.Fatalf("the runtime's GC percent is %d, the floor set %d", gogc, f.Percent())
	}
}
