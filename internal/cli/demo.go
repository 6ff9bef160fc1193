package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

func demoCommand() *command {
	return &command{
		name:    "demo",
		summary: "a self-contained walkthrough (no server needed)",
		help: `Runs a short walkthrough with a broker engine started inside this process on a
temporary directory: sends a message delayed by --delay with a business key,
sends a second one and cancels it, shows the first one pending, waits for it
with a long-poll receive, prints how late it became visible, acks it and
shows its final state. Nothing else is needed: no server, no network.`,
		run: runDemo,
	}
}

// maxDemoDelay keeps the demo within one long poll of the engine (30s).
const maxDemoDelay = 25 * time.Second

func runDemo(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	delay := fs.Duration("delay", 2*time.Second, "how long the demo message is delayed (at most 25s)")
	dir := fs.String("dir", "", "data directory to use and keep (default: a temporary directory, removed at the end)")
	verbose := fs.Bool("verbose", false, "show the engine's logs on standard error")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	switch {
	case len(pos) > 0:
		return a.usageError(c, "unexpected argument %q", pos[0])
	case *delay <= 0 || *delay > maxDemoDelay:
		return a.usageError(c, "--delay %v is not in (0, %v]", *delay, maxDemoDelay)
	}
	data := *dir
	if data == "" {
		tmp, err := os.MkdirTemp("", "hourglass-demo-")
		if err != nil {
			return a.failed(c, err)
		}
		defer os.RemoveAll(tmp)
		data = tmp
	}
	logOut := io.Discard
	if *verbose {
		logOut = a.Stderr
	}
	opts := engine.NewOptions(data)
	opts.Logger = slog.New(slog.NewTextHandler(logOut, nil))
	if err := a.demo(ctx, opts, *delay); err != nil {
		return a.failed(c, err)
	}
	return ExitOK
}

// demo is the walkthrough; every step prints what it did and what the
// engine answered.
func (a *App) demo(ctx context.Context, opts engine.Options, delay time.Duration) error {
	w := a.Stdout
	start := time.Now()
	step := func(format string, args ...any) {
		fmt.Fprintf(w, "[%6.3fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	eng, err := engine.Open(opts)
	if err != nil {
		return err
	}
	defer eng.Close()
	step("opened an engine in %s (sync flush: a send returns after fdatasync)", opts.Dir)

	const topic = "orders"
	r, err := eng.Send(ctx, message.Message{Topic: topic, Key: "order-123", Body: []byte("close unpaid order 123")}, message.When{Delay: delay})
	if err != nil {
		return err
	}
	step("sent %q with key order-123, delay %v: id %s, due %s", "close unpaid order 123", delay, r.ID, clockTime(r.Due))

	// order-456 is due a minute later than order-123, so that its cancel
	// comes before its due time even on a machine slow enough to take the
	// whole short delay between the send and the cancel (a cancel after
	// the due time is refused: the message was already delivered).
	r2, err := eng.Send(ctx, message.Message{Topic: topic, Key: "order-456", Body: []byte("close unpaid order 456")}, message.When{Delay: delay + time.Minute})
	if err != nil {
		return err
	}
	if err := eng.Cancel(ctx, r2.ID); err != nil {
		return err
	}
	step("sent order-456, delay %v, then it got paid: cancelled %s, it will never be delivered", delay+time.Minute, r2.ID)

	info, err := eng.InspectKey(topic, "order-123")
	if err != nil {
		return err
	}
	step("inspect by key order-123: state %s, fires in %v", info.State, time.Duration(info.Due-eng.Now())*time.Millisecond)

	step("receiving for consumer group billing (long poll)...")
	var got []engine.Received
	for len(got) == 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		got, err = eng.Receive(ctx, engine.ReceiveRequest{Topic: topic, Group: "billing", Max: 10, Wait: delay + 5*time.Second})
		if err != nil {
			return err
		}
	}
	now := time.Now().UnixMilli()
	for _, m := range got {
		step("received %q (key %s, attempt %d): due %s, visible %dms late, in the consumer's hands %dms after its due time",
			m.Message.Body, m.Message.Key, m.Attempt, clockTime(m.Due), m.Visible.Visible-m.Due, now-m.Due)
		if err := eng.Ack(ctx, topic, "billing", m.Receipt); err != nil {
			return err
		}
	}
	step("acked %d message(s); order-456 never arrived (cancelled)", len(got))

	info, err = eng.Inspect(r.ID)
	if err != nil {
		return err
	}
	step("inspect %s: state %s", r.ID, info.State)
	st := eng.Stats()
	step("engine stats: sent %d, fired %d, cancelled %d, pending %d",
		st.Sent.Load(), st.Fired.Load(), st.Cancelled.Load(), st.Pending.Load())
	fmt.Fprintln(w, "\nNext: run 'hourglass serve' and try 'hourglass send --help' and 'hourglass receive --help'.")
	return nil
}

// clockTime renders Unix ms as a UTC time of day with milliseconds.
func clockTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("15:04:05.000Z")
}
