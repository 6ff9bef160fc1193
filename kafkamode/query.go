package kafkamode

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/hourglass-mq/hourglass/forecast"
)

// indexQueries hands read-only questions about the index to the loop
// goroutine, which owns the index (the due heap is never locked): a caller
// queues a function and waits for its answer; the loop runs the queued
// functions between two polls (answerQueries), so an answer takes at most
// one poll wait (50 ms) plus a transaction when a session runs. The zero
// value is ready.
type indexQueries struct {
	mu   sync.Mutex
	list []func()
}

// maxQueuedQueries bounds the questions waiting for the loop: while no
// session runs (the worker is joining the group again) nobody answers, and
// callers that gave up must not pile up.
const maxQueuedQueries = 64

// ErrNotServing is returned by the index queries while the worker runs no
// group session (it is starting, or joining the group again after a failed
// transaction) or the queue of questions is full.
var ErrNotServing = errors.New("kafka worker: the worker is not serving a group session right now; try again")

// ask queues f for the loop and waits until it ran or ctx is done.
func (w *Worker) ask(ctx context.Context, f func()) error {
	done := make(chan struct{})
	w.queries.mu.Lock()
	if len(w.queries.list) >= maxQueuedQueries {
		w.queries.mu.Unlock()
		return ErrNotServing
	}
	w.queries.list = append(w.queries.list, func() { f(); close(done) })
	w.queries.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		// f may still run later; it only writes to variables this call
		// no longer reads.
		return errors.Join(ErrNotServing, ctx.Err())
	}
}

// answerQueries runs the queued questions. Only the loop goroutine calls
// it, between two polls.
func (w *Worker) answerQueries() {
	w.queries.mu.Lock()
	list := w.queries.list
	w.queries.list = nil
	w.queries.mu.Unlock()
	for _, f := range list {
		f()
	}
}

// IndexForecast is a worker's forecast from its own index.
type IndexForecast struct {
	// Buckets are the counts of the plan's buckets.
	Buckets []forecast.Bucket
	// Partitions are the delay partitions the worker owned when it
	// answered, ascending: the counts cover these only. With several
	// workers in the group each answers for its own partitions.
	Partitions []int32
	// Pending is the number of pending messages in the index, whatever
	// their due time (the buckets may cover only some of them).
	Pending int64
}

// Forecast counts the pending messages of the worker's index per bucket
// of plan: records read from the delay partitions it owns, not yet
// forwarded, dead-lettered or cancelled. Records in a transaction that has
// not ended yet are not counted (they are being forwarded). It returns
// ErrNotServing when no session runs to answer before ctx is done.
func (w *Worker) Forecast(ctx context.Context, plan forecast.Plan) (IndexForecast, error) {
	var out IndexForecast
	var buckets []forecast.Bucket
	var pending int64
	err := w.ask(ctx, func() {
		c := forecast.New()
		var n int64
		seen := make(map[*entry]struct{}, len(w.idx.due))
		for _, e := range w.idx.due {
			// An entry may hold two heap slots after an aborted
			// transaction (see transact): count it once.
			if _, dup := seen[e]; dup || !e.live() || e.inBatch || e.cancelled || e.ctl != nil {
				continue
			}
			seen[e] = struct{}{}
			c.Add(forecast.SecondOf(e.due), 1)
			n++
		}
		buckets = plan.Run(c)
		n += w.idx.spilledForecast(plan, buckets)
		pending = n
	})
	if err != nil {
		return out, err
	}
	out.Buckets, out.Pending = buckets, pending
	out.Partitions = w.parts.owned()
	slices.Sort(out.Partitions)
	return out, nil
}

// Config returns the worker's configuration with the defaults filled in.
func (w *Worker) Config() Config { return w.cfg }

// CheckTopic applies Kafka's rules for topic names (1 to 249 characters of
// letters, digits, '.', '_' and '-'; not "." or ".."), with an error that
// says what is wrong.
func CheckTopic(t string) error { return validTopic(t) }
