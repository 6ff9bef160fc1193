package engine

// dueEntry is a staged message in its topic's due heap: what orders it,
// and the generation that tells whether it is still live (dueSet). The
// rest of the timer stays in its wheelTimer, found through near by pos, so
// an entry is 24 bytes without pointers, which the garbage collector does
// not scan.
type dueEntry struct {
	due int64
	pos uint64
	seq uint32
}

// dueChunk is the number of entries in one chunk of a dispatchHeap
// (12 KiB).
const dueChunk = 512

// dispatchHeap orders due timers by due time, so a herd is dispatched
// earliest first and the fire frontier is its minimum. Ties go in send
// order (by pos), which FIFO topics rely on.
//
// It is two queues merged at the head: run, the entries pushed in order
// (each at or after the one pushed to it before), kept as a FIFO, and
// heap, a binary heap of the others. The wheel expires timers in due order
// and a herd's timers within a tick in send order, so a herd is one run:
// its entries go in and out in O(1), reading memory in order, where a heap
// of a million would sift each of them through 20 levels under the
// engine's lock. Timers staged straight at send (due within stageAhead)
// out of order go to the heap. first and pop take the lesser head, so the
// order is the same as one heap's.
//
// Invariant: n = run.n + heap.n; run's entries are in order.
type dispatchHeap struct {
	run  dueRun
	heap dueBinHeap
	n    int
}

func dueLess(a, b *dueEntry) bool {
	return a.due < b.due || a.due == b.due && a.pos < b.pos
}

func (h *dispatchHeap) push(r dueEntry) {
	h.n++
	if h.run.n == 0 || !dueLess(&r, h.run.last()) {
		h.run.push(r)
		return
	}
	h.heap.push(r)
}

// fromRun reports whether the head is run's; the heap must not be empty.
func (h *dispatchHeap) fromRun() bool {
	if h.heap.n == 0 {
		return true
	}
	return h.run.n > 0 && !dueLess(h.heap.at(0), h.run.first())
}

// first is the earliest entry; the heap must not be empty.
func (h *dispatchHeap) first() dueEntry {
	if h.fromRun() {
		return *h.run.first()
	}
	return *h.heap.at(0)
}

// pop removes and returns the earliest entry; the heap must not be empty.
func (h *dispatchHeap) pop() dueEntry {
	h.n--
	if h.fromRun() {
		return h.run.pop()
	}
	return h.heap.pop()
}

// dueRun is a FIFO of entries in chunks: pushed at the tail, popped at the
// head, a chunk dropped as soon as its last entry is popped. Entry i
// (0 = head) is at chunks[(head+i)/dueChunk][(head+i)%dueChunk].
type dueRun struct {
	chunks []*[dueChunk]dueEntry
	head   int // index of the head in chunks[0]
	n      int
}

func (r *dueRun) at(i int) *dueEntry {
	i += r.head
	return &r.chunks[i/dueChunk][i%dueChunk]
}

func (r *dueRun) first() *dueEntry { return r.at(0) }
func (r *dueRun) last() *dueEntry  { return r.at(r.n - 1) }

func (r *dueRun) push(e dueEntry) {
	if r.head+r.n == len(r.chunks)*dueChunk {
		r.chunks = append(r.chunks, new([dueChunk]dueEntry))
	}
	*r.at(r.n) = e
	r.n++
}

func (r *dueRun) pop() dueEntry {
	e := *r.first()
	r.head++
	r.n--
	switch {
	case r.n == 0:
		r.head = 0 // reuse the chunk from its start
		if len(r.chunks) > 1 {
			r.chunks = r.chunks[:1]
		}
	case r.head == dueChunk:
		r.chunks[0] = nil
		r.chunks = r.chunks[1:]
		r.head = 0
	}
	return e
}

// dueBinHeap is a binary heap laid out in fixed chunks rather than one
// slice: a herd's staging pushes a million entries under the engine's
// lock, and a slice would grow by doubling, each time allocating and
// copying the whole array (tens of megabytes, with the garbage collector's
// assist charged to the allocation) while every send waits. A chunk costs
// the same small allocation at any size. As the heap drains, chunks beyond
// one spare are dropped, so a drained herd gives its memory back by itself.
//
// Invariant: entry i is chunks[i/dueChunk][i%dueChunk] for i < n, and
// len(chunks) is between ceil(n/dueChunk) and that plus one (at least 1
// once anything was pushed).
type dueBinHeap struct {
	chunks []*[dueChunk]dueEntry
	n      int
}

func (h *dueBinHeap) at(i int) *dueEntry { return &h.chunks[i/dueChunk][i%dueChunk] }

func (h *dueBinHeap) less(i, j int) bool { return dueLess(h.at(i), h.at(j)) }

func (h *dueBinHeap) swap(i, j int) {
	a, b := h.at(i), h.at(j)
	*a, *b = *b, *a
}

func (h *dueBinHeap) push(r dueEntry) {
	if h.n == len(h.chunks)*dueChunk {
		h.chunks = append(h.chunks, new([dueChunk]dueEntry))
	}
	*h.at(h.n) = r
	h.n++
	for i := h.n - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.swap(i, p)
		i = p
	}
}

func (h *dueBinHeap) pop() dueEntry {
	top := *h.at(0)
	h.n--
	n := h.n
	*h.at(0) = *h.at(n)
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && h.less(l, m) {
			m = l
		}
		if r < n && h.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h.swap(i, m)
		i = m
	}
	if k := len(h.chunks); k > 1 && n <= (k-2)*dueChunk {
		h.chunks[k-1] = nil
		h.chunks = h.chunks[:k-1]
	}
	return top
}
