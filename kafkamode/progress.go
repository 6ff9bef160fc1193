package kafkamode

import (
	"container/heap"
	"sort"
	"sync/atomic"
)

// partProgress is the progress of one delay-topic partition that this worker
// owns: which offsets are resolved (forwarded, dead-lettered) and so what
// the group may commit. It is owned by the worker's loop goroutine; a
// revoke marks it dropped (an atomic flag) and the loop then
// ignores it.
//
// Invariants, with C the offset the group has committed for the partition:
//   - every offset below C is resolved (or was never a delay record);
//   - every offset in [C, next) is either in pending (read, not resolved)
//     or in markers (resolved, with a durable marker in the state topic)
//     or was never a delay record (a control or aborted record);
//   - pending is ascending; markers holds only offsets >= C.
type partProgress struct {
	partition int32
	// next is one past the highest offset read; records below it that the
	// consumer delivers again (after an aborted transaction rewinds it) are
	// ignored.
	next int64
	// committed is C, the group's committed offset as of the last
	// transaction this worker committed (-1: none yet).
	committed int64
	// pending holds the offsets read and not yet resolved, ascending, as
	// runs (offruns.go: one run for a gapless partition, however many
	// messages wait). Resolved offsets at its front are trimmed after each
	// commit; ones further in are skipped by the scan (they are in
	// markers).
	pending offsetRuns
	// markers is the set of resolved offsets >= C that have a marker in
	// the state topic; markerHeap orders the same offsets.
	markers    map[int64]struct{}
	markerHeap int64Heap
	// dropped is set when the partition is revoked or lost, by the group
	// callbacks (other goroutines), hence atomic.
	dropped atomic.Bool
	// open counts the read offsets not yet resolved; atomic because
	// Worker.Pending reads it from another goroutine.
	open atomic.Int64

	// seed is the snapshot loaded at take-over, until the committed
	// offset is known (adjustOffsets) and its entries are indexed.
	seed *snapshot
	// snapRead is the read position of the partition's latest committed
	// snapshot (-1: none known); snapChunks is its chunk count, so a
	// smaller next snapshot deletes the chunks it no longer uses.
	snapRead   int64
	snapChunks int
	// catchUp is the delay partition's end offset when it was assigned:
	// records below it that the consumer delivers are the take-over's
	// re-reading (Stats.TakeoverRecordsRead).
	catchUp int64

	// copies is what a cancel needs to reach messages carried on by
	// copies forward (deferral.go).
	copies copyState
}

// applySeed makes the loaded snapshot the partition's progress, given C,
// the group's committed offset: the pending offsets are the snapshot's
// entries at or above C without a marker, and reading resumes at
// max(C, the snapshot's read position). It returns the entries to index
// and the offset to consume from.
func (pp *partProgress) applySeed(c int64) ([]snapEntry, int64) {
	s := pp.seed
	pp.seed = nil
	start := max(c, s.read)
	var keep []snapEntry
	for _, e := range s.entries {
		if _, marked := pp.markers[e.offset]; e.offset >= c && !marked {
			keep = append(keep, e)
			pp.pending.push(e.offset)
		}
	}
	pp.next = start
	pp.snapRead, pp.snapChunks = s.read, s.chunks
	pp.open.Add(int64(len(keep)))
	return keep, start
}

func newPartProgress(p int32, markers []int64) *partProgress {
	pp := &partProgress{partition: p, committed: -1, snapRead: -1, markers: make(map[int64]struct{}, len(markers))}
	for _, o := range markers {
		pp.markers[o] = struct{}{}
	}
	pp.markerHeap = append(pp.markerHeap, markers...)
	heap.Init(&pp.markerHeap)
	return pp
}

// read records that offset o was read. It reports whether o still needs
// resolving: false when o was read before or has a marker (resolved by an
// earlier owner).
func (pp *partProgress) read(o int64) bool {
	if o < pp.next {
		return false
	}
	pp.next = o + 1
	if _, ok := pp.markers[o]; ok {
		return false
	}
	pp.pending.push(o)
	pp.open.Add(1)
	return true
}

// partPlan is what one transaction does to one partition's progress: the
// offset it commits, the markers it writes and the markers it deletes.
// A plan is computed before the transaction ends and applied only if it
// commits; an abort calls undo.
type partPlan struct {
	pp         *partProgress
	resolved   []int64 // offsets resolved in this transaction
	commit     int64   // new C
	addMarkers []int64 // resolved offsets >= commit: need a marker
	delMarkers []int64 // marked offsets < commit: tombstone
	trim       int     // how many pending offsets lie below commit
}

// plan computes the effect of resolving the offsets in resolved (each in
// pending) in one transaction. It pops the markers that fall below the new
// commit point from markerHeap; apply deletes them from the set, undo pushes
// them back.
func (pp *partProgress) plan(resolved []int64) *partPlan {
	sort.Slice(resolved, func(i, j int) bool { return resolved[i] < resolved[j] })
	pl := &partPlan{pp: pp, resolved: resolved}
	isResolved := func(o int64) bool {
		if _, ok := pp.markers[o]; ok {
			return true
		}
		i := sort.Search(len(resolved), func(i int) bool { return resolved[i] >= o })
		return i < len(resolved) && resolved[i] == o
	}
	pl.commit = pp.next
	pp.pending.each(func(o int64) bool {
		if isResolved(o) {
			pl.trim++
			return true
		}
		pl.commit = o
		return false
	})
	for _, o := range resolved {
		if o >= pl.commit {
			pl.addMarkers = append(pl.addMarkers, o)
		}
	}
	for len(pp.markerHeap) > 0 && pp.markerHeap[0] < pl.commit {
		pl.delMarkers = append(pl.delMarkers, heap.Pop(&pp.markerHeap).(int64))
	}
	return pl
}

// apply makes a committed plan the partition's progress.
func (pl *partPlan) apply() {
	pp := pl.pp
	pp.committed = pl.commit
	pp.open.Add(-int64(len(pl.resolved)))
	pp.pending.dropFront(pl.trim)
	for _, o := range pl.delMarkers {
		delete(pp.markers, o)
	}
	for _, o := range pl.addMarkers {
		pp.markers[o] = struct{}{}
		heap.Push(&pp.markerHeap, o)
	}
}

// undo reverses what plan changed (the popped markers) after an abort.
func (pl *partPlan) undo() {
	for _, o := range pl.delMarkers {
		heap.Push(&pl.pp.markerHeap, o)
	}
}

// int64Heap is a min-heap of offsets.
type int64Heap []int64

func (h int64Heap) Len() int           { return len(h) }
func (h int64Heap) Less(i, j int) bool { return h[i] < h[j] }
func (h int64Heap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *int64Heap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *int64Heap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
