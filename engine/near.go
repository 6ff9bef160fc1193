package engine

// nearIndex holds every message timer the dispatcher has in its wheel or
// its due heaps, by the message's position (see dueSet for what a timer's
// state means). It is owned by the dispatcher and used under the engine's
// lock.
//
// Why not only one map: a herd's fire batches look up and delete a million
// positions in due order, which within a herd's tick is send order, that
// is log order, and the sends that made the herd inserted them in that
// order too. One map of a million entries hashes neighbours to random
// slots, so each lookup was a cache miss: most of a fire batch's take, and
// 12% of the broker's CPU while a million-message herd drained over HTTP
// (docs/benchmarks.md, issue 8, eleventh pass). So a run of timers put in
// one page of 2^nearPageShift bytes of log goes to that page's own small
// map, by offset in the page: consecutive positions then meet the same
// small map, which stays in cache, and the page found last is remembered.
//
// Why not only pages: timers loaded from the timer index for the next
// minutes were sent over hours or days, one or two per page, and a page of
// one costs several times a map entry (a page, its map, its entry in the
// map of pages). So a timer goes to a page only when the put before it was
// in the same page, or its page exists; otherwise to flat, one map by
// position. The first timer of a dense page stays in flat, which is then
// small when the timers are dense and holds them all when they are sparse.
//
// Memory is given back as it drains, with no pass over the whole index: a
// page goes with its last entry, and a map (flat, a page's, or the map of
// pages) that has shrunk below an eighth of its peak is remade at its
// present size (Go maps never shrink), a copy paid for by the deletes that
// shrank it.
//
// Invariant: a position is in flat or in its page, never both; n counts
// both; no page is empty; last is nil or pages[lastKey].
type nearIndex struct {
	flat      map[uint64]*wheelTimer
	flatPeak  int // largest len(flat) since flat was last made
	pages     map[uint64]*nearPage
	pagesPeak int // largest len(pages) since pages was last made
	n         int
	lastKey   uint64
	last      *nearPage
	lastPut   uint64 // page of the last put, plus one (0: none)
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

func newNearIndex() nearIndex {
	return nearIndex{flat: map[uint64]*wheelTimer{}, pages: map[uint64]*nearPage{}}
}

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
		if t := p.m[uint32(pos&nearPageMask)]; t != nil {
			return t
		}
	}
	return x.flat[pos]
}

// has reports whether the index holds a timer for pos.
func (x *nearIndex) has(pos uint64) bool { return x.get(pos) != nil }

// put sets the timer of the message at pos (t not nil).
func (x *nearIndex) put(pos uint64, t *wheelTimer) {
	k, off := pos>>nearPageShift, uint32(pos&nearPageMask)
	p := x.page(pos)
	if p != nil {
		if _, ok := p.m[off]; ok {
			p.m[off] = t
			return
		}
	}
	// Flat is small when puts are dense (it holds a page's first), so
	// this lookup is cheap where it matters.
	if _, ok := x.flat[pos]; ok {
		x.flat[pos] = t
		return
	}
	x.n++
	if p == nil && x.lastPut == k+1 {
		p = &nearPage{m: map[uint32]*wheelTimer{}}
		x.pages[k] = p
		x.pagesPeak = max(x.pagesPeak, len(x.pages))
		x.lastKey, x.last = k, p
	}
	x.lastPut = k + 1
	if p == nil {
		x.flat[pos] = t
		x.flatPeak = max(x.flatPeak, len(x.flat))
		return
	}
	p.m[off] = t
	p.peak = max(p.peak, len(p.m))
}

// del removes the timer of the message at pos, if any.
func (x *nearIndex) del(pos uint64) {
	if p := x.page(pos); p != nil {
		off := uint32(pos & nearPageMask)
		if _, ok := p.m[off]; ok {
			delete(p.m, off)
			x.n--
			x.shrinkPage(pos>>nearPageShift, p)
			return
		}
	}
	if _, ok := x.flat[pos]; !ok {
		return
	}
	delete(x.flat, pos)
	x.n--
	if x.flatPeak >= nearShrinkMin && len(x.flat) < x.flatPeak/8 {
		x.flat = remade(x.flat)
		x.flatPeak = len(x.flat)
	}
}

// shrinkPage drops page k if it is empty, or remakes its map if it has
// shrunk below an eighth of its peak.
func (x *nearIndex) shrinkPage(k uint64, p *nearPage) {
	switch {
	case len(p.m) == 0:
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
	for pos, t := range x.flat {
		fn(pos, t)
	}
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
