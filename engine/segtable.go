package engine

import (
	"maps"
	"path"

	"github.com/hourglass-mq/hourglass/commitlog"
)

// segTable is the per-segment accounting retention decides by, and the
// map of moved messages (compact.go). Guarded by Engine.mu. Its fields are
// its own (ownership_test.go).
type segTable struct {
	log     *commitlog.Log
	pending map[uint64]int64  // segment base -> pending messages in it
	last    map[uint64]int64  // segment base -> latest visible time of its messages
	reloc   map[uint64]uint64 // moved messages: identity -> current copy
	bases   []uint64          // cached segment bases, ascending
	head    uint64            // log head when bases was read
}

func newSegTable(log *commitlog.Log) *segTable {
	return &segTable{log: log, pending: map[uint64]int64{}, last: map[uint64]int64{}, reloc: map[uint64]uint64{}}
}

// physLocked returns the log position of the current copy of the message
// whose identity is pos.
func (t *segTable) physLocked(pos uint64) uint64 {
	if p, ok := t.reloc[pos]; ok {
		return p
	}
	return pos
}

// segOfLocked returns the base of the commit-log segment holding pos.
func (t *segTable) segOfLocked(pos uint64) uint64 {
	n := len(t.bases)
	if n == 0 || pos >= t.head {
		// pos may be in a segment created since the cache was made.
		t.head = uint64(t.log.Head())
		segs := t.log.Segments()
		t.bases = t.bases[:0]
		for _, s := range segs {
			t.bases = append(t.bases, uint64(s.Base))
		}
		n = len(t.bases)
	}
	lo, hi := 0, n
	for lo < hi {
		m := (lo + hi) / 2
		if t.bases[m] <= pos {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0
	}
	return t.bases[lo-1]
}

// addedLocked counts a new message, written at pos, as pending in its
// segment.
func (t *segTable) addedLocked(pos uint64) { t.pending[t.segOfLocked(pos)]++ }

// cancelledLocked counts the message whose identity is pos as no longer
// pending in the segment of its current copy.
func (t *segTable) cancelledLocked(pos uint64) { t.pending[t.segOfLocked(t.physLocked(pos))]-- }

// firedLocked counts the message whose identity is pos as no longer
// pending in the segment of its current copy, visible at visible.
func (t *segTable) firedLocked(pos uint64, visible int64) {
	seg := t.segOfLocked(t.physLocked(pos))
	t.pending[seg]--
	if visible > t.last[seg] {
		t.last[seg] = visible
	}
}

// movedLocked records that the message orig now lives at newPos, and moves
// its pending count with it.
func (t *segTable) movedLocked(orig, newPos uint64) {
	t.pending[t.segOfLocked(t.physLocked(orig))]--
	t.pending[t.segOfLocked(newPos)]++
	t.reloc[orig] = newPos
}

// captureLocked copies what the checkpoint records: the moved messages,
// and per segment the pending count and the latest visible time.
func (t *segTable) captureLocked() (reloc map[uint64]uint64, pending, last map[uint64]int64) {
	return maps.Clone(t.reloc), maps.Clone(t.pending), maps.Clone(t.last)
}

// restore puts back what a checkpoint recorded (captureLocked).
func (t *segTable) restore(reloc map[uint64]uint64, pending, last map[uint64]int64) {
	maps.Copy(t.pending, pending)
	maps.Copy(t.reloc, reloc)
	maps.Copy(t.last, last)
}

// pendingTotal is the number of pending messages in all segments.
func (t *segTable) pendingTotal() int64 {
	var n int64
	for _, p := range t.pending {
		n += p
	}
	return n
}

// lowestIdentity is the lowest of floor and the identities of the moved
// messages: what the key index must keep (a moved message keeps its old
// position as identity).
func (t *segTable) lowestIdentity(floor uint64) uint64 {
	for orig := range t.reloc {
		floor = min(floor, orig)
	}
	return floor
}

// retainable reports what retention may do with the segment at base:
// pending is its pending count, and young whether its newest visible
// message is within retention of now.
func (t *segTable) retainable(base uint64, now, retention int64) (pending int64, young bool) {
	return t.pending[base], now-t.last[base] < retention
}

// droppedLocked forgets the segments retention deleted, all before cut:
// their counts, and the moves whose copy was in them.
func (t *segTable) droppedLocked(bases []uint64, cut uint64) {
	for _, b := range bases {
		delete(t.pending, b)
		delete(t.last, b)
	}
	for orig, p := range t.reloc {
		if p < cut {
			delete(t.reloc, orig)
		}
	}
	t.bases = nil
}

// segmentOf names the log segment holding pos, or "".
func (t *segTable) segmentOf(pos uint64) string {
	segs := t.log.Segments()
	for i := len(segs) - 1; i >= 0; i-- {
		if segs[i].Base <= commitlog.Pos(pos) && commitlog.Pos(pos) < segs[i].End {
			return path.Join("log", segs[i].Name)
		}
	}
	return ""
}
