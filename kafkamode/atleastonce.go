package kafkamode

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// redeliveryMargin is how far past a partition's assignment a message may
// have been due and still be forwarded by its previous owner: the
// workers' clocks may differ by that much (NTP keeps them within
// milliseconds).
const redeliveryMargin = 2 * time.Second

// mayRedeliver reports whether e's forward may repeat one its previous
// owner made without committing it: e was in the delay partition when
// the partition was assigned here (below catchUp) and due by then. Only
// at-least-once forwards can repeat; a false positive costs a consumer
// one lookup of the forward's hourglass-source.
func mayRedeliver(e *entry) bool {
	return e.offset < e.pp.catchUp && e.due <= e.pp.assignedAt+redeliveryMargin.Milliseconds()
}

// forwardFirst (at-least-once) produces the batch's forwards and dead
// letters with the idempotent producer and waits for Kafka's
// acknowledgement, before the transaction that commits their progress
// (and makes copies forward and cancels, which stay transactional). An
// entry whose output failed leaves the batch and goes back to the index
// (dead-lettered the next time if Kafka refuses it for good); it returns
// the rest.
func (w *Worker) forwardFirst(ctx context.Context, batch []*entry) []*entry {
	byRec := make(map[*kgo.Record]*entry, len(batch))
	recs := make([]*kgo.Record, 0, len(batch))
	for _, e := range batch {
		if e.forwarded || e.copy {
			continue
		}
		out := w.output(e)
		if out == nil || out.Topic == w.cfg.DelayTopic {
			continue
		}
		if mayRedeliver(e) {
			out.Headers = append(out.Headers, kgo.RecordHeader{Key: HeaderRedelivery, Value: []byte("1")})
		}
		byRec[out] = e
		recs = append(recs, out)
	}
	if len(recs) == 0 {
		return batch
	}
	failed := map[*entry]bool{}
	refused := map[*kgo.Record]error{}
	for _, res := range w.ses.forward(ctx, recs...) {
		e := byRec[res.Record]
		if res.Err != nil {
			failed[e], refused[res.Record] = true, res.Err
			continue
		}
		e.forwarded = true
	}
	if len(failed) == 0 {
		return batch
	}
	w.cfg.Logger.Warn("at-least-once forwards failed; they wait for the next transaction", "failed", len(failed), "of", len(recs))
	keep := make([]*entry, 0, len(batch)-len(failed))
	for _, e := range batch {
		if failed[e] {
			e.inBatch = false
			w.idx.putBack(e)
			continue
		}
		keep = append(keep, e)
	}
	w.deadLetterRefused(refused, byRec)
	return keep
}

// forwarderOptions are the idempotent producer's options (at-least-once):
// as the session's producer, without a transactional ID.
func (w *Worker) forwarderOptions() []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(w.cfg.Brokers...),
		kgo.AllowAutoTopicCreation(),
		kgo.ProducerLinger(0),
		kgo.MetadataMinAge(20 * time.Millisecond),
		kgo.ProducerBatchMaxBytes(MaxBatchBytes),
		kgo.RecordPartitioner(statePartitioner{state: w.cfg.StateTopic, delay: w.cfg.DelayTopic, other: kgo.StickyKeyPartitioner(nil)}),
	}
}

// aloCommitEvery is how often, at least once, a transaction commits the
// progress of the forwards made since the last one; between two, due
// records are forwarded as they fall due (forwardDue). A transaction
// holds the loop for its produce, offset commit, heartbeat and EndTxn
// (5 ms typically, 25 ms and more at its p99 on a busy machine): run
// after every forward, as at first, it held up the records falling due
// meanwhile, and the lateness p99 at 1,000/s was no better than scheme
// C's. What a crash costs grows with it: the forwards of the last
// interval, and of the transaction in flight, are made again by the next
// owner, each marked (HeaderRedelivery).
const aloCommitEvery = 50 * time.Millisecond

// commitDue reports whether the loop may start a transaction now: at
// once in exactly-once mode (the transaction is the forward), once
// aloCommitEvery has passed since the last one ended at least once.
func (w *Worker) commitDue() bool {
	return !w.cfg.atLeastOnce() || time.Since(w.ses.ended()) >= aloCommitEvery
}

// forwardDue (at-least-once) forwards what is due now without waiting
// for the last transaction to settle or for the next to be due: the
// entries it collects are forwarded at once (forwardFirst) and kept for
// the next transaction, which commits their progress.
func (w *Worker) forwardDue(ctx context.Context, now int64) {
	if w.ses.settled() && w.commitDue() {
		return // the transaction about to start takes them
	}
	if batch := w.idx.collectDue(now); len(batch) > 0 {
		w.idx.stashForwarded(w.forwardFirst(ctx, batch))
	}
}

// commitForwardedAtStop (at least once) commits, when the worker stops
// (endAtStop), the progress of the forwards it made and has not
// committed: those made since its last transaction, and those of a
// transaction the stop aborted (back in the index, entry.forwarded).
// Left uncommitted, the next owner would forward them a second time, and
// a second delivery is promised only after a crash. It is one last
// transaction, as the loop would run next: with what is due now, which it
// forwards. ctx is its own, not the session's (done by then); the worker
// is still a member of the group (it leaves after this), so the commit is
// fenced as any other. A failure is logged: those forwards are then made
// again by the next owner, marked (HeaderRedelivery), as after a crash.
func (w *Worker) commitForwardedAtStop(ctx context.Context) {
	batch := append(w.idx.takeForwarded(), w.idx.collectDue(time.Now().UnixMilli())...)
	forwarded := 0
	for _, e := range batch {
		if e.forwarded {
			forwarded++
		}
	}
	if forwarded == 0 {
		return // the index is dropped with the session: the next owner forwards the rest, once
	}
	select { // the last transaction's settle watch ends with the session's context
	case <-w.ses.settleDone().Done():
	case <-ctx.Done():
	}
	before := w.stats.Committed.Load()
	if err := w.transact(ctx, batch, nil, false); err != nil || w.stats.Committed.Load() == before {
		w.cfg.Logger.Warn("stopping: the progress of the last forwards was not committed; the next owner forwards them again, marked",
			"forwarded", forwarded, "err", err)
		return
	}
	w.cfg.Logger.Info("stopping: committed the progress of the last forwards", "forwarded", forwarded, "batch", len(batch))
}

// endBeside (at least once) runs end, the flush and End of the transaction
// that commits the progress of earlier forwards, on a goroutine of its
// own, and meanwhile forwards what falls due (collectForwardable), keeping
// it for the next transaction, which commits its progress. Run on the
// loop, that wait (5 ms typically, 25 ms and more at its p99) held up
// every record falling due during it, once every aloCommitEvery: at
// 1,000/s the lateness p99 was twice that of kafkabench's floor-alo, a
// bare loop that forwards as records fall due. The loop does nothing else
// until the end returns: it does not poll or begin (the group transact
// session forbids both during End), and what it forwards are entries
// outside the transaction in flight, so nothing that transaction holds,
// and nothing the end reads, changes under it.
//
// It returns as soon as the end has, without forwarding more first: the
// loop's own work (commits, polls, cancels) waits for nothing else. It
// never spins: it sleeps until the next forwardable entry is due or the
// end returns, and once a forward fails (put back in the index, as a
// SIGTERM's cancelled context or a refusal that is not for good does at
// once) or the session ends, it only waits for the end, since taking the
// same entry again would fail again.
func (w *Worker) endBeside(ctx context.Context, end func() (bool, error)) (bool, error) {
	type result struct {
		committed bool
		err       error
	}
	done := make(chan result, 1)
	go func() {
		c, err := end()
		done <- result{c, err}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	failed := false
	for {
		select {
		case r := <-done:
			return r.committed, r.err
		default:
		}
		forward := !failed && ctx.Err() == nil
		if forward {
			if batch := w.idx.collectForwardable(time.Now().UnixMilli()); len(batch) > 0 {
				kept := w.forwardFirst(ctx, batch)
				w.stats.ForwardedWhileEnding.Add(int64(len(kept)))
				w.idx.stashForwarded(kept)
				failed = len(kept) < len(batch)
				continue
			}
		}
		var wake <-chan time.Time
		if due, ok := w.idx.nextForwardable(); ok && forward {
			timer.Reset(time.Until(time.UnixMilli(due)))
			wake = timer.C
		}
		select {
		case r := <-done:
			return r.committed, r.err
		case <-wake:
		}
	}
}
