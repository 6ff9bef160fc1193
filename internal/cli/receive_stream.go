package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hourglass-mq/hourglass/client"
)

// streamDrain bounds how long an interrupted stream waits for the broker
// to confirm the acks already sent before it is cut.
const streamDrain = 5 * time.Second

// followStream is follow over a streaming receive: one exchange, reopened
// after a transient failure, until ctx ends.
func (a *App) followStream(ctx context.Context, c *command, cl *client.Client, topic, group string, opts client.StreamOptions, ack, asJSON bool) int {
	var rate rateLine
	for ctx.Err() == nil {
		err := a.streamOnce(ctx, cl, topic, group, opts, ack, asJSON, &rate)
		if err == nil || ctx.Err() != nil {
			break
		}
		if !a.retryable(ctx, c, err) {
			return a.failed(c, err)
		}
	}
	fmt.Fprintf(a.Stderr, "stopped: %d received\n", rate.total)
	return ExitOK
}

// streamOnce runs one stream until it ends. When ctx ends it stops sending
// acks (CloseSend): the broker makes those sent, stops leasing, gives back
// what it leased ahead, and ends the stream, which is then read to its end
// (at most streamDrain). It returns nil after such an end.
func (a *App) streamOnce(ctx context.Context, cl *client.Client, topic, group string, opts client.StreamOptions, ack, asJSON bool, rate *rateLine) error {
	sctx, cut := context.WithCancel(context.WithoutCancel(ctx))
	defer cut()
	s, err := cl.Stream(sctx, topic, group, opts)
	if err != nil {
		return err
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() {
		_ = s.CloseSend()
		time.AfterFunc(streamDrain, cut)
	})
	defer stop()
	for {
		msgs, err := s.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if ctx.Err() != nil && ack {
			// Interrupted: what the broker wrote ahead can no longer be
			// acked; it is not printed either (it comes back when its
			// lease ends), as a polling follow prints nothing after.
			continue
		}
		if ack {
			// Acked before printed, as a polling follow does: an ack
			// line sent before the interrupt's CloseSend is made and
			// confirmed; one refused after it is not printed.
			receipts := make([]string, len(msgs))
			for i, m := range msgs {
				receipts[i] = m.Receipt
			}
			if err := s.Ack(receipts...); err != nil {
				if ctx.Err() != nil {
					continue
				}
				return fmt.Errorf("ack: %w", err)
			}
		}
		a.printReceived(msgs, asJSON)
		rate.add(a, len(msgs))
	}
}
