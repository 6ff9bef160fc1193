package cli

import (
	"context"
	"fmt"
)

func cancelCommand() *command {
	return &command{
		name:     "cancel",
		synopsis: "ID | --topic T --key K | --every-key K",
		summary:  "cancel a pending message",
		help: `Cancels a pending message, by ID or by business key (the latest message sent
to --topic with --key): it will never be delivered. A message already due,
visible or cancelled cannot be cancelled (failed_precondition).

Against a Kafka mode worker (hourglass kafka --listen), a cancel writes a
cancel record and waits up to 5 s for the worker to apply it: cancelled, or
failed_precondition if the worker forwarded the message first. If the
worker does not apply it in time, the cancel is still requested (durable),
and inspect tells the outcome later. --every-key K cancels every pending
message with key K there (Kafka mode only).`,
		run: runCancel,
	}
}

func runCancel(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cf := a.addClientFlags(fs)
	var t target
	addTargetFlags(fs, &t)
	everyKey := fs.String("every-key", "", "Kafka mode: cancel every pending message with this key")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	cl := a.client(cf)
	if *everyKey != "" {
		return a.cancelEveryKey(ctx, c, cf, cl, *everyKey, t, pos)
	}
	id, _, code, ok := a.lookupTarget(ctx, c, cl, &t, pos)
	if !ok {
		return code
	}
	if err := cl.Cancel(ctx, id); err != nil {
		return a.failed(c, err)
	}
	if cf.json {
		a.printJSON(map[string]string{"id": id, "state": "cancelled"})
		return ExitOK
	}
	fmt.Fprintf(a.Stdout, "cancelled %s\n", id)
	return ExitOK
}
