// Package gcfloor keeps the garbage collector's heap goal at or near a
// floor while the process allocates fast, so that a process whose live
// heap is small but whose allocation rate is high does not collect every
// few milliseconds.
//
// Why the broker wants it: with the default GOGC of 100 the heap goal is
// about twice the live heap. A broker that has just made a million
// messages visible holds little (the messages are on disk), yet hands them
// out at hundreds of thousands a second, each receive allocating its
// decoded messages and its answer. At the end of such a drain the live heap
// was 15 to 20 MB, the goal under 40 MB, and the collector ran 46 times in
// one second, each cycle with its fixed costs (docs/benchmarks.md, "Issue
// 8, eleventh pass"). A floor removes most of those cycles.
//
// How: after each collection (seen through a finalizer that re-arms
// itself), if the collection before it was less than busyGap ago, the GC
// percent p is set so that the runtime's goal, live + (live + stacks +
// globals) × p/100, reaches the floor; otherwise, and whenever the live
// heap alone needs no help, p is the percent the process started with.
// So an idle process, or one allocating slowly, has the default goal, and
// its memory goes back to the system as usual; a watch puts the default
// back once no collection came for busyGap. p is never above
// floor/4 MiB × 100, since the runtime also makes 4 MiB × p/100 a least
// goal; the goal is then at most the floor (or the default one, when
// that is larger), within the hysteresis that spares the heap lock small
// moves. An operator who sets GOGC or GOMEMLIMIT has chosen; the floor
// then stays off.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// busyGap is the longest time between two collections for which the
// floor applies: collections closer than this mean the process allocates
// faster than its default goal per busyGap (about 40 MB a second for a
// live heap of 20 MB).
const busyGap = time.Second

// minGoalUnit is the runtime's least heap goal per GC percent point: it
// never sets a goal under 4 MiB × percent/100.
const minGoalUnit = 4 << 20

// active is set while a Floor runs: two would each take the other's
// percent for their base.
var active atomic.Bool

// Floor holds the heap goal at or near its bytes while it runs.
type Floor struct {
	bytes   uint64
	base    int // the GC percent at Start, restored by Stop
	stopped atomic.Bool
	percent atomic.Int64 // the percent last set
	mu      sync.Mutex   // orders a set against Stop's restore
	sample  []metrics.Sample
	lastGC  time.Time     // when the finalizer last ran (mu)
	done    chan struct{} // closed by Stop: ends the quiet watch
	started bool          // by Start: holds active
}

// Start keeps the heap goal near bytes while the process allocates fast,
// until Stop. It returns nil, and does nothing, when lookupEnv finds GOGC
// or GOMEMLIMIT set, when the collector is off, or when another Floor
// runs.
func Start(bytes uint64, lookupEnv func(string) (string, bool)) *Floor {
	for _, k := range []string{"GOGC", "GOMEMLIMIT"} {
		if _, set := lookupEnv(k); set {
			return nil
		}
	}
	gogc := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(gogc)
	if gogc[0].Value.Kind() != metrics.KindUint64 || bytes == 0 {
		return nil
	}
	base := int(gogc[0].Value.Uint64())
	if base <= 0 || base > 1<<20 || !active.CompareAndSwap(false, true) {
		return nil // off (reported as 0), nonsense, or another floor
	}
	f := newFloor(bytes, base)
	f.started = true
	f.arm()
	go f.watch()
	return f
}

// newFloor is a Floor that nothing drives yet: Start arms its finalizer
// and its watch; a test calls collected and quiet with times of its own.
func newFloor(bytes uint64, base int) *Floor {
	f := &Floor{bytes: bytes, base: base, done: make(chan struct{}), sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"},
	}}
	f.percent.Store(int64(base))
	return f
}

// watch puts the default goal back once no collection came for busyGap:
// a process that stops allocating runs no collection to see that it is
// quiet (the runtime forces one every two minutes), and until then the
// raised goal would keep the memory its garbage took. With the goal back
// to the default, the runtime's scavenger returns what is above it.
func (f *Floor) watch() {
	t := time.NewTicker(busyGap)
	defer t.Stop()
	for {
		select {
		case <-f.done:
			return
		case now := <-t.C:
			f.quiet(now)
		}
	}
}

// quiet restores the base percent if no collection came in the busyGap
// before now, and then returns the memory above the default goal at once
// (debug.FreeOSMemory: a collection, cheap in a process that has just
// been idle for busyGap; the scavenger alone took longer than the 8 s a
// benchmark waited: docs/benchmarks.md, "Issue 8, eleventh pass").
func (f *Floor) quiet(now time.Time) {
	if !f.lower(now) {
		return
	}
	debug.FreeOSMemory()
}

// lower is quiet's check and restore; it reports whether it lowered.
func (f *Floor) lower(now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped.Load() || int(f.percent.Load()) == f.base || now.Sub(f.lastGC) < busyGap {
		return false
	}
	debug.SetGCPercent(f.base)
	f.percent.Store(int64(f.base))
	return true
}

// Stop ends the floor and restores the GC percent the process started
// with. A nil Floor is stopped already.
func (f *Floor) Stop() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped.Swap(true) {
		return
	}
	debug.SetGCPercent(f.base)
	f.percent.Store(int64(f.base))
	close(f.done)
	if f.started {
		active.Store(false)
	}
}

// Percent is the GC percent the floor set last.
func (f *Floor) Percent() int { return int(f.percent.Load()) }

// sentinel is an object only the finalizer refers to: it becomes garbage
// at once, so its finalizer runs after the next collection. It holds a
// pointer, so that the tiny allocator, whose blocks free together, does
// not place it.
type sentinel struct{ f *Floor }

func (f *Floor) arm() {
	runtime.SetFinalizer(&sentinel{f: f}, func(s *sentinel) {
		if s.f.stopped.Load() {
			return
		}
		s.f.collected(time.Now())
		s.f.arm()
	})
}

// collected sets the GC percent after a collection seen at now.
func (f *Floor) collected(now time.Time) {
	metrics.Read(f.sample)
	for _, s := range f.sample {
		if s.Value.Kind() != metrics.KindUint64 {
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	busy := !f.lastGC.IsZero() && now.Sub(f.lastGC) < busyGap
	f.lastGC = now
	if f.stopped.Load() {
		return
	}
	p := f.base
	if busy {
		p = Percent(f.sample[0].Value.Uint64(), f.sample[1].Value.Uint64()+f.sample[2].Value.Uint64(), f.bytes, f.base)
	}
	// Small moves are left alone: each set takes the heap lock. A move
	// back to base always goes through.
	if old := int(f.percent.Load()); p == old || p != f.base && p > old-old/8 && p < old+old/8 {
		return
	}
	debug.SetGCPercent(p)
	f.percent.Store(int64(p))
}

// Percent is the GC percent that makes the runtime's heap goal reach
// floor bytes for a live heap of live bytes and roots (stacks and
// globals) of roots bytes: the least p with live + (live+roots)×p/100 >=
// floor, but at least base, and at most the p whose least goal
// (4 MiB × p/100) is the floor.
func Percent(live, roots, floor uint64, base int) int {
	base = max(base, 0)
	hi := max(int(floor*100/minGoalUnit), base)
	if live >= floor {
		return base
	}
	scan := max(live+roots, 1)
	p := (floor-live)*100/scan + 1
	if p > uint64(hi) {
		return hi
	}
	return max(int(p), base)
}
