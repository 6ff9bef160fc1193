package cli

import (
	"context"
	"fmt"
)

func ackCommand() *command {
	return &command{
		name:     "ack",
		synopsis: "RECEIPT...",
		summary:  "acknowledge received messages by receipt",
		help: `Acknowledges messages received by --group: they are done and will not be
delivered to the group again. All or nothing: an unknown or expired receipt
(its lease ended) fails the whole call with not_found.`,
		run: runAck,
	}
}

func runAck(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cf := a.addClientFlags(fs)
	topic := fs.String("topic", "", "topic of the messages (required)")
	group := fs.String("group", "", "consumer group that received them (required)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if *topic == "" || *group == "" {
		return a.usageError(c, "--topic and --group are required")
	}
	if len(pos) == 0 {
		return a.usageError(c, "give at least one receipt")
	}
	n, err := a.client(cf).Ack(ctx, *topic, *group, pos...)
	if err != nil {
		return a.failed(c, err)
	}
	if cf.json {
		a.printJSON(map[string]int{"acked": n})
		return ExitOK
	}
	fmt.Fprintf(a.Stdout, "acked %d\n", n)
	return ExitOK
}

func nackCommand() *command {
	return &command{
		name:     "nack",
		synopsis: "RECEIPT",
		summary:  "give a received message back for redelivery",
		help: `Gives a message received by --group back: it is delivered again after
--delay, or, without --delay, after the group's backoff for its attempt. After
the group's maximum attempts it goes to the group's dead-letter topic.`,
		run: runNack,
	}
}

func runNack(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cf := a.addClientFlags(fs)
	topic := fs.String("topic", "", "topic of the message (required)")
	group := fs.String("group", "", "consumer group that received it (required)")
	delay := fs.Duration("delay", 0, "redeliver after this long (0: the group's backoff)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	switch {
	case *topic == "" || *group == "":
		return a.usageError(c, "--topic and --group are required")
	case len(pos) != 1:
		return a.usageError(c, "give exactly one receipt")
	case *delay < 0:
		return a.usageError(c, "--delay %v is negative", *delay)
	}
	if err := a.client(cf).Nack(ctx, *topic, *group, pos[0], *delay); err != nil {
		return a.failed(c, err)
	}
	if cf.json {
		a.printJSON(map[string]any{})
		return ExitOK
	}
	if *delay == 0 {
		fmt.Fprintln(a.Stdout, "nacked: redelivery after the group's backoff")
	} else {
		fmt.Fprintf(a.Stdout, "nacked: redelivery in %v\n", *delay)
	}
	return ExitOK
}
