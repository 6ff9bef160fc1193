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
// It is a binary heap laid out in fixed chunks rather than one slice: a
// herd's staging pushes a million entries under the engine's lock, and a
// slice would grow by doubling, each time allocating and copying the whole
// array (tens of megabytes, with the garbage collector's assist charged to
// the allocation) while every send waits. A chunk costs the same small
// allocation at any size. As the heap drains, chunks beyond one spare are
// dropped, so a drained herd gives its memory back by itself.
//
// Invariant: entry i is chunks[i/dueChunk][i%dueChunk] for i < n, and
// len(chunks) is between ceil(n/dueChunk) and that plus one (at least 1
// once anything was pushed).
type dispatchHeap struct {
	chunks []*[dueChunk]dueEntry
	n      int
}

func (h *dispatchHeap) at(i int) *dueEntry { return &h.chunks[i/dueChunk][i%dueChunk] }

// first is the earliest entry; the heap must not be empty.
func (h *dispatchHeap) first() dueEntry { return h.chunks[0][0] }

func (h *dispatchHeap) less(i, j int) bool {
	a, b := h.at(i), h.at(j)
	return a.due < b.due || a.due == b.due && a.pos < b.pos
}

func (h *dispatchHeap) swap(i, j int) {
	a, b := h.at(i), h.at(j)
	*a, *b = *b, *a
}

func (h *dispatchHeap) push(r dueEntry) {
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

// pop removes and returns the earliest entry; the heap must not be empty.
func (h *dispatchHeap) pop() dueEntry {
	top := h.first()
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
