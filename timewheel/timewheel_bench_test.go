package timewheel

import (
	"container/heap"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Each benchmark op handles a batch of one million timers: schedule them
// all, then fire or cancel them all. Besides the per-batch ns/op, every
// benchmark reports ns/timer and allocs/timer so that the wheel, Go runtime
// timers and a binary heap compare directly.

const batch = 1_000_000

// spreadMs is how far ahead the wheel and heap deadlines lie: one minute
// in milliseconds, so with 512 slots the timers use two levels and most
// milliseconds have a bucket of their own.
const spreadMs = 60_000

// offsets returns the per-timer delays, the same for every benchmark.
func offsets(limit int64) []int64 {
	r := rand.New(rand.NewPCG(1, 2))
	o := make([]int64, batch)
	for i := range o {
		o[i] = 1 + r.Int64N(limit)
	}
	return o
}

// perTimer runs body b.N times and reports time and allocations per timer.
func perTimer(b *testing.B, body func()) {
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for range b.N {
		body()
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	timers := float64(b.N) * batch
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/timers, "ns/timer")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/timers, "allocs/timer")
}

func BenchmarkWheelAddFire(b *testing.B) {
	off := offsets(spreadMs)
	timers := make([]Timer[int], batch)
	var now int64 = 1_700_000_000_000
	w := New[int](1, 512, now)
	fired := 0
	fire := func(*Timer[int]) { fired++ }
	perTimer(b, func() {
		fired = 0
		for i := range timers {
			w.Add(&timers[i], now+off[i])
		}
		// Sleep-and-wake as the engine does: jump to the next deadline.
		for {
			next, ok := w.NextDeadline()
			if !ok {
				break
			}
			now = next
			w.Advance(now, fire)
		}
		if fired != batch {
			b.Fatalf("%d fired, want %d", fired, batch)
		}
	})
}

func BenchmarkWheelAddCancel(b *testing.B) {
	off := offsets(spreadMs)
	timers := make([]Timer[int], batch)
	var now int64 = 1_700_000_000_000
	w := New[int](1, 512, now)
	perTimer(b, func() {
		for i := range timers {
			w.Add(&timers[i], now+off[i])
		}
		for i := range timers {
			if !w.Cancel(&timers[i]) {
				b.Fatal("Cancel of a scheduled timer reported false")
			}
		}
		// Move on so that the next batch lands in other buckets, and the
		// buckets emptied by Cancel leave the queue.
		now += spreadMs
		w.Advance(now, func(*Timer[int]) { b.Fatal("cancelled timer fired") })
	})
}

// BenchmarkAfterFuncAddFire measures Go runtime timers that really fire:
// deadlines within 10 ms, then wait for every callback.
func BenchmarkAfterFuncAddFire(b *testing.B) {
	off := offsets(10)
	var wg sync.WaitGroup
	var fired atomic.Int64
	fire := func() { fired.Add(1); wg.Done() }
	perTimer(b, func() {
		fired.Store(0)
		wg.Add(batch)
		for i := range off {
			time.AfterFunc(time.Duration(off[i])*time.Millisecond, fire)
		}
		wg.Wait()
		if fired.Load() != batch {
			b.Fatalf("%d fired, want %d", fired.Load(), batch)
		}
	})
}

func BenchmarkAfterFuncAddStop(b *testing.B) {
	off := offsets(spreadMs)
	timers := make([]*time.Timer, batch)
	fire := func() { b.Error("timer fired before Stop") }
	perTimer(b, func() {
		for i := range off {
			timers[i] = time.AfterFunc(time.Hour+time.Duration(off[i])*time.Millisecond, fire)
		}
		for _, t := range timers {
			if !t.Stop() {
				b.Fatal("Stop of a pending timer reported false")
			}
		}
	})
}

// heapTimer and timerHeap are the textbook alternative: a container/heap
// min-heap by deadline that keeps each item's index for O(log n) removal.
type heapTimer struct {
	deadline int64
	index    int
	value    int
}

type timerHeap []*heapTimer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].deadline < h[j].deadline }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	t := x.(*heapTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}

func BenchmarkHeapAddFire(b *testing.B) {
	off := offsets(spreadMs)
	items := make([]heapTimer, batch)
	h := make(timerHeap, 0, batch)
	var now int64 = 1_700_000_000_000
	fired := 0
	perTimer(b, func() {
		fired = 0
		for i := range items {
			items[i].deadline = now + off[i]
			heap.Push(&h, &items[i])
		}
		for h.Len() > 0 {
			now = h[0].deadline
			for h.Len() > 0 && h[0].deadline <= now {
				heap.Pop(&h)
				fired++
			}
		}
		if fired != batch {
			b.Fatalf("%d fired, want %d", fired, batch)
		}
	})
}

func BenchmarkHeapAddCancel(b *testing.B) {
	off := offsets(spreadMs)
	items := make([]heapTimer, batch)
	h := make(timerHeap, 0, batch)
	var now int64 = 1_700_000_000_000
	perTimer(b, func() {
		for i := range items {
			items[i].deadline = now + off[i]
			heap.Push(&h, &items[i])
		}
		for i := range items {
			heap.Remove(&h, items[i].index)
		}
		if h.Len() != 0 {
			b.Fatalf("%d left after removing all", h.Len())
		}
		now += spreadMs
	})
}
