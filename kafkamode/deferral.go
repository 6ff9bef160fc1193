package kafkamode

import (
	"context"
	"encoding/binary"
	"strconv"
	"strings"

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
// So a cancel in a partition into which this worker committed a copy
// that it has not read back yet waits (deferCancel) until reading has
// passed the highest such copy (copyHigh). A copy read while cancels wait
// keeps the offset of its original (the hourglass-copied-from header, the
// first record of the chain) in origins, until the partition's committed
// offset passes it, and a cancel matches entries by that offset
// (firstOffset): a cancel reaches a message if it was written after the
// message was first sent.
//
// The highest copy offset outlives its worker: the transaction that
// produces copies also writes it to the state topic (copiesRecords, key
// "<delay topic>/<p>/copies", drawn in doc.go), once the copies' produce
// has told their offsets, and a new owner loads it with the markers. So
// a cancel written just before a crash or a rebalance still waits for the
// copy, read by the next owner.

// noteCopies records, after a committed transaction, the offsets at which
// its copies forward landed (the produce set each record's offset), and
// forgets the origins of copies now below their partition's committed
// offset (resolved).
func (w *Worker) noteCopies(outputs map[*kgo.Record]*entry, plans []*partPlan) {
	for r, e := range outputs {
		if e.copy && r.Topic == w.cfg.DelayTopic && r.Offset > e.pp.copyHigh {
			e.pp.copyHigh = r.Offset
		}
	}
	for _, pl := range plans {
		for o := range pl.pp.origins {
			if o < pl.pp.committed {
				delete(pl.pp.origins, o)
			}
		}
	}
}

// cancelWaits reports whether the cancel entry c must wait for a copy of
// this worker's to be read back first.
func cancelWaits(c *entry) bool { return c.pp.next <= c.pp.copyHigh }

// deferCancel sets the cancel entry c aside until its partition has read
// its copies back (releaseDeferred). The scheduled half of a reschedule
// waits with it (holdScheduled).
func (w *Worker) deferCancel(c *entry) {
	if len(c.pp.deferred) == 0 {
		w.deferredParts = append(w.deferredParts, c.pp)
	}
	c.pp.deferred = append(c.pp.deferred, c)
	w.stats.CancelsDeferred.Add(1)
}

// holdScheduled reports whether e, popped as due, is the scheduled half of
// a reschedule whose cancel half waits: it then waits too (it is forwarded
// or copied only once the cancel half has run, settleReschedule).
func (w *Worker) holdScheduled(e *entry) bool {
	for _, c := range e.pp.deferred {
		if c.ctl != nil && c.ctl.sched == e {
			e.pp.deferred = append(e.pp.deferred, e)
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
			pp.deferred = nil
		case pp.next <= pp.copyHigh:
			keep = append(keep, pp)
		default:
			for _, e := range pp.deferred {
				w.due.push(e)
			}
			pp.deferred = nil
		}
	}
	clear(w.deferredParts[len(keep):])
	w.deferredParts = keep
}

// keepOrigin records, for a copy r read while cancels of its partition
// wait, the offset of the record it carries on, and reports whether it
// did: such an entry must stay in RAM (not spilled) until they ran.
func (w *Worker) keepOrigin(pp *partProgress, r *kgo.Record) bool {
	if len(pp.deferred) == 0 {
		return false
	}
	own := w.cfg.DelayTopic + "/" + strconv.Itoa(int(pp.partition)) + "/" + strconv.FormatInt(r.Offset, 10)
	for _, h := range r.Headers {
		if h.Key != HeaderCopiedFrom {
			continue
		}
		v, ok := copiedFrom(string(h.Value), own)
		if !ok {
			return false
		}
		o, err := strconv.ParseInt(v[strings.LastIndexByte(v, '/')+1:], 10, 64)
		if err != nil {
			return false
		}
		if pp.origins == nil {
			pp.origins = make(map[int64]int64)
		}
		pp.origins[r.Offset] = o
		return true
	}
	return false
}

// firstOffset is the offset at which the message of entry e was first
// sent: its own, or its original's for a copy read while cancels waited.
func firstOffset(e *entry) int64 {
	if o, ok := e.pp.origins[e.offset]; ok {
		return o
	}
	return e.offset
}

// copiesVersion is the first byte of a copies record's value.
const copiesVersion = 0x01

// copiesKey is the state-topic key of delay partition p's highest copy
// offset.
func copiesKey(delayTopic string, p int32) []byte {
	return []byte(delayTopic + "/" + strconv.Itoa(int(p)) + "/copies")
}

// parseCopiesValue decodes a copies record's value: copiesVersion, then
// the offset as a uvarint.
func parseCopiesValue(v []byte) (int64, bool) {
	if len(v) < 2 || v[0] != copiesVersion {
		return 0, false
	}
	x, n := binary.Uvarint(v[1:])
	if n <= 0 || n != len(v)-1 || x > 1<<62 {
		return 0, false
	}
	return int64(x), true
}

// copiesRecords returns, for each partition the transaction's copies went
// to, the state record of the highest copy offset so far. It runs after
// the copies were flushed (their offsets known) and before the commit.
func (w *Worker) copiesRecords(outputs map[*kgo.Record]*entry) []*kgo.Record {
	high := map[*partProgress]int64{}
	for r, e := range outputs {
		if e.copy && r.Topic == w.cfg.DelayTopic && r.Offset > max(high[e.pp], e.pp.copyHigh) {
			high[e.pp] = r.Offset
		}
	}
	out := make([]*kgo.Record, 0, len(high))
	for pp, x := range high {
		v := binary.AppendUvarint([]byte{copiesVersion}, uint64(x))
		out = append(out, &kgo.Record{Topic: w.cfg.StateTopic, Partition: pp.partition, Key: copiesKey(w.cfg.DelayTopic, pp.partition), Value: v})
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
