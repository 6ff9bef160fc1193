package cli

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/hourglass-mq/hourglass/client"
)

func inspectCommand() *command {
	return &command{
		name:     "inspect",
		synopsis: "ID | --topic T --key K",
		summary:  "show where a message is and when it fires",
		help: `Shows a message's state (pending, due, visible, cancelled), its due time
and when it was sent, by ID or, with --topic and --key, the latest message
sent to the topic with that business key.`,
		run: runInspect,
	}
}

// target is a message named by ID or by topic and key.
type target struct {
	topic, key string
}

func addTargetFlags(fs *flag.FlagSet, t *target) {
	fs.StringVar(&t.topic, "topic", "", "with --key: the topic of the message")
	fs.StringVar(&t.key, "key", "", "find the latest message sent to --topic with this key instead of giving its ID")
}

// resolve returns the message ID named by the positional arguments or by
// t's key. When it looked the key up it also returns the message's info.
// A non-empty usage is a command-line mistake; err is the server's error.
func (t *target) resolve(ctx context.Context, cl *client.Client, pos []string) (id string, info *client.Info, usage string, err error) {
	switch {
	case t.key != "" || t.topic != "":
		if t.key == "" || t.topic == "" {
			return "", nil, "--topic and --key go together", nil
		}
		if len(pos) > 0 {
			return "", nil, "give a message ID or --topic and --key, not both", nil
		}
		in, err := cl.InspectKey(ctx, t.topic, t.key)
		if err != nil {
			return "", nil, "", err
		}
		return in.ID, &in, "", nil
	case len(pos) == 1:
		return pos[0], nil, "", nil
	case len(pos) == 0:
		return "", nil, "give a message ID, or --topic and --key", nil
	}
	return "", nil, fmt.Sprintf("give one message ID, not %d arguments", len(pos)), nil
}

// lookupTarget resolves the message t and pos name, as resolve does, and
// reports a command-line mistake or the server's error itself; when ok is
// false the command returns code.
func (a *App) lookupTarget(ctx context.Context, c *command, cl *client.Client, t *target, pos []string) (id string, info *client.Info, code int, ok bool) {
	id, info, usage, err := t.resolve(ctx, cl, pos)
	switch {
	case usage != "":
		return "", nil, a.usageError(c, "%s", usage), false
	case err != nil:
		return "", nil, a.failed(c, err), false
	}
	return id, info, 0, true
}

func runInspect(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cf := a.addClientFlags(fs)
	var t target
	addTargetFlags(fs, &t)
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	cl := a.client(cf)
	id, info, code, ok := a.lookupTarget(ctx, c, cl, &t, pos)
	switch {
	case !ok:
		return code
	case info == nil:
		in, err := cl.Inspect(ctx, id)
		if err != nil {
			return a.failed(c, err)
		}
		info = &in
	}
	if cf.json {
		a.printJSON(info)
		return ExitOK
	}
	a.printInfo(*info)
	return ExitOK
}

func (a *App) printInfo(in client.Info) {
	w := a.Stdout
	field(w, "id", in.ID)
	field(w, "state", string(in.State))
	field(w, "topic", fmt.Sprintf("%s (queue %d)", in.Topic, in.Queue))
	if in.Key != "" {
		field(w, "key", in.Key)
	}
	if in.Tag != "" {
		field(w, "tag", in.Tag)
	}
	field(w, "due", a.when(in.Due))
	field(w, "sent", a.when(in.Sent))
	if in.Visible != 0 {
		field(w, "visible", fmt.Sprintf("%s (%s late)", in.Visible, roundDuration(in.Visible.Time().Sub(in.Due.Time()))))
	}
	if in.Deadline != 0 {
		d := a.when(in.Deadline)
		if a.Now != nil && !a.Now().Before(in.Deadline.Time()) {
			// The state above is the topic's; each group that had not
			// received the message by then dead-letters it (reason
			// expired) instead of handing it out.
			d += " (passed: groups that had not received it dead-letter it, reason expired)"
		}
		field(w, "deadline", d)
	}
	if in.Window != 0 {
		field(w, "window", (time.Duration(in.Window) * time.Millisecond).String())
	}
	if in.DedupID != "" {
		field(w, "dedup id", in.DedupID)
	}
	field(w, "body", fmt.Sprintf("%d bytes", in.BodyBytes))
	if len(in.Properties) > 0 {
		field(w, "properties", formatProps(in.Properties))
	}
	// The state is the topic's; what each group did with the message
	// (delivered, acked, dead-lettered and why) is in its trail.
	field(w, "groups", "hourglass trace "+in.ID+" shows each group's deliveries, acks and dead-lettering")
}
