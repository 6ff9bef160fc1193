package kafkamode

import (
	"context"
	"encoding/binary"
	"slices"
	"strconv"

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
// So each partition keeps a copyState:
//   - high, the highest offset of a copy committed into it: a cancel read
//     while the read position has not passed high waits (deferCancel)
//     until it has, so the copy is in the index when the cancel runs;
//   - origins, for each copy X the offset of the message it carries on
//     (its first incarnation), recorded by the worker that committed the
//     copy, never taken from a header (any producer can write one); a
//     cancel matches an entry by that first offset (firstOffset): it
//     reaches a message if it was written after the message was first
//     sent, and a cancel by offset that names the first offset reaches
//     the copy. An origin is dropped once every cancel below its copy has
//     committed (pruneOrigins);
//   - open, the offsets of the cancels read and not yet committed.
//
// Both high and origins outlive their worker: the transaction that
// produces copies also writes them to the state topic (copiesRecords, key
// "<delay topic>/<p>/copies", drawn in doc.go), once the copies' produce
// has told their offsets, and a new owner loads them with the markers.
type copyState struct {
	high     int64           // -1: none
	origins  map[int64]int64 // copy offset -> first offset
	open     []int64         // ascending
	deferred []*entry        // cancels (and scheduled halves) waiting for high
}

// opened records a cancel entry read at offset o.
func (cs *copyState) opened(o int64) { cs.open = append(cs.open, o) }

// closed removes a committed cancel's offset from open.
func (cs *copyState) closed(o int64) {
	if i, ok := slices.BinarySearch(cs.open, o); ok {
		cs.open = slices.Delete(cs.open, i, i+1)
	}
}

// pruneOrigins drops the origins no cancel can need any more: copies
// below the read position next with no open cancel below them.
func (cs *copyState) pruneOrigins(next int64) {
	for x := range cs.origins {
		if x < next && (len(cs.open) == 0 || cs.open[0] > x) {
			delete(cs.origins, x)
		}
	}
}

// noteCopies records, after a committed transaction, where its copies
// forward landed (the produce set each record's offset) and the first
// offset of what each carries on, then prunes the origins of the
// partitions the transaction touched.
func (w *Worker) noteCopies(outputs map[*kgo.Record]*entry, plans []*partPlan) {
	for r, e := range outputs {
		if !e.copy || r.Topic != w.cfg.DelayTopic {
			continue
		}
		cs := &e.pp.copies
		cs.high = max(cs.high, r.Offset)
		if cs.origins == nil {
			cs.origins = make(map[int64]int64)
		}
		cs.origins[r.Offset] = firstOffset(e)
	}
	for _, pl := range plans {
		pl.pp.copies.pruneOrigins(pl.pp.next)
	}
}

// cancelWaits reports whether the cancel entry c must wait for a copy to
// be read back first.
func cancelWaits(c *entry) bool { return c.pp.next <= c.pp.copies.high }

// deferCancel sets the cancel entry c aside until its partition has read
// its copies back (releaseDeferred). The scheduled half of a reschedule
// waits with it (holdScheduled), and the partition takes no snapshot
// meanwhile (buildSnapshots).
func (w *Worker) deferCancel(c *entry) {
	if len(c.pp.copies.deferred) == 0 {
		w.deferredParts = append(w.deferredParts, c.pp)
	}
	c.pp.copies.deferred = append(c.pp.copies.deferred, c)
	w.stats.CancelsDeferred.Add(1)
}

// holdScheduled reports whether e, popped as due, is the scheduled half of
// a reschedule whose cancel half waits: it then waits too (it is forwarded
// or copied only once the cancel half has run, settleReschedule).
func (w *Worker) holdScheduled(e *entry) bool {
	for _, c := range e.pp.copies.deferred {
		if c.ctl != nil && c.ctl.sched == e {
			e.pp.copies.deferred = append(e.pp.copies.deferred, e)
			return true
		}
	}
	return false
}

// releaseDeferred puts the waiting entries of every partition whose copies
// have been read back into the due heap again; cancels are due at once and
// run in log order.
func (w *Worker) releaseDeferred() {
	keep := w.deferredParts[:0]
	for _, pp := range w.deferredParts {
		switch {
		case pp.dropped.Load():
			pp.copies.deferred = nil
		case cancelWaits(&entry{pp: pp}):
			keep = append(keep, pp)
		default:
			for _, e := range pp.copies.deferred {
				w.due.push(e)
			}
			pp.copies.deferred = nil
		}
	}
	clear(w.deferredParts[len(keep):])
	w.deferredParts = keep
}

// firstOffset is the offset at which the message of entry e was first
// sent: its own, or, for a copy whose origin is kept, its original's.
func firstOffset(e *entry) int64 { return e.pp.copies.first(e.offset) }

// first is firstOffset by offset (for spilled entries too).
func (cs *copyState) first(o int64) int64 {
	if f, ok := cs.origins[o]; ok {
		return f
	}
	return o
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

// copiesVersion is the first byte of a copies record's value.
const copiesVersion = 0x01

// copiesKey is the state-topic key of delay partition p's copyState.
func copiesKey(delayTopic string, p int32) []byte {
	return []byte(delayTopic + "/" + strconv.Itoa(int(p)) + "/copies")
}

// encodeCopies is a copies record's value: copiesVersion, high, then the
// origins as pairs of (copy offset, first offset), all uvarints.
func encodeCopies(high int64, origins map[int64]int64) []byte {
	b := binary.AppendUvarint([]byte{copiesVersion}, uint64(high))
	b = binary.AppendUvarint(b, uint64(len(origins)))
	for x, f := range origins {
		b = binary.AppendUvarint(b, uint64(x))
		b = binary.AppendUvarint(b, uint64(f))
	}
	return b
}

// parseCopies decodes a copies record's value.
func parseCopies(v []byte) (copyState, bool) {
	cs := copyState{high: -1}
	if len(v) < 2 || v[0] != copiesVersion {
		return cs, false
	}
	v = v[1:]
	next := func() (int64, bool) {
		x, n := binary.Uvarint(v)
		if n <= 0 || x > 1<<62 {
			return 0, false
		}
		v = v[n:]
		return int64(x), true
	}
	high, ok1 := next()
	n, ok2 := next()
	if !ok1 || !ok2 || n > int64(len(v)) {
		return cs, false
	}
	cs.high = high
	cs.origins = make(map[int64]int64, n)
	for i := int64(0); i < n; i++ {
		x, ok1 := next()
		f, ok2 := next()
		if !ok1 || !ok2 || f >= x || x > high {
			return copyState{high: -1}, false
		}
		cs.origins[x] = f
	}
	if len(v) != 0 {
		return copyState{high: -1}, false
	}
	return cs, true
}

// copiesRecords returns, for each partition the transaction's copies went
// to, the state record of its copyState as it will be once the
// transaction commits. It runs after the copies were flushed (their
// offsets known) and before the commit.
func (w *Worker) copiesRecords(outputs map[*kgo.Record]*entry) []*kgo.Record {
	next := map[*partProgress]copyState{}
	for r, e := range outputs {
		if !e.copy || r.Topic != w.cfg.DelayTopic {
			continue
		}
		cs, ok := next[e.pp]
		if !ok {
			cs = copyState{high: e.pp.copies.high, origins: cloneOrigins(e.pp.copies.origins)}
		}
		cs.high = max(cs.high, r.Offset)
		cs.origins[r.Offset] = firstOffset(e)
		next[e.pp] = cs
	}
	out := make([]*kgo.Record, 0, len(next))
	for pp, cs := range next {
		out = append(out, &kgo.Record{Topic: w.cfg.StateTopic, Partition: pp.partition,
			Key: copiesKey(w.cfg.DelayTopic, pp.partition), Value: encodeCopies(cs.high, cs.origins)})
	}
	return out
}

// cloneOrigins returns a copy of m, never nil.
func cloneOrigins(m map[int64]int64) map[int64]int64 {
	out := make(map[int64]int64, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// recordCopies produces the copies records of a transaction whose records
// were flushed (so the copies' offsets are known) and flushes them: one
// more round trip, only for transactions that copy.
func (w *Worker) recordCopies(ctx context.Context, outputs map[*kgo.Record]*entry, promise func(*kgo.Record, error)) error {
	recs := w.copiesRecords(outputs)
	if len(recs) == 0 {
		return nil
	}
	for _, r := range recs {
		w.sess.Produce(ctx, r, promise)
	}
	return w.sess.Client().Flush(ctx)
}
