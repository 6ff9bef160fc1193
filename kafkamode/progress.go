package kafkamode

import (
	"slices"
	"sort"
	"sync/atomic"
	"time"
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
//     or in resolved (resolved, and durable as the latest snapshot's
//     absence of it or a resolution record of the snapshot's epoch) or
//     was never a delay record (a control or aborted record);
//   - pending is ascending; resolved holds only offsets >= C once a
//     transaction has committed.
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
	// resolved).
	pending offsetRuns
	// resolved is the set of offsets >= C resolved out of due order
	// (resolved.go): as ranges, so the offsets resolved behind one
	// long-delayed message cost one range, not one entry each.
	resolved rangeSet
	// legacy lists the per-offset markers an older worker left live in
	// the state topic (key "<delay topic>/<p>/<offset>"); they are in
	// resolved too. The next transaction that touches the partition
	// carries them on in its resolution record and tombstones them.
	legacy []int64
	// epoch is the id of the partition's latest committed snapshot (0:
	// none), slot the number of resolution records committed since it,
	// and snapStart the state offset where that snapshot begins (-1:
	// unknown), which every offset commit names (commitMeta).
	epoch     uint64
	slot      int
	snapStart int64
	// snapWanted asks for a snapshot at the next round although nothing
	// was read since the last: set once the legacy markers are
	// tombstoned, so the state a new owner reads (from the snapshot on)
	// no longer starts before those tombstones.
	snapWanted bool
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
	// assignedAt is when the partition was assigned (Unix ms; 0 for a
	// partition built in a test): at-least-once forwards of records
	// read below catchUp and due by then may repeat the previous
	// owner's (mayRedeliver).
	assignedAt int64
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
		if e.offset >= c && !pp.resolved.contains(e.offset) {
			keep = append(keep, e)
			pp.pending.push(e.offset)
		}
	}
	pp.next = start
	pp.snapRead, pp.snapChunks = s.read, s.chunks
	pp.open.Add(int64(len(keep)))
	return keep, start
}

// newPartProgress returns the progress of partition p as a new owner
// starts it, given the per-offset markers an older worker left live.
func newPartProgress(p int32, legacy []int64) *partProgress {
	pp := &partProgress{partition: p, committed: -1, snapRead: -1, snapStart: -1, legacy: slices.Sorted(slices.Values(legacy))}
	pp.resolved.addAll(pp.legacy)
	return pp
}

// takenOver returns the progress of partition p as a new owner starts
// it from what the state topic holds (lp) and the delay partition's end
// offset at assignment (catchUp).
func takenOver(p int32, lp *loadedPart, catchUp int64) *partProgress {
	pp := newPartProgress(p, lp.markers)
	pp.resolved.merge(lp.resolved.rs)
	pp.epoch, pp.slot = lp.epoch, lp.slot
	pp.seed = lp.snap
	if lp.snap != nil {
		pp.snapStart = lp.snap.start
	}
	pp.copies.copies = lp.copies
	pp.catchUp = catchUp
	pp.assignedAt = time.Now().UnixMilli()
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
	if pp.resolved.contains(o) {
		return false
	}
	pp.pending.push(o)
	pp.open.Add(1)
	return true
}

// partPlan is what one transaction does to one partition's progress: the
// offset it commits and the resolution record it writes. A plan is
// computed before the transaction ends and applied only if it commits.
type partPlan struct {
	pp       *partProgress
	resolved []int64 // offsets resolved in this transaction
	commit   int64   // new C
	// record lists the offsets its resolution record names: the resolved
	// offsets >= commit, and the legacy markers >= commit it carries on
	// (ascending; none: no record, as when C simply follows).
	record []int64
	// dropLegacy is set when the transaction tombstones the legacy
	// markers; snapshot when it writes the partition's snapshot (which
	// makes a resolution record needless: see buildSnapshots).
	dropLegacy, snapshot bool
	trim                 int // how many pending offsets lie below commit
}

// plan computes the effect of resolving the offsets in resolved (each in
// pending) in one transaction; snapshot says whether the transaction
// also writes the partition's snapshot.
func (pp *partProgress) plan(resolved []int64, snapshot bool) *partPlan {
	sort.Slice(resolved, func(i, j int) bool { return resolved[i] < resolved[j] })
	pl := &partPlan{pp: pp, resolved: resolved, snapshot: snapshot}
	isResolved := func(o int64) bool {
		if pp.resolved.contains(o) {
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
	pl.dropLegacy = len(pp.legacy) > 0
	if !snapshot {
		var carry []int64
		if pl.dropLegacy {
			carry = pp.legacy
		}
		pl.record = mergeAbove(resolved, carry, pl.commit)
	}
	return pl
}

// mergeAbove returns the offsets of the ascending a and b that are >= c,
// ascending, without duplicates.
func mergeAbove(a, b []int64, c int64) []int64 {
	var out []int64
	for _, o := range slices.Sorted(slices.Values(append(slices.Clip(a), b...))) {
		if o >= c && (len(out) == 0 || out[len(out)-1] != o) {
			out = append(out, o)
		}
	}
	return out
}

// apply makes a committed plan the partition's progress.
func (pl *partPlan) apply() {
	pp := pl.pp
	pp.committed = pl.commit
	pp.open.Add(-int64(len(pl.resolved)))
	pp.pending.dropFront(pl.trim)
	var above []int64
	for _, o := range pl.resolved {
		if o >= pl.commit {
			above = append(above, o)
		}
	}
	pp.resolved.addAll(above)
	pp.resolved.dropBelow(pl.commit)
	if pl.dropLegacy {
		pp.legacy = nil
		pp.snapWanted = true
	}
	if len(pl.record) > 0 {
		pp.slot++
	}
}
