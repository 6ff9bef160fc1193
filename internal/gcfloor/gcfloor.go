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
// How: the floor applies while the process is busy: allocating the
// floor's bytes a second or more, until the rate falls under half that
// (measured between collections, seen through a finalizer that re-arms
// itself, and every busyGap by a watch). A rate, not the time between
// collections, since that time depends on the goal the floor sets. While
// busy, after each collection the GC percent p is set so that the
// runtime's goal, live + (live + stacks + globals) × p/100, reaches the
// floor; otherwise, and whenever the live heap alone needs no help, p is
// the percent the process started with. When it stops being busy the
// watch returns the free memory to the system at once. p is never above
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

// busyGap is the watch's period: a process that stopped allocating keeps
// the floor for about two of them at most (the window that saw the end of
// its burst may still average a busy rate).
const busyGap = time.Second

// minWindow is the shortest window a rate is taken over: the runtime
// counts small allocations in /gc/heap/allocs:bytes when a cache is
// refilled or flushed at a collection, so a window of a few milliseconds
// around one can read a lump of earlier allocations as a high rate.
const minWindow = 100 * time.Millisecond

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
	percent atomic.Int64  // the percent last set
	mu      sync.Mutex    // orders a set against Stop's restore
	done    chan struct{} // closed by Stop: ends the watch
	started bool          // by Start: holds active
	// Under mu: the last rate sample, whether the floor applies, and
	// whether the memory above the default goal went back since it last
	// did.
	lastAt     time.Time
	lastAllocs uint64
	busy       bool
	freed      bool
	frees      int // memory given back, for tests
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
		return nil // off (read as -1), nonsense, or another floor
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
	f := &Floor{bytes: bytes, base: base, done: make(chan struct{}), freed: true}
	f.percent.Store(int64(base))
	return f
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

// watch samples the allocation rate every busyGap: a process that
// stops allocating runs no collection to see it (the runtime forces one
// every two minutes), and until then the raised goal would keep the
// memory its garbage took.
func (f *Floor) watch() {
	t := time.NewTicker(busyGap)
	defer t.Stop()
	for {
		select {
		case <-f.done:
			return
		case <-t.C:
			if g, ok := read(); ok {
				f.quiet(time.Now(), g.allocs)
			}
		}
	}
}

// quiet takes a rate sample at now, allocs being the bytes allocated
// since the process started, and once the floor no longer applies, if it
// had raised the percent, returns the free memory to the system
// (debug.FreeOSMemory: one collection, in a process that has just
// allocated little; the scavenger alone took longer than the 8 s a
// benchmark waited: docs/benchmarks.md, "Issue 8, eleventh pass"). At
// most once a busyGap, and only after a busy spell that raised the goal.
func (f *Floor) quiet(now time.Time, allocs uint64) {
	f.mu.Lock()
	f.sampleRate(now, allocs)
	free := !f.busy && !f.freed && !f.stopped.Load()
	if free {
		f.setLocked(f.base)
		f.freed = true
		f.frees++
	}
	f.mu.Unlock()
	if free {
		debug.FreeOSMemory()
	}
}

// sampleRate updates busy from the bytes allocated since the last sample:
// busy from the floor's bytes a second, quiet under half that.
func (f *Floor) sampleRate(now time.Time, allocs uint64) {
	if !f.lastAt.IsZero() && now.Sub(f.lastAt) < minWindow {
		return // the window grows until the next sample
	}
	if !f.lastAt.IsZero() && allocs >= f.lastAllocs {
		rate := float64(allocs-f.lastAllocs) / now.Sub(f.lastAt).Seconds()
		switch {
		case rate >= float64(f.bytes):
			f.busy = true
		case rate < float64(f.bytes)/2:
			f.busy = false
		}
	}
	f.lastAt, f.lastAllocs = now, allocs
}

// setLocked sets the GC percent to p.
func (f *Floor) setLocked(p int) {
	if int(f.percent.Load()) == p {
		return
	}
	debug.SetGCPercent(p)
	f.percent.Store(int64(p))
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

// gcFigures is what the floor reads of the runtime.
type gcFigures struct{ live, roots, allocs uint64 }

// read reads the runtime's figures (into a sample of its own: the watch
// and the finalizer read at the same time); ok is false if one is
// missing.
func read() (g gcFigures, ok bool) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"},
		{Name: "/gc/scan/globals:bytes"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	for _, v := range s {
		if v.Value.Kind() != metrics.KindUint64 {
			return g, false
		}
	}
	return gcFigures{live: s[0].Value.Uint64(), roots: s[1].Value.Uint64() + s[2].Value.Uint64(), allocs: s[3].Value.Uint64()}, true
}

// collected takes a rate sample after a collection seen at now, and sets
// the GC percent for the live heap it left.
func (f *Floor) collected(now time.Time) {
	if g, ok := read(); ok {
		f.collectedAt(now, g.live, g.roots, g.allocs)
	}
}

// collectedAt is collected with the figures given.
func (f *Floor) collectedAt(now time.Time, live, roots, allocs uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sampleRate(now, allocs)
	if f.stopped.Load() {
		return
	}
	p := f.base
	if f.busy {
		p = Percent(live, roots, f.bytes, f.base)
	}
	// Small moves are left alone: each set takes the heap lock. A move
	// back to base always goes through.
	if old := int(f.percent.Load()); p != f.base && p > old-old/8 && p < old+old/8 {
		return
	}
	f.setLocked(p)
	if p > f.base {
		f.freed = false // a raised goal's memory is given back when quiet
	}
}

// Percent is the GC percent that makes the runtime's heap goal reach
// floor bytes for a live heap of live bytes and roots (stacks and
// globals) of roots bytes: a p with live + (live+roots)×p/100 >= floor
// (the least, or one more), but at least base, and at most the p whose
// least goal (4 MiB × p/100) is the floor.
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
