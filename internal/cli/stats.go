package cli

import (
	"context"
	"fmt"
	"strconv"
)

func statsCommand() *command {
	return &command{
		name:    "stats",
		summary: "show the broker's counters and lateness",
		help: `Shows the broker's engine-wide counters (pending, sent, fired, cancelled,
rescheduled), the lateness quantiles (how long after its due time a message
became visible; the upper bound of the histogram bucket holding the
quantile), the duration of the last startup recovery and the clock jumps
detected. /metrics has the same and more in Prometheus format.`,
		run: runStats,
	}
}

func runStats(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cf := a.addClientFlags(fs)
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return a.usageError(c, "unexpected argument %q", pos[0])
	}
	s, err := a.client(cf).Stats(ctx)
	if err != nil {
		return a.failed(c, err)
	}
	if cf.json {
		a.printJSON(s)
		return ExitOK
	}
	w := a.Stdout
	field(w, "pending", strconv.FormatInt(s.Pending, 10))
	field(w, "sent", strconv.FormatUint(s.Sent, 10))
	field(w, "fired", strconv.FormatUint(s.Fired, 10))
	field(w, "cancelled", strconv.FormatUint(s.Cancelled, 10))
	field(w, "rescheduled", strconv.FormatUint(s.Rescheduled, 10))
	field(w, "lateness", fmt.Sprintf("p50 %s, p99 %s over %d messages", quantile(s.LatenessP50Ms), quantile(s.LatenessP99Ms), s.LatenessCount))
	field(w, "recovery", fmt.Sprintf("%.3fs", s.RecoverySeconds))
	field(w, "clock jumps", strconv.FormatUint(s.ClockJumps, 10))
	return ExitOK
}

// quantile renders a lateness quantile in ms; nil is "n/a".
func quantile(ms *float64) string {
	if ms == nil {
		return "n/a"
	}
	return "<= " + strconv.FormatFloat(*ms, 'g', -1, 64) + "ms"
}
