package kafkamode

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// txnGap is how long the next transaction waits after one ended when the
// coordinator cannot say whether that end has completed (settle.go); when
// it can, the next starts as soon as it has. With transaction
// version 2 (KIP-890) the coordinator completes a commit after answering
// EndTxn (it writes the markers, then the completion); a produce of the
// next transaction that arrives before that is answered
// CONCURRENT_TRANSACTIONS inside the broker, which retries it after
// add.partitions.to.txn.retry.backoff.ms, 20 ms by default. Measured with
// internal/kafkabench at 20,000 messages/s falling due: flushes took 13 to
// 33 ms (p50) back to back and 3 to 6 ms with this gap of 5 ms.
const txnGap = 5 * time.Millisecond

// pollWait bounds one poll when nothing is due sooner.
const pollWait = 50 * time.Millisecond

// maxPollRecords bounds the records indexed between two looks at what is
// due: reading and firing share the loop, so a large read would make
// records due meanwhile late.
const maxPollRecords = 500

// poll reads what the consumer has, waiting at most until the next due time
// (or pollWait), and indexes it.
func (w *Worker) poll(ctx context.Context) {
	wait := pollWait
	if e := w.idx.due.peek(); e != nil {
		d := time.Until(time.UnixMilli(e.due))
		if e.due <= time.Now().UnixMilli() && e.rec == nil {
			d = 2 * time.Millisecond // its body is on the way
		}
		wait = min(wait, d)
	}
	if w.cfg.atLeastOnce() && w.idx.hasForwarded() {
		wait = min(wait, time.Until(w.ses.ended().Add(aloCommitEvery))) // their commit (commitDue)
	}
	settling := !w.ses.settled()
	if settling && !w.cfg.atLeastOnce() { // at least once forwards meanwhile (forwardDue)
		// The last transaction's end is completing: wait for that (the
		// watch ends within settleMax), reading meanwhile.
		wait = max(wait, settleMax)
	}
	var fs kgo.Fetches
	if wait <= 0 {
		fs = w.ses.poll(nil, maxPollRecords) // nil: take what is buffered, never block
	} else {
		pctx, cancel := context.WithTimeout(ctx, wait)
		if settling {
			stop := context.AfterFunc(w.ses.settleDone(), cancel)
			defer stop()
		}
		fs = w.ses.poll(pctx, maxPollRecords)
		cancel()
	}
	fs.EachError(func(t string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			w.cfg.Logger.Warn("fetch error", "topic", t, "partition", p, "err", err)
		}
	})
	w.parts.whileLocked(func(parts lockedParts) {
		now := time.Now().UnixMilli()
		w.idx.indexSeeded(parts.takeSeeded(), now)
		lead := w.cfg.BodyLead.Milliseconds()
		fs.EachRecord(func(r *kgo.Record) { w.idx.indexRecord(parts.get(r.Partition), r, now, lead) })
		w.idx.flushSpill()
	})
}

// queueCopy queues a scheduled entry for copy-forward if the delay topic's
// retention is finite and the entry falls due after the copy age.
func (x *loopIndex) queueCopy(e *entry) {
	if x.copyAfterMs > 0 && e.ctl == nil && e.due > e.ts+x.copyAfterMs {
		heap.Push(&x.copies, e)
	}
}

// readRetention sets copyAfterMs from the delay topic's retention.ms: a
// pending record older than half of it is copied forward. A record is
// deleted no sooner than retention.ms after its timestamp (Kafka deletes a
// segment when its newest record is that old), so the copy, made at half
// of it, is in time by half the retention. Size-based retention
// (retention.bytes) can delete sooner: it is not considered.
func (w *Worker) readRetention(ctx context.Context) error {
	rcs, err := w.ses.admin().DescribeTopicConfigs(ctx, w.cfg.DelayTopic)
	if err != nil {
		return fmt.Errorf("describe the config of topic %s: %w", w.cfg.DelayTopic, err)
	}
	rc, err := rcs.On(w.cfg.DelayTopic, nil)
	if err != nil || rc.Err != nil {
		return fmt.Errorf("describe the config of topic %s: %w", w.cfg.DelayTopic, errors.Join(err, rc.Err))
	}
	w.idx.copyAfterMs = 0
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" && c.Value != nil {
			ms, err := strconv.ParseInt(*c.Value, 10, 64)
			if err == nil && ms > 0 {
				w.idx.copyAfterMs = max(1, ms/2)
			}
		}
	}
	w.cfg.Logger.Info("delay topic retention", "copy_forward_after_ms", w.idx.copyAfterMs)
	return nil
}

// requestBodies hands the loader the entries that fall due within BodyLead
// and have no body, if it is idle.
func (x *loopIndex) requestBodies(ctx context.Context, now int64) {
	if x.loadBusy {
		return
	}
	horizon := now + x.cfg.BodyLead.Milliseconds()
	var wants []want
	// Entries old enough to copy forward: those falling due within the
	// lead are left to the due path (their bodies are loaded now, before
	// retention can delete them); the others are copied.
	for len(wants) < 20000 {
		e := x.peekCopy()
		if e == nil || e.ts+x.copyAfterMs > now {
			break
		}
		heap.Pop(&x.copies)
		if e.due <= horizon || e.copy {
			continue
		}
		e.copy = true
		if e.rec != nil {
			x.copyReady = append(x.copyReady, e)
			continue
		}
		if !e.loading {
			e.loading = true
			wants = append(wants, want{e: e, partition: e.pp.partition, offset: e.offset})
		}
	}
	for len(wants) < 20000 {
		e := x.noBody.peek()
		if e == nil || e.due > horizon {
			break
		}
		x.noBody.pop()
		if e.rec != nil || e.loading || !e.live() { // done: copied forward or cancelled
			continue
		}
		e.loading = true
		wants = append(wants, want{e: e, partition: e.pp.partition, offset: e.offset})
	}
	if len(wants) == 0 {
		return
	}
	x.loadBusy = true
	go func() { x.loadDone <- x.loader.load(ctx, wants) }()
}

// takeBodies attaches the bodies the loader fetched, if it finished.
func (x *loopIndex) takeBodies() {
	var res bodyResult
	select {
	case res = <-x.loadDone:
	default:
		return
	}
	x.loadBusy = false
	for e, r := range res.got {
		e.rec, e.loading = detach(r), false
		x.stats.BodiesLoaded.Add(1)
		if e.copy {
			x.copyReady = append(x.copyReady, e)
		}
	}
	for _, e := range res.missing {
		// The record is gone: say so in the dead-letter topic rather
		// than wait for it forever.
		e.loading = false
		e.ctl = &control{dlqReason: "the delay record was deleted by the delay topic's retention before it was due"}
		e.rec = &kgo.Record{Topic: x.cfg.DelayTopic, Partition: e.pp.partition, Offset: e.offset}
	}
	if res.err != nil {
		x.cfg.Logger.Warn("fetching bodies failed; retrying", "err", res.err)
	}
	// Entries the load did not answer (it failed part way) wait for the
	// next load.
	for _, wt := range res.wants {
		if e := wt.e; e.loading {
			e.loading = false
			x.noBody.push(e)
		}
	}
}

// collectDue pops the entries due at now whose body is loaded, at most
// MaxBatch, oldest due first. An entry due but still waiting for its body
// stops the batch: it is late, never early.
func (x *loopIndex) collectDue(now int64) []*entry {
	x.releaseDeferred()
	var batch []*entry
	for len(batch) < x.cfg.MaxBatch {
		e := x.due.peek()
		if e == nil || e.due > now {
			break
		}
		if e.rec == nil {
			break // its body is being fetched (requestBodies asked)
		}
		x.due.pop()
		if e.inBatch {
			continue // a second heap slot of an entry already taken (see transact)
		}
		if e.isCancel() && cancelWaits(e) {
			x.deferCancel(e) // a copy of ours is on its way (deferral.go)
			continue
		}
		if len(e.pp.copies.deferred) > 0 && x.held(e) {
			continue
		}
		if e.isCancel() && !x.unspillTargets(e) {
			break // the spill is unreadable: the session ends unresolved (spillErr)
		}
		e.inBatch = true
		e.copy = false // due: forwarded, not copied
		batch = append(batch, e)
		if e.isCancel() {
			targets, matched := x.cancelTargets(e)
			batch = append(batch, targets...)
			if sc := e.ctl.sched; sc != nil {
				batch = x.settleReschedule(batch, sc, matched, now)
			}
		}
	}
	// Copies forward ride in the same transaction.
	keep := x.copyReady[:0]
	for _, e := range x.copyReady {
		switch {
		case !e.live() || !e.copy || e.rec == nil:
		case e.inBatch || len(batch) >= x.cfg.MaxBatch:
			keep = append(keep, e)
		default:
			e.inBatch = true
			batch = append(batch, e)
		}
	}
	clear(x.copyReady[len(keep):])
	x.copyReady = keep
	return batch
}

// collectForwardable is collectDue for the time a transaction's end runs
// beside the loop (at least once, endBeside). It takes, in due order, the
// entries due by now that forwardableBeside allows, and stops at the first
// it does not, which waits with those behind it for the end. It pops only
// the slots it takes: an aborted end puts the transaction's entries back
// and would find a slot popped here gone, and an entry with no slot is
// never forwarded.
func (x *loopIndex) collectForwardable(now int64) []*entry {
	var batch []*entry
	for len(batch) < x.cfg.MaxBatch {
		e := x.due.peek()
		if e == nil || !forwardableBeside(e, now) {
			break
		}
		x.due.pop()
		e.inBatch = true
		e.copy = false // due: forwarded, not copied (as collectDue)
		batch = append(batch, e)
	}
	return batch
}

// nextForwardable is the due time of the head of the due heap if
// collectForwardable may take it once due; ok is false when the head is
// one it may not take (or there is none): then nothing can be taken
// until the end returns.
func (x *loopIndex) nextForwardable() (due int64, ok bool) {
	e := x.due.peek()
	if e == nil || !forwardableBeside(e, e.due) {
		return 0, false
	}
	return e.due, true
}

// forwardableBeside reports whether e may be forwarded at now while a
// transaction ends: due, its body loaded, and a plain message or dead
// letter. Not an entry of the transaction in flight (inBatch), not a
// cancel (its targets may be in that transaction, and a reschedule
// settles inside one), and not one of a partition with cancels deferred
// behind copies (deciding whether it is held changes that partition's
// deferral list, which the transaction's copies read).
func forwardableBeside(e *entry, now int64) bool {
	return e.due <= now && e.rec != nil && !e.inBatch && !e.isCancel() && len(e.pp.copies.deferred) == 0
}

// settleReschedule decides the scheduled half sc of a reschedule once its
// cancel half ran. If the cancel replaced a pending message, sc is
// resolved in the same transaction: forwarded when due, else copied
// forward (copyRecord: a plain record, without _cancel, naming sc's
// position). Left pending, sc would be read again after a crash or a
// rebalance, find the message it replaced resolved, and be dead-lettered:
// the message lost. If it replaced nothing (the message was forwarded,
// cancelled or never there), sc goes to the dead-letter topic in the same
// transaction, saying why, and is never forwarded.
func (x *loopIndex) settleReschedule(batch []*entry, sc *entry, replaced bool, now int64) []*entry {
	if !sc.live() || sc.inBatch || sc.ctl != nil || sc.rec == nil {
		return batch
	}
	if replaced {
		sc.inBatch, sc.copy = true, sc.due > now
		return append(batch, sc)
	}
	sc.ctl = &control{dlqReason: "reschedule: nothing pending to replace (the message it moves was already forwarded, cancelled, or never sent): not scheduled"}
	sc.inBatch, sc.copy = true, false // queued for copy-forward as an old record: dead-lettered, not copied
	return append(batch, sc)
}

// peekCopy returns the oldest live entry of the copy queue.
func (x *loopIndex) peekCopy() *entry {
	for len(x.copies) > 0 {
		if e := x.copies[0]; e.live() {
			return e
		}
		heap.Pop(&x.copies)
	}
	return nil
}

// cancelTargets marks and returns the pending entries the cancel entry c
// cancels: in c's partition, before c, matching its key hash or its
// offset, not already produced (an at-least-once forward made: too late).
// It scans the whole index, O(pending): cancels are expected to be rare
// next to forwards.
//
// An entry already in the batch being collected (an earlier reschedule's
// scheduled half read in the same poll, due or to be copied forward) is
// cancelled instead: nothing of the batch has been produced yet, and the
// cancel was written after it. It is counted in matched but not
// returned. Without this, a message, its reschedule and a cancel read in
// one poll after all were due delivered the reschedule in spite of the
// cancel, and a second reschedule found nothing to replace.
func (x *loopIndex) cancelTargets(c *entry) (out []*entry, matched bool) {
	for _, e := range x.due {
		if e.pp != c.pp || !e.live() || e.forwarded || e.cancelled || e.ctl != nil {
			continue
		}
		if c.cancels(e.offset, firstOffset(e), e.keyHash) {
			matched = true
			if e.inBatch {
				e.copy, e.cancelled = false, true
				continue
			}
			e.inBatch, e.cancelled = true, true
			out = append(out, e)
		}
	}
	return out, matched
}

// indexSeeded indexes the snapshot entries of partitions just taken over,
// before any record of theirs: a cancel read next must find them (in RAM
// or spilled, as any entry read at now). Caller holds the part table's
// lock.
func (x *loopIndex) indexSeeded(seeded []seededPart, now int64) {
	for _, sp := range seeded {
		for _, se := range sp.entries {
			x.place(sp.pp, se, now)
		}
	}
}

// indexRecord indexes one record of the delay topic read at now (Unix
// ms): a schedule, a cancel, a reschedule or a bad record for the dead
// letters; the body is kept only when the record is due within lead.
// pp is its partition's progress (nil: not owned). Caller holds the part
// table's lock.
func (x *loopIndex) indexRecord(pp *partProgress, r *kgo.Record, now, lead int64) {
	if pp == nil || r.Topic != x.cfg.DelayTopic {
		return
	}
	if r.Offset < pp.catchUp {
		x.stats.TakeoverRecordsRead.Add(1)
	}
	seenBefore := r.Offset < pp.next
	if !pp.read(r.Offset) {
		if seenBefore {
			x.stats.RecordsReread.Add(1)
		} else {
			x.stats.SkippedByMarker.Add(1)
		}
		return
	}
	x.stats.RecordsRead.Add(1)
	e := &entry{pp: pp, offset: r.Offset, ts: r.Timestamp.UnixMilli(), keyHash: keyHash(r.Key), back: r.Offset - pp.copies.firstOf(r.Offset, 0)} // only the copy records know
	s, err := x.cfg.scheduleOf(r)
	if err == nil {
		x.warmTopic(s.bizTopic)
	}
	cancel, isCancel, cerr := parseCancel(r)
	scheduled := hasScheduleHeaders(r)
	switch {
	case isCancel && cerr != nil:
		e.ctl = &control{dlqReason: cerr.Error()}
		e.rec = detach(r)
		x.due.push(e)
		return
	case isCancel && !scheduled:
		pp.copies.opened(r.Offset)
		e.ctl = &control{cancel: cancel}
		e.rec = &kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
		x.due.push(e)
		return
	case isCancel && err == nil:
		// A reschedule: cancel the earlier messages now, in a
		// control entry that does not resolve this record's offset,
		// and schedule this record below, with its body, which
		// collectDue drops once the cancel half has run.
		pp.copies.opened(r.Offset)
		x.due.push(&entry{pp: pp, offset: r.Offset, keyHash: e.keyHash,
			ctl: &control{cancel: cancel, keepOwn: true, sched: e},
			rec: &kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}})
		e.due, e.rec = s.due, detach(r)
		x.due.push(e)
		x.queueCopy(e)
		return
	}
	switch {
	case err != nil:
		e.ctl = &control{dlqReason: err.Error()}
		e.rec = detach(r)
	case s.due-now <= lead:
		e.due = s.due
		e.rec = detach(r)
	default:
		// Far from due: index the position only, on disk if beyond the
		// near window.
		x.place(pp, snapEntry{offset: e.offset, due: s.due, ts: e.ts, keyHash: e.keyHash, back: e.back}, now)
		return
	}
	x.due.push(e)
	x.queueCopy(e)
}
