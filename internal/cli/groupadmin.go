package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/hourglass-mq/hourglass/client"
)

// An operator's changes to a group: groups update|pause|resume|seek NAME.

// groupAdminFlags are the flags of the group changes besides the policy
// flags groups create also has.
type groupAdminFlags struct {
	to *string
}

func addGroupAdminFlags(fs *flag.FlagSet) *groupAdminFlags {
	return &groupAdminFlags{to: fs.String("to", "", "seek: the time to move the group to: RFC 3339, Unix ms, now, 0 (the start) or -DURATION (ago, e.g. -1h)")}
}

// parseSeekTime reads seek's --to: "now", "0" (the start of the queues),
// "-1h" (an hour before now), RFC 3339 or Unix milliseconds.
func parseSeekTime(s string, now time.Time) (time.Time, error) {
	switch s = strings.TrimSpace(s); {
	case s == "":
		return time.Time{}, fmt.Errorf("--to is required: the time to move the group to (RFC 3339, Unix ms, now, 0 or -DURATION)")
	case s == "now":
		return now, nil
	case s == "0":
		return time.UnixMilli(0), nil
	case strings.HasPrefix(s, "-"):
		d, err := time.ParseDuration(s[1:])
		if err != nil || d <= 0 {
			return time.Time{}, fmt.Errorf("--to %q: a time before now is a minus sign and a positive Go duration, like -30m", s)
		}
		return now.Add(-d), nil
	}
	return parseTime(s)
}

// runGroupAdmin runs groups update, pause, resume and seek of the group
// name; ok is false for another subcommand.
func runGroupAdmin(ctx context.Context, a *App, c *command, cl *client.Client, cf *clientFlags, sub, topic string, pos []string, cfg client.GroupConfig, to string) (code int, ok bool) {
	switch sub {
	case "update", "pause", "resume", "seek":
	default:
		return 0, false
	}
	if len(pos) != 1 {
		return a.usageError(c, "groups %s takes one group name", sub), true
	}
	name := pos[0]
	var g client.GroupInfo
	var err error
	switch sub {
	case "update":
		if cfg == (client.GroupConfig{}) {
			return a.usageError(c, "groups update needs at least one of --max-attempts, --backoff-base and --backoff-max"), true
		}
		g, err = cl.SetGroupPolicy(ctx, topic, name, cfg)
	case "pause", "resume":
		g, err = cl.PauseGroup(ctx, topic, name, sub == "pause")
	case "seek":
		return a.seekGroup(ctx, c, cl, cf, topic, name, to), true
	}
	if err != nil {
		return a.failed(c, err), true
	}
	if cf.json {
		a.printJSON(g)
		return ExitOK, true
	}
	state := "running"
	if g.Paused {
		state = "paused"
	}
	fmt.Fprintf(a.Stdout, "group %s of topic %s: %s; %d attempts, backoff %s..%s\n",
		g.Name, g.Topic, state, g.Config.MaxAttempts, shortDur(g.Config.BackoffBase), shortDur(g.Config.BackoffMax))
	return ExitOK, true
}

func (a *App) seekGroup(ctx context.Context, c *command, cl *client.Client, cf *clientFlags, topic, name, to string) int {
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	at, err := parseSeekTime(to, now())
	if err != nil {
		return a.usageError(c, "%v", err)
	}
	res, err := cl.SeekGroup(ctx, topic, name, at)
	if err != nil {
		return a.failed(c, err)
	}
	if cf.json {
		a.printJSON(map[string]any{"group": res.Group, "queues": res.Queues})
		return ExitOK
	}
	fmt.Fprintf(a.Stdout, "moved group %s of topic %s to %s\n", name, topic, client.Millis(at.UnixMilli()))
	for _, q := range res.Queues {
		switch {
		case q.To < q.From:
			fmt.Fprintf(a.Stdout, "  queue %d: back from offset %d to %d: %d messages delivered again\n", q.Queue, q.From, q.To, q.From-q.To)
		case q.To > q.From:
			fmt.Fprintf(a.Stdout, "  queue %d: ahead from offset %d to %d: %d messages skipped\n", q.Queue, q.From, q.To, q.To-q.From)
		default:
			fmt.Fprintf(a.Stdout, "  queue %d: stays at offset %d\n", q.Queue, q.To)
		}
	}
	return ExitOK
}
