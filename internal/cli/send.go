package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/hourglass-mq/hourglass/client"
)

func sendCommand() *command {
	return &command{
		name:     "send",
		synopsis: "[BODY]",
		summary:  "send a message, now or delayed",
		help: `Sends one message to --topic. The body is the argument, or standard input
when there is none (so 'hourglass send --topic t < file' sends a file). With
no --delay, --at or --level the message is visible at once.

Prints the message ID (for inspect, cancel and reschedule) and when it falls
due. Example:
  hourglass send --topic orders --delay 30m --key order-123 'close unpaid order 123'
  hourglass send --topic orders --dedup-id pay-42 'charge 42'   # safe to repeat
  hourglass send --topic offers --delay 1h --ttl 2h 'flash sale'  # due in 1h; expires 2h after the send
  hourglass send --topic mail --at 2030-01-02T20:00:00Z --window 60s 'newsletter'`,
		run: runSend,
	}
}

func runSend(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cf := a.addClientFlags(fs)
	df := addDeliveryFlags(fs, "deliver")
	topic := fs.String("topic", "", "topic to send to (required)")
	key := fs.String("key", "", "business key, e.g. order-123: inspect finds the message by it")
	tag := fs.String("tag", "", "short label for consumers")
	group := fs.String("group", "", "FIFO message group (messages of one group are delivered in order)")
	dedup := fs.String("dedup-id", "", "idempotency key: a resend with the same ID stores nothing and prints the first message's ID")
	deadline := fs.String("deadline", "", "deliver no later than this time (RFC 3339 or Unix ms), else dead-letter it as expired")
	ttl := fs.Duration("ttl", 0, "the deadline as a duration from the send (not from the due time), e.g. 2h")
	window := fs.Duration("window", 0, "tolerance: the broker may deliver at any time in [due, due+window], e.g. 10s")
	props := propsFlag{}
	fs.Var(props, "prop", "property name=value (repeatable)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if *topic == "" {
		return a.usageError(c, "--topic is required")
	}
	if len(pos) > 1 {
		return a.usageError(c, "give the body as one argument (quote it), or on standard input; got %d arguments", len(pos))
	}
	when, err := df.when()
	if err != nil {
		return a.usageError(c, "%v", err)
	}
	var body []byte
	if len(pos) == 1 {
		body = []byte(pos[0])
	} else {
		if a.Stdin == nil {
			return a.usageError(c, "no body: give it as an argument or on standard input")
		}
		if body, err = io.ReadAll(a.Stdin); err != nil {
			return a.failed(c, fmt.Errorf("read body from standard input: %w", err))
		}
	}
	m := client.Message{Key: *key, Tag: *tag, Group: *group, Body: body, When: when, DedupID: *dedup, TTL: *ttl, Window: *window}
	if *deadline != "" {
		if m.Deadline, err = parseTime(*deadline); err != nil {
			return a.usageError(c, "--deadline: %v", err)
		}
	}
	if len(props) > 0 {
		m.Properties = props
	}
	r, err := a.client(cf).Send(ctx, *topic, m)
	if err != nil {
		return a.failed(c, err)
	}
	if cf.json {
		a.printJSON(r)
		return ExitOK
	}
	if r.Duplicate {
		fmt.Fprintf(a.Stdout, "duplicate of %s in %s (queue %d), due %s: nothing stored\n", r.ID, r.Topic, r.Queue, a.when(r.Due))
		return ExitOK
	}
	fmt.Fprintf(a.Stdout, "sent %s to %s (queue %d), due %s\n", r.ID, r.Topic, r.Queue, a.when(r.Due))
	return ExitOK
}
