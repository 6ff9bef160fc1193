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

// typedHeap is the fairer heap baseline: a binary min-heap by deadline on
// a slice of indices into the timers, written for this one type, so it
// pays no interface calls or boxing as container/heap does. pos keeps each
// timer's place in the heap for O(log n) removal (-1 when not in it).
type typedHeap struct {
	deadline []int64 // by timer
	pos      []int32 // by timer
	h        []int32 // heap of timer indices
}

func newTypedHeap(n int) *typedHeap {
	t := &typedHeap{deadline: make([]int64, n), pos: make([]int32, n), h: make([]int32, 0, n)}
	for i := range t.pos {
		t.pos[i] = -1
	}
	return t
}

func (t *typedHeap) less(i, j int) bool { return t.deadline[t.h[i]] < t.deadline[t.h[j]] }

func (t *typedHeap) swap(i, j int) {
	t.h[i], t.h[j] = t.h[j], t.h[i]
	t.pos[t.h[i]] = int32(i)
	t.pos[t.h[j]] = int32(j)
}

func (t *typedHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.less(i, p) {
			return
		}
		t.swap(i, p)
		i = p
	}
}

func (t *typedHeap) down(i int) {
	n := len(t.h)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && t.less(c+1, c) {
			c++
		}
		if !t.less(c, i) {
			return
		}
		t.swap(i, c)
		i = c
	}
}

func (t *typedHeap) add(timer int32, deadline int64) {
	t.deadline[timer] = deadline
	t.pos[timer] = int32(len(t.h))
	t.h = append(t.h, timer)
	t.up(len(t.h) - 1)
}

// remove takes the timer at heap position i out of the heap.
func (t *typedHeap) remove(i int) int32 {
	timer := t.h[i]
	last := len(t.h) - 1
	if i != last {
		t.swap(i, last)
	}
	t.h = t.h[:last]
	if i != last {
		t.down(i)
		t.up(i)
	}
	t.pos[timer] = -1
	return timer
}

// BenchmarkTypedHeapAddFire is BenchmarkHeapAddFire on the typed heap: the
// same deadlines, the same virtual time (jump to the earliest deadline,
// pop everything due).
func BenchmarkTypedHeapAddFire(b *testing.B) {
	off := offsets(spreadMs)
	h := newTypedHeap(batch)
	var now int64 = 1_700_000_000_000
	fired := 0
	perTimer(b, func() {
		fired = 0
		for i := range off {
			h.add(int32(i), now+off[i])
		}
		for len(h.h) > 0 {
			now = h.deadline[h.h[0]]
			for len(h.h) > 0 && h.deadline[h.h[0]] <= now {
				h.remove(0)
				fired++
			}
		}
		if fired != batch {
			b.Fatalf("%d fired, want %d", fired, batch)
		}
	})
}

// BenchmarkTypedHeapAddCancel is BenchmarkHeapAddCancel on the typed heap.
func BenchmarkTypedHeapAddCancel(b *testing.B) {
	off := offsets(spreadMs)
	h := newTypedHeap(batch)
	var now int64 = 1_700_000_000_000
	perTimer(b, func() {
		for i := range off {
			h.add(int32(i), now+off[i])
		}
		for i := range off {
			h.remove(int(h.pos[i]))
		}
		if len(h.h) != 0 {
			b.Fatalf("%d left after removing all", len(h.h))
		}
		now += spreadMs
	})
}

// TestTypedHeapOrder checks the typed heap baseline itself: it pops in
// deadline order and removal by position keeps the order, so that its
// benchmark figures are for a correct heap.
func TestTypedHeapOrder(t *testing.T) {
	const n = 10_000
	r := rand.New(rand.NewPCG(5, 5))
	h := newTypedHeap(n)
	for i := range n {
		h.add(int32(i), r.Int64N(1000))
	}
	removed := map[int32]bool{}
	for i := 0; i < n; i += 3 {
		h.remove(int(h.pos[i]))
		removed[int32(i)] = true
	}
	last := int64(-1)
	popped := 0
	for len(h.h) > 0 {
		timer := h.remove(0)
		if removed[timer] {
			t.Fatalf("timer %d popped after it was removed", timer)
		}
		if d := h.deadline[timer]; d < last {
			t.Fatalf("popped deadline %d after %d", d, last)
		} else {
			last = d
		}
		popped++
	}
	if want := n - len(removed); popped != want {
		t.Fatalf("popped %d, want %d", popped, want)
	}
}
