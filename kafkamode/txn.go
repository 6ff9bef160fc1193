package kafkamode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// transact forwards (or dead-letters) batch, writes the markers and
// tombstones its progress needs, and commits the new group offsets, in one
// transaction. On commit the progress is applied; on abort the entries go
// back into the index (and the session rewinds the consumer to the
// committed offsets; the records it reads again are ignored). With beside
// (at least once, from the loop) its flush and end run beside the
// forwarding of what falls due meanwhile (endBeside).
func (w *Worker) transact(ctx context.Context, batch []*entry, snap []*partProgress, beside bool) error {
	if w.cfg.atLeastOnce() {
		batch = w.forwardFirst(ctx, batch)
	}
	byPart := make(map[*partProgress][]int64)
	for _, e := range batch {
		if e.ctl == nil || !e.ctl.keepOwn {
			byPart[e.pp] = append(byPart[e.pp], e.offset)
		}
	}
	snaps := w.buildSnapshots(snap, byPart)
	if len(batch) == 0 && len(snaps) == 0 {
		return nil // every transaction commits offsets (see doc.go): none to commit
	}
	began := time.Now()
	defer func() {
		us := time.Since(began).Microseconds()
		w.stats.TxnMicros.Add(us)
		if us > w.stats.MaxTxnMicros.Load() {
			w.stats.MaxTxnMicros.Store(us)
		}
	}()
	if err := w.ses.begin(); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	var produceErr atomic.Value
	var refused refusals
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			produceErr.CompareAndSwap(nil, err)
			refused.add(r, err)
		}
	}
	now := time.Now().UnixMilli()
	outputs := make(map[*kgo.Record]*entry, len(batch))
	for _, e := range batch {
		if out := w.output(e); out != nil {
			outputs[out] = e
			w.ses.produce(ctx, out, promise)
		}
	}
	for _, sn := range snaps {
		if _, ok := byPart[sn.pp]; !ok {
			byPart[sn.pp] = nil // commit its unchanged offset with the snapshot
		}
		for _, r := range sn.records {
			w.ses.produce(ctx, r, promise)
		}
	}
	plans := w.producePlans(ctx, byPart, snaps, promise)
	commitFn := w.offsetCommit(plans, snaps)
	te := &txnEnd{w: w, ctx: ctx, outputs: outputs, promise: promise, produceErr: &produceErr, commitFn: commitFn}
	end := te.run
	if beside {
		end = func() (bool, error) { return w.endBeside(ctx, te.run) }
	}
	committed, err := end()
	flushErr := te.flushErr
	defer w.observeStages(batch, now, began, te.flushed)
	w.watchSettle(ctx, time.Now())
	for _, e := range batch {
		e.inBatch = false
	}
	if committed {
		w.committed(batch, plans, snaps, now)
		w.noteCopies(outputs, plans)
		return nil
	}
	w.aborted(batch, plans)
	w.rewindAfterAbort()
	w.deadLetterRefused(refused.take(), outputs)
	perr, _ := produceErr.Load().(error)
	return w.abortError(len(batch), perr, flushErr, err)
}

// txnEnd is the waiting part of a transaction: its flush, the copies
// records that need the flushed offsets (recordCopies), and End. It reads
// only the transaction's own outputs and plans, which the loop leaves
// alone while it runs beside it (endBeside).
type txnEnd struct {
	w          *Worker
	ctx        context.Context
	outputs    map[*kgo.Record]*entry
	promise    func(*kgo.Record, error)
	produceErr *atomic.Value
	commitFn   func(*kmsg.TxnOffsetCommitRequest) error
	flushErr   error     // set by run
	flushed    time.Time // set by run: when the flush ended
}

// run flushes and ends the transaction: it commits unless a produce or
// the flush failed.
func (t *txnEnd) run() (committed bool, err error) {
	t.flushErr = t.w.ses.flush(t.ctx)
	if t.flushErr == nil && t.produceErr.Load() == nil {
		t.flushErr = t.w.recordCopies(t.ctx, t.outputs, t.promise)
	}
	t.flushed = time.Now()
	try := kgo.TryCommit
	if t.flushErr != nil || t.produceErr.Load() != nil {
		try = kgo.TryAbort
	}
	return t.w.ses.end(t.ctx, t.commitFn, try)
}

// rewindAfterAbort sets the consumer of each partition this worker owns
// and has read to pp.next, one past the highest offset read, after an
// aborted transaction. The records below it are in the index (aborted put
// the batch back), so nothing needs reading again. GroupTransactSession
// resets the consumer on abort to what it records as committed; where
// that lands is the library's detail, and a rewind to the group's
// committed offset would re-read every record since the oldest pending
// one (days of them behind a long delay). Pinned here, an abort re-reads
// nothing (Stats.RecordsReread; TestKafkaAbortRereadsNothing).
func (w *Worker) rewindAfterAbort() {
	if at := w.parts.readPositions(); len(at) > 0 {
		w.ses.setOffsets(w.cfg.DelayTopic, at)
	}
}

// refusals collects the records a transaction's produces failed for.
type refusals struct {
	mu   sync.Mutex
	recs map[*kgo.Record]error
}

func (f *refusals) add(r *kgo.Record, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.recs == nil {
		f.recs = map[*kgo.Record]error{}
	}
	f.recs[r] = err
}

// take hands the refusals collected so far to the caller, who reads
// them without the lock: a promise can still fail after the transaction
// ended (kgo fails the records of a batch it drops at a stop or an
// abort), and its add goes to a map of its own, never to the one handed
// over (a data race a worker built with -race reported at SIGTERM).
func (f *refusals) take() map[*kgo.Record]error {
	f.mu.Lock()
	defer f.mu.Unlock()
	recs := f.recs
	f.recs = nil
	return recs
}

// permanentProduceError reports whether Kafka refused a record for what it
// is (its topic cannot take it, or it is too large), so that producing it
// again can never succeed: retrying would abort every transaction of the
// worker, and hold up every message of its partitions, for ever.
func permanentProduceError(err error) bool {
	for _, k := range []*kerr.Error{kerr.UnknownTopicOrPartition, kerr.InvalidTopicException, kerr.MessageTooLarge,
		kerr.RecordListTooLarge, kerr.TopicAuthorizationFailed, kerr.InvalidRecord, kerr.PolicyViolation} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

// deadLetterRefused turns each entry whose output Kafka refused for good
// into a dead letter that says why; its next transaction produces that
// instead. A dead letter refused for good in turn (a body too large for
// the dead-letter topic too) goes again without its body, which stays in
// the delay topic at the offset the reason names.
func (w *Worker) deadLetterRefused(refused map[*kgo.Record]error, outputs map[*kgo.Record]*entry) {
	for r, err := range refused {
		e := outputs[r]
		if e == nil || !permanentProduceError(err) {
			continue
		}
		w.stats.Refused.Add(1)
		reason := fmt.Sprintf("Kafka refused the record for topic %q: %v", r.Topic, err)
		if e.copy {
			// Its copy forward, not its delivery, was refused: it stays
			// pending where it is, is not copied again, and is forwarded
			// at its due time (or dead-lettered then, if retention has
			// deleted it). Retrying the copy would abort every
			// transaction of the worker until then.
			e.copy = false
			w.cfg.Logger.Warn("a copy forward Kafka refuses for good is not made; the record waits in place", "partition", e.pp.partition, "offset", e.offset, "err", err)
			continue
		}
		switch {
		case e.ctl == nil || e.ctl.dlqReason == "":
			e.ctl = &control{dlqReason: reason}
		case !e.ctl.dropBody:
			e.ctl = &control{dlqReason: e.ctl.dlqReason + "; then " + reason + "; the body stays in the delay topic", dropBody: true}
		case !e.ctl.bare:
			e.ctl = &control{dlqReason: e.ctl.dlqReason + "; then " + reason + "; key and headers dropped too", dropBody: true, bare: true}
		default:
			// Never retried unchanged: that would abort every transaction
			// of the worker, and hold up all its partitions, for ever.
			e.ctl = &control{dlqReason: e.ctl.dlqReason, dropBody: true, bare: true, givenUp: true}
			w.cfg.Logger.Error("a record Kafka refuses even as a bare dead letter is resolved with no output; it stays in the delay topic",
				"partition", e.pp.partition, "offset", e.offset, "err", err)
			continue
		}
		w.cfg.Logger.Warn("a record Kafka refuses for good goes to the dead-letter topic", "partition", e.pp.partition, "offset", e.offset, "err", err)
	}
}

// output is what a batch entry produces: the forward, a copy, a dead
// letter, or nothing (a cancelled message, a cancel record).
func (w *Worker) output(e *entry) *kgo.Record {
	part := w.cfg.DelayTopic + "/" + strconv.Itoa(int(e.pp.partition)) + "/"
	source := part + strconv.FormatInt(e.offset, 10)
	// origin is where the message was first sent, from the worker's own
	// copy records (never from a header a producer can write).
	origin := part + strconv.FormatInt(firstOffset(e), 10)
	switch {
	case e.forwarded:
		return nil // at-least-once: forwarded already (forwardFirst)
	case e.cancelled || e.isCancel():
		return nil // resolved without output
	case e.copy:
		return copyRecord(e.rec, w.cfg.DelayTopic, e.pp.partition, origin, e.due)
	case e.ctl != nil && e.ctl.givenUp:
		return nil // refused even bare: logged and counted, resolved
	case e.dlqReason() != "" && e.ctl.bare:
		return deadLetterRecord(&kgo.Record{}, w.cfg.DLQTopic, source, e.dlqReason())
	case e.dlqReason() != "" && e.ctl.dropBody:
		return deadLetterRecord(&kgo.Record{Key: e.rec.Key}, w.cfg.DLQTopic, source, e.dlqReason())
	case e.dlqReason() != "":
		return deadLetterRecord(e.rec, w.cfg.DLQTopic, source, e.dlqReason())
	}
	s, err := w.cfg.scheduleOf(e.rec)
	if err != nil { // cannot happen: it parsed at read time
		return deadLetterRecord(e.rec, w.cfg.DLQTopic, source, err.Error())
	}
	return forwardRecord(e.rec, s.bizTopic, origin, e.due)
}

// offsetCommit returns the hook that puts the plans' group offsets into
// the transaction's offset commit, each with the state offset a new owner
// reads its partition's state from (commitMeta): where this transaction's
// snapshot of it begins, else its latest committed snapshot's. The hook
// runs in End, after the flush, so a snapshot's first record has its
// offset by then.
func (w *Worker) offsetCommit(plans []*partPlan, snaps []*snapWrite) func(*kmsg.TxnOffsetCommitRequest) error {
	return func(req *kmsg.TxnOffsetCommitRequest) error {
		from := make(map[*partProgress]int64, len(snaps))
		for _, sn := range snaps {
			from[sn.pp] = sn.records[0].Offset
		}
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic = w.cfg.DelayTopic
		for _, rt := range req.Topics {
			if rt.Topic == w.cfg.DelayTopic {
				t.TopicID = rt.TopicID
			}
		}
		for _, pl := range plans {
			p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			p.Partition = pl.pp.partition
			p.Offset = pl.commit
			p.LeaderEpoch = -1
			at, ok := from[pl.pp]
			if !ok {
				at = pl.pp.snapStart
			}
			meta := commitMeta(at, req.MemberID)
			p.Metadata = &meta
			t.Partitions = append(t.Partitions, p)
		}
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{t}
		return nil
	}
}

// committed applies a committed transaction: progress, snapshots, stats.
func (w *Worker) committed(batch []*entry, plans []*partPlan, snaps []*snapWrite, now int64) {
	w.stats.Committed.Add(1)
	// Snapshots first: a plan of the same transaction that tombstones
	// legacy markers wants another (they follow this one's start).
	for _, sn := range snaps {
		sn.pp.snapRead, sn.pp.snapChunks = sn.read, sn.chunks
		sn.pp.epoch, sn.pp.slot, sn.pp.snapStart = sn.id, 0, sn.records[0].Offset
		sn.pp.snapWanted = false
		w.stats.Snapshots.Add(1)
	}
	for _, pl := range plans {
		pl.apply()
		if pl.pp.slot >= maxResolutionSlots {
			w.idx.forceSnapshot(w.cfg.SnapshotInterval) // soon (maxResolutionSlots)
		}
	}
	for _, e := range batch {
		e.done = true
		switch {
		case e.cancelled:
			w.stats.Cancelled.Add(1)
			w.idx.resolvedInHeap()
		case e.isCancel():
			e.pp.copies.closed(e.offset)
		case e.copy:
			w.stats.CopiedForward.Add(1)
			w.idx.resolvedInHeap()
		case e.dlqReason() != "":
			w.stats.DeadLettered.Add(1)
		default:
			w.stats.Forwarded.Add(1)
			late := now - e.due
			if late > w.stats.MaxLatenessMs.Load() {
				w.stats.MaxLatenessMs.Store(late)
			}
			w.stats.Lateness.Observe(float64(late) / 1000)
			w.stats.partitionLateness(e.pp.partition).Observe(float64(late) / 1000)
		}
		e.rec = nil // let the body go
	}
}

// aborted undoes an aborted transaction's plans and puts its entries back.
func (w *Worker) aborted(batch []*entry, plans []*partPlan) {
	w.stats.Aborted.Add(1)
	for _, e := range batch {
		if e.ctl != nil && e.ctl.sched != nil {
			// A reschedule's scheduled half (later in the batch) is
			// decided again with this cancel half, which is due at
			// once (settleReschedule): not a copy to make regardless.
			e.ctl.sched.copy = false
		}
		// A cancel's target never left the heap, so pushing it again
		// gives it a second slot; collectDue skips the copy that is
		// popped while the other is in a batch, and peek drops both once
		// it is done.
		e.cancelled = false
		w.idx.putBack(e)
	}
}

// producePlans plans each partition's new progress from the offsets it
// resolves and produces the one resolution record each plan needs (none
// when C simply follows, or when the transaction snapshots the
// partition), and the tombstones of legacy markers.
func (w *Worker) producePlans(ctx context.Context, byPart map[*partProgress][]int64, snaps []*snapWrite, promise func(*kgo.Record, error)) []*partPlan {
	snapped := make(map[*partProgress]bool, len(snaps))
	for _, sn := range snaps {
		snapped[sn.pp] = true
	}
	plans := make([]*partPlan, 0, len(byPart))
	for pp, offs := range byPart {
		pl := pp.plan(offs, snapped[pp])
		plans = append(plans, pl)
		if len(pl.record) > 0 {
			w.ses.produce(ctx, &kgo.Record{Topic: w.cfg.StateTopic, Partition: pp.partition,
				Key: resolutionKey(w.cfg.DelayTopic, pp.partition, pp.slot), Value: encodeResolution(pp.epoch, pl.record)}, promise)
		}
		if pl.dropLegacy {
			for _, o := range pp.legacy {
				w.ses.produce(ctx, w.markerRecord(pp.partition, o, false), promise)
			}
		}
	}
	return plans
}

// abortError logs why a transaction of n records aborted: a produce
// failed (perr), the flush failed, or neither (a rebalance). It returns
// EndTransaction's own error, wrapped.
func (w *Worker) abortError(n int, perr, flushErr, err error) error {
	if perr != nil {
		w.cfg.Logger.Warn("transaction aborted: a produce failed", "err", perr)
	}
	if flushErr != nil {
		w.cfg.Logger.Warn("transaction aborted: flush failed", "err", flushErr)
	}
	if err != nil {
		return fmt.Errorf("end transaction: %w", err)
	}
	if perr == nil && flushErr == nil {
		w.cfg.Logger.Info("transaction aborted (rebalance)", "records", n)
	}
	return nil
}

// observeStages records a transaction's steps (Stages) and logs them at
// debug level: how late its oldest record was when it began (now, Unix
// ms), the flush, the end and the latest round trip of each request kind.
func (w *Worker) observeStages(batch []*entry, now int64, began, flushed time.Time) {
	end := time.Since(flushed)
	oldest := now
	for _, e := range batch {
		if e.due > 0 && e.due < oldest {
			oldest = e.due
		}
	}
	st := &w.stats.Stages
	if len(batch) > 0 {
		st.Wait.Observe(float64(now-oldest) / 1000)
	}
	st.Flush.Observe(flushed.Sub(began).Seconds())
	st.End.Observe(end.Seconds())
	if w.cfg.Logger.Enabled(context.Background(), slog.LevelDebug) {
		w.cfg.Logger.Debug("transaction", append([]any{"records", len(batch), "late_ms", now - oldest,
			"flush", flushed.Sub(began), "end", end}, w.ses.debugTimes()...)...)
	}
}
