package kafkamode

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A cancel must reach a message that a copy carries on, even when the
// cancel sits in the log before the copy. A reschedule R (or a copy
// forward) resolves its message by producing a copy X to the same
// partition in a transaction; a cancel C produced after R but before that
// transaction appended X lands between them: R < C < X. Read in log
// order, C would find the message neither at R (resolved) nor at X (not
// read yet), and the message would be delivered in spite of C: a test
// that produced a reschedule and then a cancel at once saw it in half of
// 20 tries.
//
// So each partition keeps a copyState: for each copy X committed into it,
// recorded by the worker that committed it (never taken from a header,
// which any producer can write), the first offset of the message X
// carries on and its key hash. Then:
//   - a cancel that would match a copy not read back yet waits
//     (deferCancel) until it has been read, and the entries it would match
//     wait with it (held), so its own target is not forwarded meanwhile;
//     a copy of another message makes no cancel wait;
//   - a cancel matches an entry by its first offset (firstOffset): it
//     reaches a message if it was written after the message was first
//     sent, by key, or by offset naming the entry or its first offset;
//   - a copy's record is dropped once it has been read, a snapshot taken
//     after it has committed, and no cancel below it is open
//     (pruneCopies): a cancel read later lies above it, and the copy's
//     entry carries its first offset on (entry.back, written to the spill
//     and the snapshots), so a cancel that names the offset its message
//     was first sent at still reaches it, days and owners later (an owner
//     that ignores the snapshot, corrupt or older than the committed
//     offset, reads the copies below it without their first offsets);
//   - open lists the cancels read and not yet committed;
//   - no snapshot is taken while a cancel is open (buildSnapshots): the
//     scheduled half of a waiting reschedule would pass for a plain
//     message.
//
// The copies outlive their worker: the transaction that produces copies
// also writes the partition's copy records to the state topic
// (copiesRecords, key "<delay topic>/<p>/copies", drawn in doc.go), once
// the copies' produce has told their offsets, and a new owner loads them
// with the markers.
type copyState struct {
	copies   map[int64]copyRef // copy offset -> what it carries on
	open     []int64           // offsets of cancels read, not committed; ascending
	deferred []*entry          // waiting cancels, and the entries they hold
}

// copyRef is what a copy forward carries on.
type copyRef struct {
	first   int64  // offset at which its message was first sent
	keyHash uint64 // its key's hash
}

// maxCopyRefs bounds the copy records written to the state topic (about
// 20 bytes each, so a record stays far below Kafka's default 1 MB): in
// practice a handful are kept, those of the last transactions that
// copied; past the bound the oldest are left out, and a new owner can
// miss a cancel racing one of those.
const maxCopyRefs = 16384

// opened records a cancel entry read at offset o.
func (cs *copyState) opened(o int64) { cs.open = append(cs.open, o) }

// closed removes a committed cancel's offset from open.
func (cs *copyState) closed(o int64) {
	if i, ok := slices.BinarySearch(cs.open, o); ok {
		cs.open = slices.Delete(cs.open, i, i+1)
	}
}

// pruneCopies drops the copy records no cancel can need any more: copies
// below upTo with no open cancel below them. upTo is the read position,
// or the last committed snapshot's if lower: a copy read back after that
// snapshot is read again by a new owner (which starts from the snapshot),
// and only the copy record then tells where its message was first sent;
// below the snapshot's position the snapshot's entry carries it (back).
func (cs *copyState) pruneCopies(upTo int64) {
	for x := range cs.copies {
		if x < upTo && (len(cs.open) == 0 || cs.open[0] > x) {
			delete(cs.copies, x)
		}
	}
}

// noteCopies records, after a committed transaction, where its copies
// forward landed (the produce set each record's offset) and what each
// carries on, then prunes the copy records of the partitions the
// transaction touched.
func (w *Worker) noteCopies(outputs map[*kgo.Record]*entry, plans []*partPlan) {
	for r, e := range outputs {
		if e.copy && r.Topic == w.cfg.DelayTopic {
			cs := &e.pp.copies
			if cs.copies == nil {
				cs.copies = make(map[int64]copyRef)
			}
			cs.copies[r.Offset] = copyRef{first: firstOffset(e), keyHash: e.keyHash}
		}
	}
	for _, pl := range plans {
		pl.pp.copies.pruneCopies(min(pl.pp.next, pl.pp.snapRead))
	}
}

// cancelWaits reports whether the cancel entry c would match a copy not
// read back yet.
func cancelWaits(c *entry) bool {
	for x, ref := range c.pp.copies.copies {
		if x >= c.pp.next && c.cancels(x, ref.first, ref.keyHash) {
			return true
		}
	}
	return false
}

// deferCancel sets the cancel entry c aside until the copies it would
// match have been read back (releaseDeferred).
func (x *loopIndex) deferCancel(c *entry) {
	if len(c.pp.copies.deferred) == 0 {
		x.deferredParts = append(x.deferredParts, c.pp)
	}
	c.pp.copies.deferred = append(c.pp.copies.deferred, c)
	x.stats.CancelsDeferred.Add(1)
}

// held reports whether e, popped as due, must wait with a waiting cancel
// of its partition: the scheduled half of that cancel's reschedule (it is
// forwarded or copied only once the cancel half has run,
// settleReschedule), or an entry the cancel would match (forwarded now,
// it would escape the cancel). It is then set aside with the cancel.
func (x *loopIndex) held(e *entry) bool {
	for _, c := range e.pp.copies.deferred {
		if !c.isCancel() {
			continue
		}
		if c.ctl.sched == e || e.ctl == nil && c.cancels(e.offset, firstOffset(e), e.keyHash) {
			e.pp.copies.deferred = append(e.pp.copies.deferred, e)
			return true
		}
	}
	return false
}

// releaseDeferred puts the waiting entries of every partition none of
// whose waiting cancels still waits into the due heap again; cancels are
// due at once and run in log order, before what they held.
func (x *loopIndex) releaseDeferred() {
	keep := x.deferredParts[:0]
	for _, pp := range x.deferredParts {
		if pp.dropped.Load() {
			pp.copies.deferred = nil
			continue
		}
		waits := false
		for _, c := range pp.copies.deferred {
			if c.isCancel() && cancelWaits(c) {
				waits = true
				break
			}
		}
		if waits {
			keep = append(keep, pp)
			continue
		}
		for _, e := range pp.copies.deferred {
			x.due.push(e)
		}
		pp.copies.deferred = nil
	}
	clear(x.deferredParts[len(keep):])
	x.deferredParts = keep
}

// firstOffset is the offset at which the message of entry e was first
// sent: its own, or, for a copy, its original's.
func firstOffset(e *entry) int64 { return e.pp.copies.firstOf(e.offset, e.back) }

// firstOf is the offset at which the message of the entry at o, back
// from it (entry.back), was first sent: the copy record's while there is
// one, else o - back.
func (cs *copyState) firstOf(o, back int64) int64 {
	if ref, ok := cs.copies[o]; ok {
		return ref.first
	}
	return o - back
}

// cancels reports whether the cancel c reaches the message at offset o
// (first sent at first) with key hash kh.
func (c *entry) cancels(o, first int64, kh uint64) bool {
	if first >= c.offset {
		return false // sent after the cancel
	}
	if c.ctl.cancel.byKey {
		return kh == c.keyHash
	}
	return o == c.ctl.cancel.offset || first == c.ctl.cancel.offset
}
