// Package gcfloor keeps the garbage collector's heap goal at or above a
// floor, so that a process whose live heap is small but whose allocation
// rate is high does not collect every few milliseconds.
//
// Why the broker wants it: with the default GOGC of 100 the heap goal is
// twice the live heap. A broker that has just made a million messages
// visible holds little (the messages are on disk), yet hands them out at
// hundreds of thousands a second, each receive allocating its decoded
// messages and its answer. At the end of such a drain the live heap was
// 15 to 20 MB, the goal under 40 MB, and the collector ran 46 times in one
// second, each cycle with its fixed costs (docs/benchmarks.md, issue 8,
// eleventh pass). A floor of a few tens of megabytes removes most of those
// cycles and costs at most the floor in memory; once the live heap is
// half the floor or more, the floor changes nothing.
//
// How: after each collection (seen through a finalizer that re-arms
// itself), the GC percent is set so that the goal, live × (1 + percent/100),
// is at least the floor, and never below the percent the process started
// with. An operator who sets GOGC or GOMEMLIMIT has chosen; the floor then
// stays off.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// maxPercent bounds the GC percent the floor sets: with a live heap of a
// few megabytes the floor is then not reached, which only means more
// frequent collections of a heap that small.
const maxPercent = 5000

// Floor holds the heap goal at or above its bytes while it runs.
type Floor struct {
	bytes   uint64
	base    int // the GC percent at Start, restored by Stop
	stopped atomic.Bool
	sample  []metrics.Sample
	percent atomic.Int64 // the percent last set
	mu      sync.Mutex   // orders a set against Stop's restore
}

// Start keeps the heap goal at or above bytes until Stop. It returns nil,
// and does nothing, when lookupEnv finds GOGC or GOMEMLIMIT set, or when
// the collector is off.
func Start(bytes uint64, lookupEnv func(string) (string, bool)) *Floor {
	for _, k := range []string{"GOGC", "GOMEMLIMIT"} {
		if _, set := lookupEnv(k); set {
			return nil
		}
	}
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	if base < 0 || bytes == 0 {
		return nil
	}
	f := &Floor{bytes: bytes, base: base, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	f.percent.Store(int64(base))
	f.adjust()
	f.arm()
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
}

// Percent is the GC percent the floor set last.
func (f *Floor) Percent() int { return int(f.percent.Load()) }

// sentinel is an object only the finalizer refers to: it becomes garbage
// at once, so its finalizer runs after the next collection. It holds a
// pointer so that it is not combined with other small objects (the tiny
// allocator), whose finalizers may wait for their neighbours.
type sentinel struct {
	f *Floor
	_ [16]byte
}

func (f *Floor) arm() {
	s := &sentinel{f: f}
	runtime.SetFinalizer(s, func(s *sentinel) {
		if s.f.stopped.Load() {
			return
		}
		s.f.adjust()
		s.f.arm()
	})
}

// adjust sets the GC percent for the live heap the last collection left.
func (f *Floor) adjust() {
	metrics.Read(f.sample)
	if f.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	p := Percent(f.sample[0].Value.Uint64(), f.bytes, f.base)
	// Small moves are left alone: each call takes the heap lock.
	if old := int(f.percent.Load()); p == old || p > old && p < old+old/8 || p < old && p > old-old/8 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped.Load() {
		return
	}
	debug.SetGCPercent(p)
	f.percent.Store(int64(p))
}

// Percent is the GC percent that makes the heap goal of a live heap of
// live bytes at least floor bytes, and at least base: the smallest p >=
// base with live*(100+p)/100 >= floor, bounded by maxPercent.
func Percent(live, floor uint64, base int) int {
	if live == 0 {
		live = 1
	}
	if live*uint64(100+base) >= floor*100 {
		return base
	}
	p := (floor*100+live-1)/live - 100
	return int(min(p, maxPercent))
}
