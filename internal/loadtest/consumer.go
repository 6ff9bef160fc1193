package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/errs"
)

// consume is one consumer: receive, record the arrival time, and ack the
// batch with the next receive, which carries the receipts (one request
// per batch instead of two). A failed receive is retried after a backoff.
// A receive that carried acks and failed acked nothing: the acks are then
// made on their own, and the receive is repeated without them. A failed
// ack is counted (the message comes back after its lease and is counted
// as a duplicate).
func (r *runner) consume(ctx context.Context) {
	backoff := minBackoff
	opts := client.ReceiveOptions{Max: r.cfg.Max, Invisible: r.cfg.Invisible, Wait: r.cfg.Wait, BodyEncoding: client.BodyText}
	batch := make([]arrival, 0, r.cfg.Max)
	var pending []string // received and recorded, not yet acked
	defer func() { r.ack(ctx, pending) }()
	for ctx.Err() == nil {
		r.recvReqs.Add(1)
		opts.Ack = pending
		msgs, err := r.api.Receive(ctx, r.topic, r.cfg.Group, opts)
		at := time.Now().UnixNano()
		if err != nil && len(pending) > 0 {
			if ctx.Err() != nil {
				// The run ended during a long poll that carried these acks.
				// The broker makes a request's acks before it waits, so
				// they stand if the request reached it: ack them again,
				// and a "receipt unknown" answer then means "acked".
				r.ackAfterCarry(ctx, pending)
				pending = nil // not again at the deferred ack
				return
			}
			r.ack(ctx, pending)
			pending = nil
			continue
		}
		pending = nil
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.recvErrors.Add(1)
			r.lastRecv.Store(err.Error())
			if permanent(err) {
				r.fail(fmt.Errorf("receive: %w", err))
				return
			}
			if !sleepCtx(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
		if len(msgs) == 0 {
			continue
		}
		pending = r.arrived(msgs, at, batch[:0])
	}
}

// arrived records a batch that arrived at at (Unix ns) and returns its
// receipts.
func (r *runner) arrived(msgs []client.Received, at int64, batch []arrival) []string {
	prefix := r.runID + "-"
	receipts := make([]string, 0, len(msgs))
	for _, m := range msgs {
		seq := -1
		if s, ok := strings.CutPrefix(m.Properties[propID], prefix); ok {
			if v, err := strconv.Atoi(s); err == nil {
				seq = v
			}
		}
		batch = append(batch, arrival{seq: seq, at: at, brokerDue: int64(m.Due), brokerVisible: int64(m.Visible), attempt: m.Attempt})
		receipts = append(receipts, m.Receipt)
	}
	r.rec.arrive(batch)
	return receipts
}

// streamer is the streaming receive of *client.Client (--stream).
type streamer interface {
	Stream(ctx context.Context, topic, group string, opts client.StreamOptions) (*client.Stream, error)
}

// consumeStream is one consumer over a streaming receive (--stream): the
// broker leases up to --window messages ahead of the acks, and each batch
// is recorded and its receipts sent up the stream at once. A stream that
// ends early (the broker restarted in a drill, an error) is opened again
// after a backoff; what it had leased and not acked comes back after its
// lease, counted as duplicates as with receive.
func (r *runner) consumeStream(ctx context.Context, st streamer) {
	backoff := minBackoff
	opts := client.StreamOptions{Max: r.cfg.Max, Window: r.cfg.Window, Invisible: r.cfg.Invisible, BodyEncoding: client.BodyText}
	for ctx.Err() == nil {
		err := r.oneStream(ctx, st, opts)
		if ctx.Err() != nil {
			return
		}
		r.recvErrors.Add(1)
		r.lastRecv.Store(err.Error())
		if permanent(err) {
			r.fail(fmt.Errorf("stream: %w", err))
			return
		}
		if !sleepCtx(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// oneStream runs one stream until it ends. At the run's end (ctx) it
// sends no more acks: the broker answers the ones sent and ends the
// stream; what arrives meanwhile is recorded and acked on its own.
func (r *runner) oneStream(ctx context.Context, st streamer, opts client.StreamOptions) error {
	s, err := st.Stream(context.WithoutCancel(ctx), r.topic, r.cfg.Group, opts)
	if err != nil {
		return err
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { _ = s.CloseSend() })
	defer stop()
	var late []string
	defer func() { r.ack(ctx, late) }()
	batch := make([]arrival, 0, r.cfg.Max)
	for {
		r.recvReqs.Add(1)
		msgs, err := s.Next()
		at := time.Now().UnixNano()
		switch {
		case errors.Is(err, io.EOF):
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return errors.New("the stream ended")
		case err != nil:
			return err
		}
		receipts := r.arrived(msgs, at, batch[:0])
		if ctx.Err() != nil {
			late = append(late, receipts...)
			continue
		}
		if err := s.Ack(receipts...); err != nil {
			late = append(late, receipts...)
		}
	}
}

// ack acknowledges receipts on their own, counting a failure. It outlives
// a cancelled run context for a moment, so that the end of a run does not
// turn into ack failures.
func (r *runner) ack(ctx context.Context, receipts []string) {
	if len(receipts) == 0 {
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := r.api.Ack(actx, r.topic, r.cfg.Group, receipts...); err != nil {
		r.ackFailures.Add(int64(len(receipts)))
		r.lastRecv.Store("ack: " + err.Error())
	}
}

// ackAfterCarry acks receipts whose ack was carried by a receive that
// failed because the run ended: a not_found answer (the broker no longer
// holds a lease of one of them) is what an ack the broker already made
// looks like, so it is not counted as a failure; any other error is. The
// run is over, so no redelivery could show a wrong guess: the count of
// such acks is reported apart (AcksCarriedAtEnd).
func (r *runner) ackAfterCarry(ctx context.Context, receipts []string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, err := r.api.Ack(actx, r.topic, r.cfg.Group, receipts...)
	var e *client.Error
	switch {
	case err == nil:
	case errors.As(err, &e) && e.Code == errs.NotFound:
		r.acksCarriedAtEnd.Add(int64(len(receipts)))
	default:
		r.ackFailures.Add(int64(len(receipts)))
		r.lastRecv.Store("ack: " + err.Error())
	}
}

// permanent reports whether err is one that retrying cannot fix: a 4xx
// answer other than 408 and 429 (bad request, bad token, unknown topic).
func permanent(err error) bool {
	var e *client.Error
	if !errors.As(err, &e) {
		return false
	}
	return e.StatusCode >= 400 && e.StatusCode < 500 &&
		e.StatusCode != http.StatusTooManyRequests && e.StatusCode != http.StatusRequestTimeout
}
