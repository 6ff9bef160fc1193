package commitlog

import (
	"fmt"
	"slices"
	"sync"
)

// readEachSpan bounds one ReadAt of ReadEach: the records it serves lie
// within it, so a read never fetches far more than it hands out.
const readEachSpan = 128 << 10

// readEachGap is the largest distance between two wanted records that one
// ReadAt still covers; past it the bytes between are not worth reading.
const readEachGap = 16 << 10

// readEachBufs recycles ReadEach's read buffers: a consumer's receive
// reads its batch into one, and a fresh one a call was zeroed and
// collected for nothing. fill never grows a buffer past readChunk (a
// larger record is read into its own); maxPooledReadEach only keeps that
// bound if fill changes.
var readEachBufs = sync.Pool{New: func() any { b := make([]byte, 0, readEachSpan+readAhead); return &b }}

const maxPooledReadEach = 2 * (readEachSpan + readAhead)

// ReadEach reads the records at positions pos (record boundaries, in any
// order, repeats allowed) and calls fn with each one's index in pos, in
// position order. It does what Read does for each, but nearby records
// share one ReadAt and no payload is copied: rec.Payload is valid only
// during the call, and fn must copy what it keeps. A consumer's batch of
// messages written close together then costs a few reads instead of one
// read and two allocations per record. The first error, Read's or fn's,
// stops the walk and is returned (Read's wrapped with the position).
func (l *Log) ReadEach(pos []Pos, fn func(i int, rec Record) error) error {
	order := make([]int, len(pos))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case pos[a] < pos[b]:
			return -1
		case pos[a] > pos[b]:
			return 1
		}
		return 0
	})
	var s *segment
	bp := readEachBufs.Get().(*[]byte)
	it := frameIter{buf: (*bp)[:0]}
	defer func() {
		if s != nil {
			l.release(s)
		}
		// No payload outlives the call (fn copies what it keeps).
		if cap(it.buf) <= maxPooledReadEach {
			*bp = it.buf[:0]
			readEachBufs.Put(bp)
		}
	}()
	for k, i := range order {
		p := pos[i]
		if s == nil || p < s.base || p >= it.limit {
			if s != nil {
				l.release(s)
				s = nil
			}
			seg, end, err := l.acquire(p)
			if err != nil {
				return err
			}
			s = seg
			it = frameIter{f: s.f, base: s.base, limit: end, view: true, buf: it.buf[:0]}
		}
		it.pos = p
		if !(p >= it.bufPos && int64(p-it.bufPos)+FrameHeaderSize <= int64(len(it.buf))) {
			it.ahead = readEachAhead(pos, order[k:], it.limit)
		}
		rec, _, err := it.next()
		if err != nil {
			return fmt.Errorf("commitlog: read %s at %d: %w", s.name, p, err)
		}
		if err := fn(i, rec); err != nil {
			return err
		}
	}
	return nil
}

// readEachAhead is how far a read starting at the first of rest should
// reach: past every following record that is close enough to the one
// before it and within readEachSpan of the first, plus readAhead for the
// last one's own bytes. It only matters when the buffer does not already
// cover the record (fill reads only then).
func readEachAhead(pos []Pos, rest []int, limit Pos) int64 {
	first, last := pos[rest[0]], pos[rest[0]]
	for _, i := range rest[1:] {
		p := pos[i]
		if p >= limit || p-last > readEachGap || p-first > readEachSpan-readAhead {
			break
		}
		last = p
	}
	return int64(last-first) + readAhead
}
