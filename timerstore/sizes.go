package timerstore

import (
	"maps"
	"sync"
)

// A checkpoint records the length of every bucket file (Sizes). With
// one-minute buckets and far-future timers spread over 30 days that is
// tens of thousands of buckets, and copying them all takes milliseconds
// under the engine's lock, which every send that completes meanwhile waits
// for. SizesSnapshot copies only what changed since the previous snapshot;
// the full map is built from the previous one outside the lock.
//
// Invariant: s.snap, once built, equals what Sizes returned when it was
// taken, and s.changed holds every bucket whose entry in s.sizes was set,
// grown, cut or deleted since; Reset drops the snapshot (the next one is a
// full copy).

// SizesSnap is the bucket lengths at one instant, as Sizes would have
// returned them then; Map builds them.
type SizesSnap struct {
	base  *SizesSnap      // the previous snapshot; nil for a full copy
	delta map[int64]int64 // changed buckets: their length, or 0 if gone
	once  sync.Once
	full  map[int64]int64
}

// Map returns the lengths of the non-empty buckets at the snapshot's
// instant. It may run without the owner's lock; the map is shared and must
// not be modified.
func (p *SizesSnap) Map() map[int64]int64 {
	p.once.Do(func() {
		if p.base == nil {
			p.full = p.delta
		} else {
			p.full = maps.Clone(p.base.Map())
			for b, n := range p.delta {
				if n > 0 {
					p.full[b] = n
				} else {
					delete(p.full, b)
				}
			}
		}
		p.base, p.delta = nil, nil
	})
	return p.full
}

// SizesSnapshot takes a snapshot of the bucket lengths in time
// proportional to the buckets changed since the last one (the first is a
// full copy). The caller holds the lock that guards the Store.
func (s *Store) SizesSnapshot() *SizesSnap {
	var p *SizesSnap
	if s.snap == nil {
		p = &SizesSnap{delta: s.Sizes()}
	} else {
		d := make(map[int64]int64, len(s.changed))
		for b := range s.changed {
			d[b] = s.sizes[b] // 0 when deleted or empty
		}
		p = &SizesSnap{base: s.snap, delta: d}
	}
	clear(s.changed)
	s.snap = p
	return p
}

// touch records that bucket b's length changed, for SizesSnapshot.
func (s *Store) touch(b int64) {
	if s.snap != nil {
		s.changed[b] = true
	}
}
