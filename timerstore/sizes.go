package timerstore

import (
	"maps"
	"slices"
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
// grown, cut or deleted since (a bucket may be listed more than once);
// Reset drops the snapshot (the next one is a full copy). changed is a
// slice, not a set: a checkpoint's capture appends to it once for every
// bucket it hands to its job, under the engine's lock, and an append costs
// a fraction of a map insert there (BenchmarkPrepareSync43k).

// SizesSnap is the bucket lengths at one instant, as Sizes would have
// returned them then; Map builds them.
type SizesSnap struct {
	base  *SizesSnap      // the previous snapshot; nil for a full copy
	first map[int64]int64 // the full copy, when base is nil
	delta []bucketLen     // changed buckets: their length, or 0 if gone
	once  sync.Once
	full  map[int64]int64
}

// bucketLen is a bucket's length at a snapshot.
type bucketLen struct{ bucket, n int64 }

// Map returns the lengths of the non-empty buckets at the snapshot's
// instant. It may run without the owner's lock; the map is shared and must
// not be modified.
func (p *SizesSnap) Map() map[int64]int64 {
	p.once.Do(func() {
		if p.base == nil {
			p.full = p.first
		} else {
			p.full = maps.Clone(p.base.Map())
			for _, d := range p.delta {
				if d.n > 0 {
					p.full[d.bucket] = d.n
				} else {
					delete(p.full, d.bucket)
				}
			}
		}
		p.base, p.first, p.delta = nil, nil, nil
	})
	return p.full
}

// SizesSnapshot takes a snapshot of the bucket lengths in time
// proportional to the buckets changed since the last one (the first is a
// full copy). The caller holds the lock that guards the Store.
func (s *Store) SizesSnapshot() *SizesSnap {
	var p *SizesSnap
	if s.snap == nil {
		p = &SizesSnap{first: s.Sizes()}
	} else {
		d := make([]bucketLen, len(s.changed))
		for i, b := range s.changed {
			d[i] = bucketLen{b, s.sizes[b]} // 0 when deleted or empty
		}
		p = &SizesSnap{base: s.snap, delta: d}
	}
	s.changed, s.changedLimit = s.changed[:0], 0
	s.snap = p
	return p
}

// touch records that bucket b's length changed, for SizesSnapshot.
// Duplicates are kept until changed passes changedLimit (at least twice
// the buckets plus 4096): it is then made a set again, and the limit set
// to twice what is left, so that a set of distinct buckets larger than
// the store (Remove forgets buckets that stay listed) is not sorted again
// at every touch.
func (s *Store) touch(b int64) {
	if s.snap == nil {
		return
	}
	s.changed = append(s.changed, b)
	if len(s.changed) > max(s.changedLimit, 2*len(s.sizes)+4096) {
		slices.Sort(s.changed)
		s.changed = slices.Compact(s.changed)
		s.changedLimit = 2 * len(s.changed)
	}
}
