package forecast

import "math"

// page holds the per-second counts of one minute in the narrowest unsigned
// type that holds its largest count: *secs[uint8] while every second of the
// minute holds at most 255 messages, then *secs[uint16], *secs[uint32] and
// finally *secs[int64]. A page only ever widens, and only when an add
// would overflow it, so its counts are always exact. Far-future minutes
// hold a few messages a second (10 M messages over 30 days are about 4 a
// second), so most pages take 60 bytes instead of the 480 of int64 counts:
// the pages are most of a forecast's memory.
type page interface {
	// get returns the count of second s (0..59).
	get(s int) int64
	// sum returns the counts of the seconds [a, b), 0 <= a <= b <= 60.
	sum(a, b int) int64
	// add adds d to second s and returns the page that holds the result:
	// the same one, or a wider copy. The count must stay at least zero
	// (Counts clamps before it calls).
	add(s int, d int64) page
}

// counter is the types a page may count in.
type counter interface {
	~uint8 | ~uint16 | ~uint32 | ~int64
}

// secs is one minute's counts, second by second.
type secs[T counter] [60]T

// limit is the largest count a T holds.
func limit[T counter]() int64 {
	var z T
	switch any(z).(type) {
	case uint8:
		return math.MaxUint8
	case uint16:
		return math.MaxUint16
	case uint32:
		return math.MaxUint32
	}
	return math.MaxInt64
}

func (p *secs[T]) get(s int) int64 { return int64(p[s]) }

func (p *secs[T]) sum(a, b int) int64 {
	var n int64
	for _, v := range p[a:b] {
		n += int64(v)
	}
	return n
}

func (p *secs[T]) add(s int, d int64) page {
	v := int64(p[s]) + d
	if v <= limit[T]() {
		p[s] = T(v)
		return p
	}
	var w page
	switch q := any(p).(type) {
	case *secs[uint8]:
		w = widen[uint8, uint16](q)
	case *secs[uint16]:
		w = widen[uint16, uint32](q)
	default: // *secs[uint32]; an int64 count does not overflow
		w = widen[uint32, int64](any(p).(*secs[uint32]))
	}
	return w.add(s, d)
}

// widen copies p into a page of the wider type W.
func widen[N, W counter](p *secs[N]) *secs[W] {
	var w secs[W]
	for i, v := range p {
		w[i] = W(v)
	}
	return &w
}

// newPage returns a page holding n messages at second s, in the narrowest
// type that holds n.
func newPage(s int, n int64) page {
	var p page = new(secs[uint8])
	return p.add(s, n)
}
