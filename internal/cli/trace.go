package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/hourglass-mq/hourglass/client"
)

func traceCommand() *command {
	return &command{
		name:     "trace",
		synopsis: "ID | --topic T --key K",
		summary:  "show a message's history, each event with its time",
		help: `Shows what happened to a message, as the broker's commit log recorded it,
each event with its time: sent, rescheduled, cancelled, fell due, made
visible; delivered to group G as attempt N, nacked, lease expired, acked;
dead-lettered (with its reason) and, after that, the dead-letter copy's own
events (redriven to its group). Nothing is made up from the current state:
events before an upgrade that recorded them, or in log segments retention
removed, are not shown (the output says when retention removed some).`,
		run: runTrace,
	}
}

func runTrace(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cf := a.addClientFlags(fs)
	var t target
	addTargetFlags(fs, &t)
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	cl := a.client(cf)
	id, _, code, ok := a.lookupTarget(ctx, c, cl, &t, pos)
	if !ok {
		return code
	}
	tr, err := cl.Trace(ctx, id)
	if err != nil {
		return a.failed(c, err)
	}
	if cf.json {
		a.printJSON(tr)
		return ExitOK
	}
	a.printTrail(tr)
	return ExitOK
}

func (a *App) printTrail(tr client.Trail) {
	w := a.Stdout
	fmt.Fprintf(w, "trail of %s (topic %s)\n", tr.ID, tr.Topic)
	if tr.Partial {
		fmt.Fprintln(w, "  (retention removed log segments written after this message: events recorded there are gone)")
	}
	of := tr.ID
	for _, ev := range tr.Events {
		if ev.Message != of {
			of = ev.Message
			fmt.Fprintf(w, "events of the dead-letter copy %s:\n", of)
		}
		fmt.Fprintf(w, "  %s  %-13s %s\n", ev.At, ev.Kind, eventDetail(ev))
	}
}

// eventDetail is what an event says besides its time and kind.
func eventDetail(ev client.TrailEvent) string {
	var parts []string
	if ev.Group != "" {
		g := "group " + ev.Group
		if ev.Attempt > 0 {
			g += fmt.Sprintf(", attempt %d", ev.Attempt)
		}
		parts = append(parts, g)
	}
	switch {
	case ev.Due != 0:
		parts = append(parts, "due "+ev.Due.String())
	case ev.Until != 0 && ev.Kind == "delivered":
		parts = append(parts, "lease until "+ev.Until.String())
	case ev.Until != 0:
		parts = append(parts, "back at "+ev.Until.String())
	case ev.Kind == "nacked" || ev.Kind == "lease_expired":
		parts = append(parts, "out of attempts")
	}
	if ev.Reason != "" {
		parts = append(parts, "reason "+ev.Reason)
	}
	if ev.DeadLetter != "" {
		parts = append(parts, "copy "+ev.DeadLetter)
	}
	return strings.Join(parts, "; ")
}
