package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/hourglass-mq/hourglass/client"
)

func clockCommand() *command {
	return &command{
		name:     "clock",
		synopsis: "[now | advance DURATION | advance --to TIME]",
		summary:  "read the broker's clock, or move a virtual one (test brokers)",
		help: `clock (or clock now) prints the broker's clock mode and time. 'clock advance
30m' moves the clock of a broker started with 'serve --clock virtual' forward
(or to --to TIME) and returns once what fell due is visible. A broker on the
system clock refuses to move time (failed_precondition).`,
		run: runClock,
	}
}

func runClock(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cf := a.addClientFlags(fs)
	to := fs.String("to", "", "advance: the new time, RFC 3339 or Unix milliseconds")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	sub := "now"
	if len(pos) > 0 {
		sub, pos = pos[0], pos[1:]
	}
	cl := a.client(cf)
	var ct client.ClockTime
	var err error
	switch sub {
	case "now":
		if len(pos) > 0 || *to != "" {
			return a.usageError(c, "clock now takes no argument")
		}
		ct, err = cl.Clock(ctx)
	case "advance":
		switch {
		case *to != "" && len(pos) == 0:
			tm, perr := parseTime(*to)
			if perr != nil {
				return a.usageError(c, "--to: %v", perr)
			}
			ct, err = cl.AdvanceClockTo(ctx, tm)
		case *to == "" && len(pos) == 1:
			d, perr := time.ParseDuration(pos[0])
			if perr != nil || d < 0 {
				return a.usageError(c, "%q is not a duration such as 30m or 1h30m (the clock never runs backwards)", pos[0])
			}
			ct, err = cl.AdvanceClock(ctx, d)
		default:
			return a.usageError(c, "clock advance takes one duration, or --to TIME")
		}
	default:
		return a.usageError(c, "unknown subcommand %q (want now or advance)", sub)
	}
	if err != nil {
		return a.failed(c, err)
	}
	if cf.json {
		a.printJSON(ct)
		return ExitOK
	}
	fmt.Fprintf(a.Stdout, "%s clock: %s (%d)\n", ct.Mode, ct.NowTime, ct.Now)
	if !ct.Settled {
		fmt.Fprintln(a.Stdout, "not settled yet: some messages due by now are still being dispatched")
	}
	return ExitOK
}
