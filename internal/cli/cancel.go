package cli

import (
	"context"
	"fmt"
)

func cancelCommand() *command {
	return &command{
		name:     "cancel",
		synopsis: "ID | --topic T --key K",
		summary:  "cancel a pending message",
		help: `Cancels a pending message, by ID or by business key (the latest message sent
to --topic with --key): it will never be delivered. A message already due,
visible or cancelled cannot be cancelled (failed_precondition).`,
		run: runCancel,
	}
}

func runCancel(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cf := a.addClientFlags(fs)
	var t target
	addTargetFlags(fs, &t)
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	cl := a.client(cf)
	id, _, usage, err := t.resolve(ctx, cl, pos)
	switch {
	case usage != "":
		return a.usageError(c, "%s", usage)
	case err != nil:
		return a.failed(c, err)
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
