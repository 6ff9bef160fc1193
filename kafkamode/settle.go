package kafkamode

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// settleMax bounds the wait, after a commit, for the transaction
// coordinator to complete it before the next transaction starts. Past it
// the next produce goes anyway: the broker then holds it for
// add.partitions.to.txn.retry.backoff.ms (20 ms by default), which waiting
// longer would not beat.
const settleMax = 20 * time.Millisecond

// settlePoll is the interval between two looks at the coordinator's state
// while a commit completes.
const settlePoll = 500 * time.Microsecond

// watchSettle watches the transaction that ended at committedAt until the
// transaction coordinator has completed it (written the markers: from then
// on a read_committed consumer sees the records, and the next
// transaction's first produce is not answered CONCURRENT_TRANSACTIONS, see
// txnGap). The session's settle context is done once it has, or settleMax
// after committedAt (the coordinator still completing), or txnGap after
// committedAt when the coordinator cannot say (DescribeTransactions
// refused, an old broker). The goroutine ends when ctx does, at the
// latest; runSession waits for it.
//
// Why no fixed gap after a completion, measured (docs/benchmarks.md,
// kafka-eos-floor): the floor, a bare loop that starts its next
// transaction as soon as the coordinator completed the last, had a
// lateness p50 of 5-6 ms at 20,000 messages/s where hourglass, waiting at
// least 5 ms more, had 11-15 ms; without the gap hourglass had 7-8 ms in
// the same runs, its p99 no worse. An earlier pass had found the p99 no
// better, and worse when the broker was short of CPU: the floor pays the
// same extra transactions, and it is the bar.
func (w *Worker) watchSettle(ctx context.Context, committedAt time.Time) {
	done, cancel := context.WithCancel(context.Background())
	w.ses.settling = done
	w.ses.endedAt = committedAt
	go func() {
		defer cancel()
		if !w.awaitCompletion(ctx, committedAt.Add(settleMax)) {
			if ctx.Err() == nil {
				w.stats.SettleFallbacks.Add(1)
			}
			sleepUntil(ctx, committedAt.Add(txnGap))
			return
		}
		d := time.Since(committedAt)
		w.stats.Stages.Settle.Observe(d.Seconds())
		w.ses.lastSettle.Store(int64(d))
	}()
}

// awaitCompletion asks the coordinator for the state of this worker's
// transactional ID until it is past PrepareCommit (or PrepareAbort), or
// until deadline. It reports false when the coordinator's answer cannot be
// had.
func (w *Worker) awaitCompletion(ctx context.Context, deadline time.Time) bool {
	id := w.txnID()
	for {
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{id}
		resp, err := req.RequestWith(ctx, w.ses.aux)
		if err != nil || len(resp.TransactionStates) != 1 {
			return false
		}
		st := resp.TransactionStates[0]
		if kerr.ErrorForCode(st.ErrorCode) != nil {
			return false
		}
		if st.State != "PrepareCommit" && st.State != "PrepareAbort" || !time.Now().Before(deadline) {
			return true
		}
		if !sleepUntil(ctx, time.Now().Add(settlePoll)) {
			return true
		}
	}
}

// sleepUntil waits until t or until ctx is done; it reports whether t was
// reached.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// settledCtx is a context that is already done: nothing to wait for.
func settledCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
