package engine

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestNearIndexMatchesAMap drives the near index and a plain map with the
// same random puts and deletes, over positions dense in some pages and
// sparse in others, and checks after each step that they agree, that the
// count is right and that no page is empty.
func TestNearIndexMatchesAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := newNearIndex()
	want := map[uint64]*wheelTimer{}
	timers := make([]wheelTimer, 64)
	pos := func() uint64 {
		if rng.IntN(2) == 0 {
			return uint64(rng.IntN(4 << nearPageShift)) // dense: four pages
		}
		return rng.Uint64N(1 << 40) // sparse
	}
	for step := 0; step < 200000; step++ {
		p := pos()
		if len(want) > 0 && rng.IntN(3) == 0 {
			for k := range want { // delete one that is held
				p = k
				break
			}
		}
		switch rng.IntN(3) {
		case 0, 1:
			w := &timers[rng.IntN(len(timers))]
			x.put(p, w)
			want[p] = w
		case 2:
			x.del(p)
			delete(want, p)
		}
		if got := x.get(p); got != want[p] {
			t.Fatalf("step %d: get(%d) = %p, want %p", step, p, got, want[p])
		}
		if x.has(p) != (want[p] != nil) {
			t.Fatalf("step %d: has(%d) = %v", step, p, x.has(p))
		}
		if x.len() != len(want) {
			t.Fatalf("step %d: len %d, want %d", step, x.len(), len(want))
		}
	}
	seen := 0
	x.each(func(p uint64, w *wheelTimer) {
		seen++
		if want[p] != w {
			t.Fatalf("each gave %d -> %p, want %p", p, w, want[p])
		}
	})
	if seen != len(want) {
		t.Fatalf("each gave %d entries, want %d", seen, len(want))
	}
	for k, p := range x.pages {
		if len(p.m) == 0 {
			t.Fatalf("page %d is empty", k)
		}
	}
}

// TestNearIndexGivesMemoryBack: a page's map is remade once it holds less
// than an eighth of its peak, and the map of pages once it holds less than
// an eighth of its own, so a drained herd keeps no map at the herd's size.
func TestNearIndexGivesMemoryBack(t *testing.T) {
	x := newNearIndex()
	var w wheelTimer
	const perPage, pages = 1000, 200
	for pg := uint64(0); pg < pages; pg++ {
		for i := uint64(0); i < perPage; i++ {
			x.put(pg<<nearPageShift|i*16, &w)
		}
	}
	// Drain each page down to 10 entries: every page map is remade small.
	for pg := uint64(0); pg < pages; pg++ {
		for i := uint64(10); i < perPage; i++ {
			x.del(pg<<nearPageShift | i*16)
		}
	}
	for k, p := range x.pages {
		if p.peak >= perPage/8 {
			t.Fatalf("page %d holds %d with a peak of %d: its map was not remade", k, len(p.m), p.peak)
		}
	}
	if x.pagesPeak != pages {
		t.Fatalf("map of pages made for %d, want %d (no page is empty yet)", x.pagesPeak, pages)
	}
	// Empty all but 5 pages: they go, and the map of pages is remade.
	for pg := uint64(5); pg < pages; pg++ {
		for i := uint64(0); i < 10; i++ {
			x.del(pg<<nearPageShift | i*16)
		}
	}
	if len(x.pages) != 5 || x.pagesPeak >= pages/8 || x.len() != 50 {
		t.Fatalf("after the drain: %d pages, map made for %d, %d timers; want 5 pages, a remade map, 50 timers", len(x.pages), x.pagesPeak, x.len())
	}
	// The page remembered last went with its entries: a lookup must not
	// find it again.
	x.put(7<<nearPageShift, &w)
	x.del(7 << nearPageShift)
	if x.has(7<<nearPageShift) || x.last != nil && x.pages[x.lastKey] != x.last {
		t.Fatalf("the page remembered last outlived its entries")
	}
}

// TestNearIndexSparseCostsAMap: timers one or two per page (loaded from
// the timer index, sent over days) cost what one map by position costs,
// not a page each, and a run of timers put in log order (a herd's sends)
// goes to pages, leaving one per page in the flat map.
func TestNearIndexSparseCostsAMap(t *testing.T) {
	const n = 200000
	var w wheelTimer
	for _, stride := range []uint64{1 << 16, 1 << 20} {
		b0 := heapAfterGC()
		m := map[uint64]*wheelTimer{}
		for i := uint64(0); i < n; i++ {
			m[i*stride] = &w
		}
		b1 := heapAfterGC()
		x := newNearIndex()
		for i := uint64(0); i < n; i++ {
			x.put(i*stride, &w)
		}
		b2 := heapAfterGC()
		if one, idx := float64(b1-b0)/n, float64(b2-b1)/n; idx > 1.25*one {
			t.Errorf("stride %d: the index costs %.1f B a timer, one map %.1f", stride, idx, one)
		}
		runtime.KeepAlive(m)
		runtime.KeepAlive(&x)
	}
	x := newNearIndex()
	for i := uint64(0); i < n; i++ {
		x.put(4096+i*300, &w)
	}
	if pages := len(x.pages); len(x.flat) > pages+1 || pages < n*300>>nearPageShift {
		t.Fatalf("a run in log order: %d in the flat map, %d pages", len(x.flat), pages)
	}
}

// heapAfterGC is the live heap, in bytes, after two collections.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
