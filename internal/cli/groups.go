package cli

import (
	"context"
	"fmt"

	"github.com/hourglass-mq/hourglass/client"
)

func groupsCommand() *command {
	return &command{
		name:     "groups",
		synopsis: "[list | create NAME | update NAME | pause NAME | resume NAME | seek NAME --to TIME]",
		summary:  "list, create and change the consumer groups of a topic",
		help: `groups --topic T (or groups list --topic T) lists the topic's consumer groups
with their backlog, in-flight leases and counters. 'groups create NAME'
creates a group with its redelivery policy, before any message if need be
(the topic is created with it unless the broker runs with
-auto-create-topics=false); receive also creates an unknown group, with the
defaults (16 attempts, backoff 1s doubling up to 5m). 'groups update NAME'
changes the policy flags given. 'groups pause NAME' stops the group's
receives from handing out anything until 'groups resume NAME', across
restarts. 'groups seek NAME --to TIME' moves the group to a time: in every
queue, messages made visible before TIME count as done and those at or
after it are delivered again, acked or not (--to now skips the backlog,
--to 0 replays all the queues hold, --to -1h the last hour).`,
		run: runGroups,
	}
}

func runGroups(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cf := a.addClientFlags(fs)
	topic := fs.String("topic", "", "topic of the groups (required)")
	attempts := fs.Int("max-attempts", 0, "create, update: deliveries before a message goes to the dead-letter topic (0: default 16)")
	base := fs.Duration("backoff-base", 0, "create, update: redelivery delay after the first failed attempt, doubled per attempt (0: default 1s)")
	maxB := fs.Duration("backoff-max", 0, "create, update: cap of the redelivery delay (0: default 5m)")
	admin := addGroupAdminFlags(fs)
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if *topic == "" {
		return a.usageError(c, "--topic is required")
	}
	sub := "list"
	if len(pos) > 0 {
		sub, pos = pos[0], pos[1:]
	}
	cl := a.client(cf)
	if *attempts < 0 || *base < 0 || *maxB < 0 {
		return a.usageError(c, "--max-attempts, --backoff-base and --backoff-max must not be negative")
	}
	policy := client.GroupConfig{MaxAttempts: *attempts, BackoffBase: *base, BackoffMax: *maxB}
	if code, ok := runGroupAdmin(ctx, a, c, cl, cf, sub, *topic, pos, policy, *admin.to); ok {
		return code
	}
	switch sub {
	case "list":
		if len(pos) > 0 {
			return a.usageError(c, "groups list takes no argument")
		}
		gs, err := cl.Groups(ctx, *topic)
		if err != nil {
			return a.failed(c, err)
		}
		if cf.json {
			a.printJSON(map[string]any{"groups": gs})
			return ExitOK
		}
		if len(gs) == 0 {
			fmt.Fprintf(a.Stdout, "topic %s has no consumer groups\n", *topic)
			return ExitOK
		}
		a.printGroups(gs)
		return ExitOK
	case "create":
		if len(pos) != 1 {
			return a.usageError(c, "groups create takes one group name")
		}
		g, err := cl.CreateGroup(ctx, *topic, pos[0], policy)
		if err != nil {
			return a.failed(c, err)
		}
		if cf.json {
			a.printJSON(g)
			return ExitOK
		}
		fmt.Fprintf(a.Stdout, "created group %s of topic %s: %d attempts, backoff %s..%s, dead letters to %s\n",
			g.Name, g.Topic, g.Config.MaxAttempts, shortDur(g.Config.BackoffBase), shortDur(g.Config.BackoffMax), g.DeadLetterTopic)
		return ExitOK
	}
	return a.usageError(c, "unknown subcommand %q (want list, create, update, pause, resume or seek)", sub)
}

func redriveCommand() *command {
	return &command{
		name:    "redrive",
		summary: "move a group's dead letters back to that group",
		help: `Moves up to --max messages from --group's dead-letter topic back to --topic,
where they are delivered again with fresh attempts to --group only: the
topic's other groups never receive them again. Use it after fixing what made
the consumer fail.`,
		run: runRedrive,
	}
}

func runRedrive(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cf := a.addClientFlags(fs)
	topic := fs.String("topic", "", "topic (required)")
	group := fs.String("group", "", "consumer group whose dead letters to move (required)")
	maxN := fs.Int("max", 0, "most messages to move (0: the broker's default)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	switch {
	case *topic == "" || *group == "":
		return a.usageError(c, "--topic and --group are required")
	case len(pos) > 0:
		return a.usageError(c, "unexpected argument %q", pos[0])
	case *maxN < 0:
		return a.usageError(c, "--max %d is negative", *maxN)
	}
	n, err := a.client(cf).Redrive(ctx, *topic, *group, *maxN)
	if err != nil {
		return a.failed(c, err)
	}
	if cf.json {
		a.printJSON(map[string]int{"redriven": n})
		return ExitOK
	}
	fmt.Fprintf(a.Stdout, "redrove %d messages to group %s of %s\n", n, *group, *topic)
	return ExitOK
}
