package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hourglass-mq/hourglass/client"
)

func receiveCommand() *command {
	return &command{
		name:    "receive",
		summary: "receive messages for a consumer group (lease, print, optionally ack)",
		help: `Leases up to --max visible messages of --topic for consumer --group and prints
them. A leased message stays invisible to the group for --invisible; ack it
(--ack, or 'hourglass ack RECEIPT') before then or it is delivered again.
--wait long-polls: wait up to that long for a first message. With --follow
the command keeps polling until interrupted and prints the receive rate on
standard error every second. --follow --stream receives over one streaming
exchange instead (POST .../stream): the broker leases up to --window
messages ahead and sends batches as they become visible, and --ack sends
the acks up the same exchange. On interrupt the acks already sent are
confirmed before it ends, and with --ack what arrives after the interrupt
is not printed (it was not acked, and comes back when its lease ends).

Text output shows each message's ID, receipt, attempt, key, tag, due time and
lateness (visible minus due time), then its body; --json prints one JSON
object per line per message, in the API's format.`,
		run: runReceive,
	}
}

// followPollWait is the long poll of --follow when --wait is 0, so an idle
// follow does not spin.
const followPollWait = 20 * time.Second

func runReceive(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cf := a.addClientFlags(fs)
	topic := fs.String("topic", "", "topic to receive from (required)")
	group := fs.String("group", "", "consumer group (required; created on first use)")
	maxN := fs.Int("max", 0, "most messages per receive (0: the broker's default, 32; limit 1000)")
	wait := fs.Duration("wait", 0, "long poll: wait up to this long for a message (limit 30s)")
	invisible := fs.Duration("invisible", 0, "lease: how long received messages stay hidden from the group unless acked (0: the broker's default, 30s)")
	ack := fs.Bool("ack", false, "acknowledge the messages after printing them")
	follow := fs.Bool("follow", false, "keep receiving until interrupted; print the rate on standard error")
	streamed := fs.Bool("stream", false, "with --follow: receive over one streaming exchange instead of polling")
	window := fs.Int("window", 0, "with --stream: most messages leased ahead of the acks (0: the broker's default, 1000; limit 10000)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	switch {
	case *topic == "" || *group == "":
		return a.usageError(c, "--topic and --group are required")
	case len(pos) > 0:
		return a.usageError(c, "unexpected argument %q", pos[0])
	case *maxN < 0 || *wait < 0 || *invisible < 0 || *window < 0:
		return a.usageError(c, "--max, --wait, --invisible and --window must not be negative")
	case *streamed && !*follow:
		return a.usageError(c, "--stream needs --follow")
	case *streamed && *wait != 0:
		return a.usageError(c, "--wait has no meaning with --stream: a stream waits as long as it is open")
	case *window != 0 && !*streamed:
		return a.usageError(c, "--window needs --stream")
	}
	cl := a.client(cf)
	opts := client.ReceiveOptions{Max: *maxN, Wait: *wait, Invisible: *invisible}
	if !*follow {
		msgs, err := cl.Receive(ctx, *topic, *group, opts)
		if err != nil {
			return a.failed(c, err)
		}
		a.printReceived(msgs, cf.json)
		if len(msgs) == 0 && !cf.json {
			fmt.Fprintf(a.Stderr, "no message (waited %v)\n", *wait)
		}
		if *ack && len(msgs) > 0 {
			if err := a.ackAll(ctx, cl, *topic, *group, msgs, cf.json); err != nil {
				return a.failed(c, err)
			}
		}
		return ExitOK
	}
	if *streamed {
		so := client.StreamOptions{Max: *maxN, Window: *window, Invisible: *invisible}
		return a.followStream(ctx, c, cl, *topic, *group, so, *ack, cf.json)
	}
	if opts.Wait == 0 {
		opts.Wait = followPollWait
	}
	return a.follow(ctx, c, cl, *topic, *group, opts, *ack, cf.json)
}

// follow polls until ctx ends. Transient failures (network, unavailable,
// rate limit) are reported and retried after a second; others end it.
func (a *App) follow(ctx context.Context, c *command, cl *client.Client, topic, group string, opts client.ReceiveOptions, ack, asJSON bool) int {
	var rate rateLine
	for ctx.Err() == nil {
		msgs, err := cl.Receive(ctx, topic, group, opts)
		if err == nil && ack && len(msgs) > 0 {
			err = a.ackAll(ctx, cl, topic, group, msgs, asJSON)
		}
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			if !a.retryable(ctx, c, err) {
				return a.failed(c, err)
			}
			continue
		}
		a.printReceived(msgs, asJSON)
		rate.add(a, len(msgs))
	}
	fmt.Fprintf(a.Stderr, "stopped: %d received\n", rate.total)
	return ExitOK
}

// retryable reports whether a follow loop goes on after err: a transient
// failure is reported and retried after a second (or the end of ctx).
func (a *App) retryable(ctx context.Context, c *command, err error) bool {
	if !transient(err) {
		return false
	}
	fmt.Fprintf(a.Stderr, "hourglass %s: %v (retrying in 1s)\n", c.name, err)
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
	return true
}

// rateLine counts what a follow received and prints the rate on standard
// error once a second.
type rateLine struct {
	total, window uint64
	start         time.Time
}

func (r *rateLine) add(a *App, n int) {
	if r.start.IsZero() {
		r.start = time.Now()
	}
	r.total += uint64(n)
	r.window += uint64(n)
	if el := time.Since(r.start); el >= time.Second {
		fmt.Fprintf(a.Stderr, "rate: %.1f msg/s over %.1fs, %d received\n", float64(r.window)/el.Seconds(), el.Seconds(), r.total)
		r.window, r.start = 0, time.Now()
	}
}

// transient reports an error worth retrying in a follow loop.
func transient(err error) bool {
	var e *client.Error
	if !errors.As(err, &e) {
		return true // network error: the broker may be restarting
	}
	return client.IsUnavailable(err) || client.IsResourceExhausted(err)
}

// ackAll acks msgs and reports the count (on stderr in JSON mode, so
// stdout stays one JSON object per message).
func (a *App) ackAll(ctx context.Context, cl *client.Client, topic, group string, msgs []client.Received, asJSON bool) error {
	receipts := make([]string, len(msgs))
	for i, m := range msgs {
		receipts[i] = m.Receipt
	}
	n, err := cl.Ack(ctx, topic, group, receipts...)
	if err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	if !asJSON {
		fmt.Fprintf(a.Stdout, "acked %d\n", n)
	}
	return nil
}

// printReceived prints messages as text blocks or as JSON lines.
func (a *App) printReceived(msgs []client.Received, asJSON bool) {
	for _, m := range msgs {
		if asJSON {
			b, _ := json.Marshal(m)
			fmt.Fprintf(a.Stdout, "%s\n", b)
			continue
		}
		fmt.Fprintf(a.Stdout, "message %s (queue %d, offset %d, attempt %d)\n", m.ID, m.Queue, m.Offset, m.Attempt)
		if m.Key != "" {
			subfield(a.Stdout, "key", m.Key)
		}
		if m.Tag != "" {
			subfield(a.Stdout, "tag", m.Tag)
		}
		if m.Group != "" {
			subfield(a.Stdout, "group", m.Group)
		}
		if len(m.Properties) > 0 {
			subfield(a.Stdout, "properties", formatProps(m.Properties))
		}
		subfield(a.Stdout, "due", fmt.Sprintf("%s, visible %s late", m.Due, m.Lateness()))
		subfield(a.Stdout, "receipt", m.Receipt)
		subfield(a.Stdout, "body", formatBody(m.Body))
	}
}
