package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hourglass-mq/hourglass/client"
)

func scheduleCommand() *command {
	return &command{
		name:     "schedule",
		synopsis: "create ID --topic T --cron EXPR [BODY] | get ID | firings ID | list | pause ID | resume ID | delete ID",
		summary:  "manage recurring schedules (cron with time zones)",
		help: `A schedule sends an ordinary message to --topic every time --cron falls due in
--tz (an IANA zone, default UTC). --cron is 5 fields (minute hour
day-of-month month day-of-week) or a descriptor such as @daily or @every 10m.
Each firing's key is "<--key or ID>@<fire time>". --catch-up says what
happens to fire times missed while the broker was down: skip, once (the
default) or all. The body is the argument, or stdin when it is "-".

'schedule get ID' shows a schedule with its next 5 fire times, in its time
zone and in UTC, and its latest firings with what became of them (the
message's state, or not sent when a fire time was skipped); 'schedule
firings ID' lists only those (--json for scripts). A firing is sent ahead of
its time (20 s by default), so the newest may show as "sent ahead". Pause
cancels the firings already sent ahead and skips fire times until resume.`,
		run: runSchedule,
	}
}

func runSchedule(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cf := a.addClientFlags(fs)
	var cfg client.ScheduleConfig
	props := propsFlag{}
	fs.StringVar(&cfg.Topic, "topic", "", "create: the topic the messages go to")
	fs.StringVar(&cfg.Cron, "cron", "", `create: cron expression, e.g. "0 9 * * *" or "@every 10m"`)
	fs.StringVar(&cfg.TZ, "tz", "", "create: IANA time zone, e.g. Europe/Berlin (default UTC)")
	fs.StringVar(&cfg.CatchUp, "catch-up", "", "create: skip, once (default) or all")
	fs.StringVar(&cfg.Key, "key", "", "create: key prefix of the firings (default the schedule ID)")
	fs.StringVar(&cfg.Tag, "tag", "", "create: tag of the messages")
	fs.Var(props, "prop", "create: property name=value of the messages (repeatable)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) == 0 {
		return a.usageError(c, "give a subcommand: create, get, firings, list, pause, resume or delete")
	}
	sub, pos := pos[0], pos[1:]
	cl := a.client(cf)
	if sub == "list" {
		return a.scheduleList(ctx, c, cl, cf, pos)
	}
	if sub == "firings" {
		return a.scheduleFirings(ctx, c, cl, cf, pos)
	}
	if sub == "create" {
		if code, ok := a.scheduleCreateConfig(c, &cfg, props, pos); !ok {
			return code
		}
	} else if len(pos) != 1 {
		return a.usageError(c, "schedule %s takes one schedule ID", sub)
	}
	var s client.Schedule
	var err error
	switch sub {
	case "create":
		s, err = cl.CreateSchedule(ctx, pos[0], cfg)
	case "get":
		s, err = cl.Schedule(ctx, pos[0])
	case "pause":
		s, err = cl.PauseSchedule(ctx, pos[0])
	case "resume":
		s, err = cl.ResumeSchedule(ctx, pos[0])
	case "delete":
		s, err = cl.DeleteSchedule(ctx, pos[0])
	default:
		return a.usageError(c, "unknown subcommand %q (want create, get, firings, list, pause, resume or delete)", sub)
	}
	if err != nil {
		return a.failed(c, err)
	}
	var firings *client.ScheduleFirings
	if sub == "get" {
		f, err := cl.ScheduleFirings(ctx, pos[0], 5)
		if err != nil {
			return a.failed(c, err)
		}
		firings = &f
	}
	if cf.json {
		a.printJSON(s)
		return ExitOK
	}
	a.printSchedule(s, firings)
	return ExitOK
}

// scheduleList runs 'schedule list': it takes no positional argument and
// prints every schedule as a table, or as {"schedules": [...]} with --json.
func (a *App) scheduleList(ctx context.Context, c *command, cl *client.Client, cf *clientFlags, pos []string) int {
	if len(pos) != 0 {
		return a.usageError(c, "schedule list takes no argument")
	}
	ss, err := cl.Schedules(ctx)
	if err != nil {
		return a.failed(c, err)
	}
	if cf.json {
		a.printJSON(map[string]any{"schedules": ss})
		return ExitOK
	}
	a.printSchedules(ss)
	return ExitOK
}

// scheduleCreateConfig checks the arguments of 'schedule create' (an ID and
// an optional body, --topic and --cron required) and completes cfg with the
// properties and the body, read from stdin when the body argument is "-".
// It returns ok=false with the exit code when the command must stop.
func (a *App) scheduleCreateConfig(c *command, cfg *client.ScheduleConfig, props propsFlag, pos []string) (int, bool) {
	if len(pos) < 1 || len(pos) > 2 {
		return a.usageError(c, "schedule create takes an ID and an optional body"), false
	}
	if cfg.Topic == "" || cfg.Cron == "" {
		return a.usageError(c, "schedule create needs --topic and --cron"), false
	}
	if len(props) > 0 {
		cfg.Properties = props
	}
	if len(pos) == 2 {
		cfg.Body = []byte(pos[1])
		if pos[1] == "-" {
			b, err := io.ReadAll(a.Stdin)
			if err != nil {
				return a.failed(c, err), false
			}
			cfg.Body = b
		}
	}
	return 0, true
}

func (a *App) printSchedule(s client.Schedule, fs *client.ScheduleFirings) {
	w := a.Stdout
	loc := scheduleZone(s.TZ)
	fmt.Fprintf(w, "schedule %s (%s)\n", s.ID, s.State)
	field(w, "cron", fmt.Sprintf("%s in %s, catch-up %s", s.Cron, s.TZ, s.CatchUp))
	field(w, "sends to", fmt.Sprintf("topic %s, key %s@<fire time>", s.Topic, s.Key))
	if len(s.Properties) > 0 {
		field(w, "properties", formatProps(s.Properties))
	}
	// The runner sends a firing ahead of its time (its lead, 20 s by
	// default): a last fire time still to come is a firing sent ahead.
	switch now := a.now(); {
	case s.LastFire == 0:
		field(w, "last fire", "none yet")
	case s.LastFire.Time().After(now):
		field(w, "sent ahead", a.whenIn(s.LastFire, loc)+", due then")
	default:
		field(w, "last fire", a.whenIn(s.LastFire, loc))
	}
	if s.LastMessageID != "" {
		field(w, "last message", s.LastMessageID)
	}
	if s.LastError != "" {
		field(w, "last error", s.LastError)
	}
	for i, t := range s.Next {
		name := "next"
		if i > 0 {
			name = "then"
		}
		field(w, name, a.whenIn(t, loc))
	}
	if fs != nil {
		a.printFirings(*fs)
	}
}

// printFirings lists firings, newest first, in the schedule's time zone.
func (a *App) printFirings(fs client.ScheduleFirings) {
	w := a.Stdout
	loc := scheduleZone(fs.TZ)
	fmt.Fprintln(w, "latest firings:")
	if len(fs.Firings) == 0 {
		fmt.Fprintln(w, "  none yet")
	}
	for _, f := range fs.Firings {
		what := "not sent (skipped: paused, or catch-up skip)"
		switch {
		case f.Sent && f.Ahead:
			what = fmt.Sprintf("%s, sent ahead: %s", f.State, f.MessageID)
		case f.Sent:
			what = fmt.Sprintf("%s: %s", f.State, f.MessageID)
		}
		fmt.Fprintf(w, "  %s  %s\n", f.Fire.Time().In(loc).Format("2006-01-02 15:04:05 MST"), what)
	}
}

// scheduleZone is a schedule's time zone; UTC when this machine's zone
// database lacks it.
func scheduleZone(tz string) *time.Location {
	if loc, err := time.LoadLocation(tz); err == nil {
		return loc
	}
	return time.UTC
}

func (a *App) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// whenIn renders an instant in loc with its UTC form and its distance
// from now: "2026-12-07 09:00:00.000 CET (08:00:00.000Z, in 13h)".
func (a *App) whenIn(m client.Millis, loc *time.Location) string {
	if loc == time.UTC {
		return a.when(m)
	}
	t := m.Time()
	local := t.In(loc).Format("2006-01-02 15:04:05.000 MST")
	d := t.Sub(a.now())
	switch {
	case d > 0:
		return fmt.Sprintf("%s (%s, in %s)", local, m, roundDuration(d))
	case d < 0:
		return fmt.Sprintf("%s (%s, %s ago)", local, m, roundDuration(-d))
	}
	return fmt.Sprintf("%s (%s, now)", local, m)
}

func (a *App) printSchedules(ss []client.Schedule) {
	if len(ss) == 0 {
		fmt.Fprintln(a.Stdout, "no schedules")
		return
	}
	tw := tabwriter.NewWriter(a.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULE\tSTATE\tTOPIC\tCRON\tTZ\tNEXT")
	for _, s := range ss {
		next := "-"
		if len(s.Next) > 0 {
			next = s.Next[0].String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.State, s.Topic, strings.ReplaceAll(s.Cron, "\t", " "), s.TZ, next)
	}
	tw.Flush()
}

// scheduleFirings runs 'schedule firings ID': the latest firings and what
// became of them, as text or --json.
func (a *App) scheduleFirings(ctx context.Context, c *command, cl *client.Client, cf *clientFlags, pos []string) int {
	if len(pos) != 1 {
		return a.usageError(c, "schedule firings takes one schedule ID")
	}
	fs, err := cl.ScheduleFirings(ctx, pos[0], 10)
	if err != nil {
		return a.failed(c, err)
	}
	if cf.json {
		a.printJSON(fs)
		return ExitOK
	}
	a.printFirings(fs)
	return ExitOK
}
