package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDispatchHeapMergesRunAndHeap: entries pushed partly in order (a
// herd's run) and partly out of order, with pops in between, come out in
// (due, pos) order, every one once, and a drained queue keeps at most one
// chunk of each part.
func TestDispatchHeapMergesRunAndHeap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var h dispatchHeap
	var want, got []dueEntry
	next := dueEntry{due: 100}
	for round := 0; round < 50; round++ {
		for i := r.IntN(3 * dueChunk); i > 0; i-- {
			var e dueEntry
			if r.IntN(4) == 0 {
				e = dueEntry{due: int64(r.IntN(300)), pos: uint64(r.IntN(1 << 20))} // out of order
			} else {
				next.pos++
				next.due += int64(r.IntN(2))
				e = next // in order: a run
			}
			h.push(e)
			want = append(want, e)
		}
		for i := r.IntN(2 * dueChunk); i > 0 && h.n > 0; i-- {
			got = append(got, h.pop())
		}
		if h.n != h.run.n+h.heap.n || h.n != len(want)-len(got) {
			t.Fatalf("round %d: n %d, run %d + heap %d, pushed %d popped %d", round, h.n, h.run.n, h.heap.n, len(want), len(got))
		}
	}
	key := func(a, b dueEntry) int {
		if dueLess(&a, &b) {
			return -1
		}
		if dueLess(&b, &a) {
			return 1
		}
		return 0
	}
	// Without pushes in between, pops come out in order.
	var drain []dueEntry
	for h.n > 0 {
		drain = append(drain, h.pop())
	}
	if !slices.IsSortedFunc(drain, key) {
		t.Fatalf("the final drain of %d entries is not in order", len(drain))
	}
	got = append(got, drain...)
	slices.SortFunc(want, key)
	slices.SortFunc(got, key)
	if !slices.Equal(got, want) {
		t.Fatalf("popped %d entries, pushed %d: not the same entries", len(got), len(want))
	}
	if len(h.run.chunks) > 1 || len(h.heap.chunks) > 1 {
		t.Fatalf("a drained queue keeps %d + %d chunks", len(h.run.chunks), len(h.heap.chunks))
	}
}
