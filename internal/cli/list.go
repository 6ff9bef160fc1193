package cli

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/client"
)

func listCommand() *command {
	return &command{
		name:     "list",
		synopsis: "pending|inflight|dead",
		summary:  "list messages by state, a page at a time, with filters",
		help: `list pending lists the messages not yet visible, by the time each fires
(--topic optional); list inflight the messages --group of --topic has under
a lease, with attempt and lease end; list dead the group's dead letters,
with reason and attempts. Filters: --key-prefix, --tag, --due-from and
--due-to (RFC 3339, or Unix ms; for dead letters, when dead-lettered). A
page holds at most --limit (1 to 500); the last line names the cursor of
the next page (--cursor C), and --all follows the cursors to the end. A
page may be short while a next one exists: the broker bounds what one page
reads. Every message is listed by its ID, keyed or not: 'hourglass inspect
ID' shows it. Act on dead letters with 'hourglass dead'.`,
		run: runList,
	}
}

// listFlags are a listing's filters and paging, as flags.
type listFlags struct {
	topic, group, keyPrefix, tag, dueFrom, dueTo, cursor *string
	limit                                                *int
	all                                                  *bool
}

func runList(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cf := a.addClientFlags(fs)
	lf := listFlags{
		topic:     fs.String("topic", "", "topic (pending: optional; inflight, dead: required)"),
		group:     fs.String("group", "", "consumer group (inflight, dead: required)"),
		keyPrefix: fs.String("key-prefix", "", "only keys that start with this"),
		tag:       fs.String("tag", "", "only this tag"),
		dueFrom:   fs.String("due-from", "", "only due at or after this (RFC 3339 or Unix ms)"),
		dueTo:     fs.String("due-to", "", "only due before this (RFC 3339 or Unix ms)"),
		cursor:    fs.String("cursor", "", "continue from the cursor a page printed"),
		limit:     fs.Int("limit", 50, "most messages a page (1 to 500)"),
		all:       fs.Bool("all", false, "follow the cursors to the end of the listing"),
	}
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return a.usageError(c, "list takes one of pending, inflight or dead")
	}
	kind := pos[0]
	req, err := lf.request(kind)
	if err != nil {
		return a.usageError(c, "%v", err)
	}
	cl := a.client(cf)
	fetch := map[string]func(context.Context, client.ListRequest) (client.MessagePage, error){
		"pending": cl.ListPending, "inflight": cl.ListInFlight, "dead": cl.ListDead}[kind]
	var items []client.ListedMessage
	for {
		page, err := fetch(ctx, req)
		if err != nil {
			return a.failed(c, err)
		}
		if cf.json && !*lf.all {
			a.printJSON(page)
			return ExitOK
		}
		items = append(items, page.Items...)
		if page.NextCursor == nil {
			req.Cursor = ""
			break
		}
		req.Cursor = *page.NextCursor
		if !*lf.all {
			break
		}
	}
	if cf.json { // --all: one page of everything
		a.printJSON(client.MessagePage{Items: items})
		return ExitOK
	}
	printListed(a, kind, items)
	if req.Cursor != "" {
		fmt.Fprintf(a.Stdout, "more: --cursor %s\n", req.Cursor)
	}
	return ExitOK
}

// request checks the flags for kind and builds the request.
func (lf listFlags) request(kind string) (client.ListRequest, error) {
	req := client.ListRequest{Topic: *lf.topic, Group: *lf.group, KeyPrefix: *lf.keyPrefix, Tag: *lf.tag, Limit: *lf.limit, Cursor: *lf.cursor}
	switch kind {
	case "pending":
		if req.Group != "" {
			return req, fmt.Errorf("--group does not apply to pending messages, which belong to no group yet")
		}
	case "inflight", "dead":
		if req.Topic == "" || req.Group == "" {
			return req, fmt.Errorf("list %s needs --topic and --group", kind)
		}
	default:
		return req, fmt.Errorf("unknown listing %q (want pending, inflight or dead)", kind)
	}
	if req.Limit < 1 || req.Limit > api.MaxListLimit {
		return req, fmt.Errorf("--limit %d is not in [1, %d]", req.Limit, api.MaxListLimit)
	}
	var err error
	if req.DueFrom, err = parseInstant("--due-from", *lf.dueFrom); err != nil {
		return req, err
	}
	if req.DueTo, err = parseInstant("--due-to", *lf.dueTo); err != nil {
		return req, err
	}
	if req.DueTo != 0 && req.DueTo <= req.DueFrom {
		return req, fmt.Errorf("--due-to is not after --due-from")
	}
	return req, nil
}

// parseInstant reads RFC 3339 or Unix ms; "" is 0 (no bound).
func parseInstant(flag, s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.UnixMilli() < 0 {
		return 0, fmt.Errorf("%s %q is not a time: give RFC 3339 (2026-12-06T20:00:00Z) or Unix milliseconds", flag, s)
	}
	return t.UnixMilli(), nil
}

// printListed prints a listing as a table.
func printListed(a *App, kind string, items []client.ListedMessage) {
	if len(items) == 0 {
		fmt.Fprintf(a.Stdout, "no %s messages on this page\n", kind)
		return
	}
	tw := tabwriter.NewWriter(a.Stdout, 0, 4, 2, ' ', 0)
	switch kind {
	case "pending":
		fmt.Fprintln(tw, "ID\tSTATE\tTOPIC\tKEY\tTAG\tFIRES")
		for _, m := range items {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.State, m.Topic, dash(m.Key), dash(m.Tag), m.FireAt)
		}
	case "inflight":
		fmt.Fprintln(tw, "ID\tKEY\tTAG\tATTEMPT\tLEASE ENDS\tDUE")
		for _, m := range items {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", m.ID, dash(m.Key), dash(m.Tag), m.Attempt, m.LeaseEnd, m.Due)
		}
	default:
		fmt.Fprintln(tw, "ID\tKEY\tREASON\tATTEMPTS\tDEAD-LETTERED\tORIGIN")
		for _, m := range items {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", m.ID, dash(m.Key), m.Reason, m.Attempts, m.Due, m.OriginID)
		}
	}
	tw.Flush()
}

// dash shows an empty field as "-".
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func deadCommand() *command {
	return &command{
		name:     "dead",
		synopsis: "resend|delete ID... | purge --yes",
		summary:  "resend, delete or purge a group's dead letters",
		help: `dead resend ID... sends the dead letters (IDs as 'hourglass list dead'
prints them) back to --group of --topic, and to it only: the topic's other
groups never see them again. dead delete ID... removes them for good. dead
purge --yes removes every dead letter of the group. Each is durable when it
returns, and a selection is all or nothing: an unknown ID, one resent or
deleted already, or a dead letter of another group fails the whole command
and changes nothing.`,
		run: runDead,
	}
}

func runDead(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cf := a.addClientFlags(fs)
	topic := fs.String("topic", "", "topic (required)")
	group := fs.String("group", "", "consumer group whose dead letters to act on (required)")
	yes := fs.Bool("yes", false, "purge: confirm removing every dead letter of the group")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) == 0 {
		return a.usageError(c, "dead takes resend, delete or purge")
	}
	if *topic == "" || *group == "" {
		return a.usageError(c, "--topic and --group are required")
	}
	action, ids := pos[0], pos[1:]
	cl := a.client(cf)
	var n int
	var err error
	switch action {
	case "resend", "delete":
		if len(ids) == 0 {
			return a.usageError(c, "dead %s needs the IDs of the dead letters (hourglass list dead prints them)", action)
		}
		if action == "resend" {
			n, err = cl.ResendDead(ctx, *topic, *group, ids)
		} else {
			n, err = cl.DeleteDead(ctx, *topic, *group, ids)
		}
	case "purge":
		if len(ids) > 0 {
			return a.usageError(c, "dead purge takes no IDs (it removes every dead letter); use dead delete ID... for some")
		}
		if !*yes {
			return a.usageError(c, "dead purge removes every dead letter of group %s for good: add --yes to confirm", *group)
		}
		n, err = cl.PurgeDead(ctx, *topic, *group)
	default:
		return a.usageError(c, "unknown action %q (want resend, delete or purge)", action)
	}
	if err != nil {
		return a.failed(c, err)
	}
	if cf.json {
		a.printJSON(api.DeadLetterResult{Action: action, Count: n})
		return ExitOK
	}
	past := map[string]string{"resend": "resent", "delete": "deleted", "purge": "purged"}[action]
	plural := "s"
	if n == 1 {
		plural = ""
	}
	fmt.Fprintf(a.Stdout, "%s %d dead letter%s of group %s of %s\n", past, n, plural, *group, *topic)
	return ExitOK
}
