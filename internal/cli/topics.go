package cli

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/hourglass-mq/hourglass/client"
)

func topicsCommand() *command {
	return &command{
		name:     "topics",
		synopsis: "[list | create NAME | describe NAME]",
		summary:  "list, create or describe topics",
		help: `topics (or topics list) lists the topics with their pending and visible
counts. 'topics create NAME' creates a topic (--queues, --fifo); sends also
create unknown topics unless the broker runs with -auto-create-topics=false.
'topics describe NAME' shows one topic with its consumer groups.`,
		run: runTopics,
	}
}

func runTopics(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cf := a.addClientFlags(fs)
	queues := fs.Int("queues", 0, "create: number of queues (0: the broker's -default-queues)")
	fifo := fs.Bool("fifo", false, "create: FIFO topic, messages of one --group are delivered one at a time, in order")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	sub := "list"
	if len(pos) > 0 {
		sub, pos = pos[0], pos[1:]
	}
	cl := a.client(cf)
	switch sub {
	case "list":
		if len(pos) > 0 {
			return a.usageError(c, "topics list takes no argument")
		}
		return a.listTopics(ctx, c, cl, cf.json)
	case "create":
		if len(pos) != 1 {
			return a.usageError(c, "topics create takes one topic name")
		}
		if *queues < 0 {
			return a.usageError(c, "--queues %d is negative", *queues)
		}
		return a.createTopic(ctx, c, cl, cf.json, pos[0], client.TopicConfig{Queues: *queues, FIFO: *fifo})
	case "describe":
		if len(pos) != 1 {
			return a.usageError(c, "topics describe takes one topic name")
		}
		return a.describeTopic(ctx, c, cl, cf.json, pos[0])
	}
	return a.usageError(c, "unknown subcommand %q (want list, create or describe)", sub)
}

func (a *App) listTopics(ctx context.Context, c *command, cl *client.Client, asJSON bool) int {
	ts, err := cl.Topics(ctx)
	if err != nil {
		return a.failed(c, err)
	}
	if asJSON {
		a.printJSON(map[string]any{"topics": ts})
		return ExitOK
	}
	if len(ts) == 0 {
		fmt.Fprintln(a.Stdout, "no topics")
		return ExitOK
	}
	tw := tabwriter.NewWriter(a.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tQUEUES\tFIFO\tPENDING\tVISIBLE\tGROUPS")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%d\t%v\t%d\t%d\t%d\n", t.Name, t.Queues, t.FIFO, t.Pending, t.Visible, len(t.Groups))
	}
	tw.Flush()
	return ExitOK
}

func (a *App) createTopic(ctx context.Context, c *command, cl *client.Client, asJSON bool, name string, cfg client.TopicConfig) int {
	t, err := cl.CreateTopic(ctx, name, cfg)
	if err != nil {
		return a.failed(c, err)
	}
	if asJSON {
		a.printJSON(t)
		return ExitOK
	}
	kind := ""
	if t.FIFO {
		kind = "FIFO "
	}
	fmt.Fprintf(a.Stdout, "created %stopic %s with %d queues\n", kind, t.Name, t.Queues)
	return ExitOK
}

func (a *App) describeTopic(ctx context.Context, c *command, cl *client.Client, asJSON bool, name string) int {
	t, err := cl.DescribeTopic(ctx, name)
	if err != nil {
		return a.failed(c, err)
	}
	if asJSON {
		a.printJSON(t)
		return ExitOK
	}
	field(a.Stdout, "topic", t.Name)
	field(a.Stdout, "queues", strconv.Itoa(t.Queues))
	field(a.Stdout, "fifo", strconv.FormatBool(t.FIFO))
	field(a.Stdout, "pending", strconv.FormatInt(t.Pending, 10))
	field(a.Stdout, "visible", strconv.FormatUint(t.Visible, 10))
	if len(t.Groups) == 0 {
		field(a.Stdout, "groups", "none")
		return ExitOK
	}
	fmt.Fprintln(a.Stdout)
	a.printGroups(t.Groups)
	return ExitOK
}

// printGroups prints consumer groups as a table.
func (a *App) printGroups(gs []client.GroupInfo) {
	tw := tabwriter.NewWriter(a.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tBACKLOG\tIN-FLIGHT\tDELIVERED\tACKED\tREDELIVERED\tDEAD\tATTEMPTS\tBACKOFF\tDEAD-LETTER TOPIC")
	for _, g := range gs {
		name := g.Name
		if g.Paused {
			name += " (paused)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s..%s\t%s\n", name, g.Backlog, g.InFlight, g.Delivered, g.Acked,
			g.Redelivered, g.DeadLettered, g.Config.MaxAttempts, shortDur(g.Config.BackoffBase), shortDur(g.Config.BackoffMax), g.DeadLetterTopic)
	}
	tw.Flush()
}

// shortDur prints 5m rather than 5m0s.
func shortDur(d time.Duration) string {
	s := d.String()
	for _, suf := range []string{"m0s", "h0m"} {
		if len(s) > len(suf) && s[len(s)-len(suf):] == suf {
			s = s[:len(s)-2]
		}
	}
	return s
}
