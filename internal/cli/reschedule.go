package cli

import (
	"context"
	"fmt"

	"github.com/hourglass-mq/hourglass/client"
)

func rescheduleCommand() *command {
	return &command{
		name:     "reschedule",
		synopsis: "ID | --topic T --key K",
		summary:  "move a pending message to another time",
		help: `Moves a pending message, by ID or by business key, to a new delivery time
given by --delay (from now), --at or --level. With --if-due the move is a
compare-and-set: it happens only if the message is still due at that time
(as printed by inspect), so two schedulers cannot overwrite each other.`,
		run: runReschedule,
	}
}

func runReschedule(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cf := a.addClientFlags(fs)
	df := addDeliveryFlags(fs, "deliver")
	var t target
	addTargetFlags(fs, &t)
	ifDue := fs.String("if-due", "", "only if the message is still due at this time (RFC 3339 or Unix ms)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	when, err := df.when()
	if err != nil {
		return a.usageError(c, "%v", err)
	}
	if when.IsZero() {
		return a.usageError(c, "give the new time with --delay, --at or --level")
	}
	var cas client.Millis
	if *ifDue != "" {
		tm, err := parseTime(*ifDue)
		if err != nil {
			return a.usageError(c, "--if-due: %v", err)
		}
		cas = client.MillisOf(tm)
	}
	cl := a.client(cf)
	id, _, code, ok := a.lookupTarget(ctx, c, cl, &t, pos)
	if !ok {
		return code
	}
	r, err := cl.Reschedule(ctx, id, when, cas)
	if err != nil {
		return a.failed(c, err)
	}
	if cf.json {
		a.printJSON(r)
		return ExitOK
	}
	fmt.Fprintf(a.Stdout, "rescheduled %s, due %s\n", r.ID, a.when(r.Due))
	return ExitOK
}
