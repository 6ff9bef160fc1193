package engine

// nearIndex holds every message timer the dispatcher has in its wheel or
// its due heaps, by the message's position (see dueSet for what a timer's
// state means). It is owned by the dispatcher and used under the engine's
// lock.
//
// Why pages and not one map: a herd's fire batches look up and delete a
// million positions in due order, which within a herd's tick is send
// order, that is log order, and the sends that made the herd inserted
// them in that order too. One map of a million entries hashes neighbours
// to random slots, so each lookup was a cache miss: most of a fire
// batch's take, and 12% of the broker's CPU while a million-message herd
// drained over HTTP (docs/benchmarks.md, issue 8, eleventh pass). Here a
// position goes first to the page of 2^nearPageShift bytes of log that
// holds it, then, in that page's own small map, to its offset in the
// page: consecutive positions meet the same small map, which stays in
// cache, and the page found last is remembered. A page holds a few hundred
// messages of a few hundred bytes, one (or none) of messages of 64 KiB and
// more, so the index is never much worse than one map.
//
// Memory is given back as it drains, with no pass over the whole index: a
// page goes with its last entry, and a page map (or the map of pages) that
// has shrunk below an eighth of its peak is remade at its present size
// (Go maps never shrink), a copy paid for by the deletes that shrank it.
//
// Invariant: n is the number of entries over all pages; no page is empty;
// last is nil or pages[lastKey].
type nearIndex struct {
	pages     map[uint64]*nearPage
	pagesPeak int // largest len(pages) since pages was last made
	n         int
	lastKey   uint64
	last      *nearPage
}

// nearPage is one page's entries, by offset in the page.
type nearPage struct {
	m    map[uint32]*wheelTimer
	peak int // largest len(m) since m was last made
}

const (
	nearPageShift = 16
	nearPageMask  = 1<<nearPageShift - 1
	// nearShrinkMin is the smallest peak worth remaking a map for.
	nearShrinkMin = 64
)

func newNearIndex() nearIndex { return nearIndex{pages: map[uint64]*nearPage{}} }

// len is the number of timers held.
func (x *nearIndex) len() int { return x.n }

// page returns the page holding pos, or nil.
func (x *nearIndex) page(pos uint64) *nearPage {
	k := pos >> nearPageShift
	if x.last != nil && x.lastKey == k {
		return x.last
	}
	p := x.pages[k]
	if p != nil {
		x.lastKey, x.last = k, p
	}
	return p
}

// get returns the timer of the message at pos, or nil.
func (x *nearIndex) get(pos uint64) *wheelTimer {
	if p := x.page(pos); p != nil {
		return p.m[uint32(pos&nearPageMask)]
	}
	return nil
}

// has reports whether the index holds a timer for pos.
func (x *nearIndex) has(pos uint64) bool { return x.get(pos) != nil }

// put sets the timer of the message at pos (t not nil).
func (x *nearIndex) put(pos uint64, t *wheelTimer) {
	p := x.page(pos)
	if p == nil {
		k := pos >> nearPageShift
		p = &nearPage{m: map[uint32]*wheelTimer{}}
		x.pages[k] = p
		x.pagesPeak = max(x.pagesPeak, len(x.pages))
		x.lastKey, x.last = k, p
	}
	off := uint32(pos & nearPageMask)
	if _, ok := p.m[off]; !ok {
		x.n++
	}
	p.m[off] = t
	p.peak = max(p.peak, len(p.m))
}

// del removes the timer of the message at pos, if any.
func (x *nearIndex) del(pos uint64) {
	p := x.page(pos)
	if p == nil {
		return
	}
	off := uint32(pos & nearPageMask)
	if _, ok := p.m[off]; !ok {
		return
	}
	delete(p.m, off)
	x.n--
	switch {
	case len(p.m) == 0:
		k := pos >> nearPageShift
		delete(x.pages, k)
		if x.last == p {
			x.last = nil
		}
		if x.pagesPeak >= nearShrinkMin && len(x.pages) < x.pagesPeak/8 {
			x.pages = remade(x.pages)
			x.pagesPeak = len(x.pages)
		}
	case p.peak >= nearShrinkMin && len(p.m) < p.peak/8:
		p.m = remade(p.m)
		p.peak = len(p.m)
	}
}

// each calls fn for every timer held, in no particular order.
func (x *nearIndex) each(fn func(pos uint64, t *wheelTimer)) {
	for k, p := range x.pages {
		for off, t := range p.m {
			fn(k<<nearPageShift|uint64(off), t)
		}
	}
}

// remade returns a copy of m in a map of its present size.
func remade[K comparable, V any](m map[K]V) map[K]V {
	c := make(map[K]V, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
