package kafkamode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fencePrevious initializes a producer ID for this worker's transactional
// ID before the worker joins the group. That bumps the ID's epoch, which
// makes the transaction coordinator abort a transaction a previous
// incarnation (the same WorkerID, crashed) left open, at once rather than
// after its transaction timeout; and it fences that incarnation if it is
// in fact still alive. The coordinator answers CONCURRENT_TRANSACTIONS
// while it completes the abort, so this retries, for up to a minute.
func (w *Worker) fencePrevious(ctx context.Context) error {
	id := w.txnID()
	deadline := time.Now().Add(time.Minute)
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = int32(w.cfg.TxnTimeout.Milliseconds())
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := req.RequestWith(ctx, w.ses.aux)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil {
			return nil
		}
		// CONCURRENT_TRANSACTIONS is not marked retriable, but here it
		// only means the coordinator is still aborting.
		retry := kerr.IsRetriable(err) || errors.Is(err, kerr.ConcurrentTransactions)
		if !retry || time.Now().After(deadline) {
			return fmt.Errorf("fence the previous incarnation of transactional ID %s: %w", id, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
