package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/hourglass-mq/hourglass/benchreport"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "serve":
			os.Exit(serveMain(os.Args[2:]))
		case "summarize":
			os.Exit(summarizeMain(os.Args[2:], os.Stdout))
		}
	}
	os.Exit(benchMain(os.Args[1:]))
}

// config is the bench's command line. The flags that shape the load have
// the names and defaults of `hourglass bench`.
type config struct {
	server        string
	storeDir      string
	sync          string
	n             int
	herdIn        time.Duration
	producers     int
	batch         int
	bodyBytes     int
	consumers     int
	max           int
	maxAckPending int
	invisible     time.Duration
	wait          time.Duration
	deadline      time.Duration
	jsonPath      string
}

const usageText = `usage: natsherd [flags]
       natsherd serve --store-dir DIR [--sync default|always|DURATION]
       natsherd summarize DIR

The herd of 'hourglass bench --herd N@T' against NATS JetStream message
scheduling: N messages, each a schedule "@at T" (T a duration after sending
starts, rounded down to the millisecond as hourglass bench does) on a
subject of its own, all with one target subject; --consumers clients share
one durable pull consumer with explicit acks and fetch up to --max messages
with a long poll of --wait. It reports, as hourglass bench does, the first
and last arrival after the instant and the lost, early and duplicated
messages.

Without --server it starts 'natsherd serve' (an embedded nats-server with
JetStream on file storage) as a child process on --store-dir, with the fsync
policy --sync. 'summarize DIR' reads the JSON reports of this program and
of 'hourglass bench --json' in DIR (NAME-RUN.json, with the load average in
NAME-RUN.load) and prints median (range) per NAME as a Markdown table.

flags:
`

// parseArgs parses the bench's flags; ok is false when it must exit with
// code.
func parseArgs(args []string, stderr io.Writer) (cfg config, code int, ok bool) {
	fs := flag.NewFlagSet("natsherd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usageText); fs.PrintDefaults() }
	herd := fs.String("herd", "20000@10s", "`N@T`: N messages all due T after sending starts")
	fs.StringVar(&cfg.server, "server", "", "NATS `URL` of a running server (default: start natsherd serve)")
	fs.StringVar(&cfg.storeDir, "store-dir", "", "JetStream `directory` of the started server (default: a temporary one, removed after)")
	fs.StringVar(&cfg.sync, "sync", "default", "fsync policy of the started server: default (every 2m), always, or a `duration`")
	fs.IntVar(&cfg.producers, "producers", 4, "concurrent producers")
	fs.IntVar(&cfg.batch, "batch", 100, "asynchronous publishes a producer waits for together")
	fs.IntVar(&cfg.bodyBytes, "body-bytes", 256, "message body size in `bytes`")
	fs.IntVar(&cfg.consumers, "consumers", 4, "concurrent consumers (one connection each)")
	fs.IntVar(&cfg.max, "max", 256, "most messages per fetch")
	fs.IntVar(&cfg.maxAckPending, "max-ack-pending", 0, "the consumer's MaxAckPending (0: consumers x max, the most `hourglass bench` can hold leased)")
	fs.DurationVar(&cfg.invisible, "invisible", 30*time.Second, "the consumer's AckWait (the lease)")
	fs.DurationVar(&cfg.wait, "wait", time.Second, "long-poll wait of a fetch")
	fs.DurationVar(&cfg.deadline, "deadline", 30*time.Second, "wait this long after the instant before counting messages lost")
	fs.StringVar(&cfg.jsonPath, "json", "", "write the report as JSON to `file`")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return cfg, 0, false
		}
		return cfg, 2, false
	}
	err := func() error {
		if fs.NArg() > 0 {
			return fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
		var err error
		if cfg.n, cfg.herdIn, err = parseHerd(*herd); err != nil {
			return fmt.Errorf("--herd: %v", err)
		}
		switch {
		case cfg.producers < 1 || cfg.consumers < 1:
			return fmt.Errorf("--producers and --consumers must be at least 1")
		case cfg.batch < 1 || cfg.max < 1:
			return fmt.Errorf("--batch and --max must be at least 1")
		case cfg.bodyBytes < 0 || cfg.maxAckPending < 0:
			return fmt.Errorf("--body-bytes and --max-ack-pending must not be negative")
		case cfg.wait < 10*time.Millisecond || cfg.invisible < time.Second:
			return fmt.Errorf("--wait must be at least 10ms and --invisible at least 1s")
		}
		if cfg.maxAckPending == 0 {
			cfg.maxAckPending = cfg.consumers * cfg.max
		}
		return nil
	}()
	if err != nil {
		fmt.Fprintf(stderr, "natsherd: %v\n", err)
		return cfg, 2, false
	}
	return cfg, 0, true
}

// parseHerd parses "N@T" with T a duration.
func parseHerd(s string) (int, time.Duration, error) {
	a, b, ok := strings.Cut(s, "@")
	if !ok {
		return 0, 0, fmt.Errorf("%q is not N@T, e.g. 20000@10s", s)
	}
	n, err := strconv.Atoi(strings.TrimSpace(a))
	if err != nil || n < 1 {
		return 0, 0, fmt.Errorf("N in %q must be a positive integer", s)
	}
	d, err := time.ParseDuration(strings.TrimSpace(b))
	if err != nil || d < 0 {
		return 0, 0, fmt.Errorf("T in %q must be a duration that is not negative", s)
	}
	return n, d, nil
}

// Report is the outcome of a run. The fields that `hourglass bench
// --json` also has carry its names and meaning, so that summarize reads
// both.
type Report struct {
	Version int    `json:"version"`
	System  string `json:"system"`
	// Server names the server and its fsync policy.
	Server   string   `json:"server"`
	Mode     string   `json:"mode"`
	Settings Settings `json:"settings"`
	benchreport.Run
	Sends    SendStats   `json:"sends"`
	Receives RecvStats   `json:"receives"`
	Total    Row         `json:"total"`
	Herd     *HerdReport `json:"herd"`
	Passed   bool        `json:"passed"`
	Failures []string    `json:"failures"`
}

// Settings echoes the load.
type Settings struct {
	Messages      int    `json:"messages"`
	Producers     int    `json:"producers"`
	Batch         int    `json:"batch"`
	BodyBytes     int    `json:"body_bytes"`
	Consumers     int    `json:"consumers"`
	Max           int    `json:"max"`
	MaxAckPending int    `json:"max_ack_pending"`
	Invisible     string `json:"invisible"`
	Wait          string `json:"wait"`
	Deadline      string `json:"deadline"`
}

// SendStats describes the producers: Requests counts batches, Failed the
// publishes that failed and were published again under the same ID.
type SendStats struct {
	Requests int `json:"requests"`
	Failed   int `json:"failed_publishes"`
	Acked    int `json:"acked"`
}

// RecvStats describes the consumers: fetches made, failed fetches, failed
// acks, and deliveries JetStream marked as redeliveries.
type RecvStats struct {
	Requests    int `json:"requests"`
	Errors      int `json:"errors"`
	AckFailures int `json:"ack_failures"`
	Redelivered int `json:"redelivered"`
	Foreign     int `json:"foreign"`
}

func benchMain(args []string) int {
	cfg, code, ok := parseArgs(args, os.Stderr)
	if !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	policy := "external server " + cfg.server
	url := cfg.server
	if url == "" {
		var err error
		if policy, err = syncPolicy(&server.Options{}, cfg.sync); err != nil {
			fmt.Fprintln(os.Stderr, "natsherd:", err)
			return 2
		}
		dir := cfg.storeDir
		if dir == "" {
			if dir, err = os.MkdirTemp("", "natsherd-"); err != nil {
				fmt.Fprintln(os.Stderr, "natsherd:", err)
				return 1
			}
			defer os.RemoveAll(dir)
		}
		srv, u, err := startServer(dir, cfg.sync)
		if err != nil {
			fmt.Fprintln(os.Stderr, "natsherd:", err)
			return 1
		}
		defer srv.stop()
		url = u
	}

	b := newBench(cfg, url)
	ended, err := b.run(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsherd:", err)
		return 1
	}
	rep := b.report(ended, "nats-server "+server.VERSION+" embedded, JetStream file storage, "+policy)
	rep.writeTable(os.Stdout)
	if cfg.jsonPath != "" {
		out, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(cfg.jsonPath, append(out, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "natsherd:", err)
			return 1
		}
	}
	if !rep.Passed {
		return 1
	}
	return 0
}

// report builds the report of a finished run.
func (b *bench) report(ended, server string) *Report {
	c := b.cfg
	finished := time.Now()
	row, herd := measure(b.rec.frozen(), b.atMs*int64(time.Millisecond))
	rep := &Report{
		Version: 1, System: "nats", Server: server, Mode: "herd",
		Settings: Settings{
			Messages: c.n, Producers: c.producers, Batch: c.batch, BodyBytes: c.bodyBytes, Consumers: c.consumers,
			Max: c.max, MaxAckPending: c.maxAckPending, Invisible: c.invisible.String(), Wait: c.wait.String(),
			Deadline: c.deadline.String(),
		},
		Run:   benchreport.NewRun(b.start, finished, ended),
		Sends: SendStats{Requests: int(b.pubRequests.Load()), Failed: int(b.pubFailed.Load()), Acked: row.Sent},
		Receives: RecvStats{
			Requests: int(b.recvRequests.Load()), Errors: int(b.recvErrors.Load()), AckFailures: int(b.ackFails.Load()),
			Redelivered: b.rec.redelivered, Foreign: b.rec.foreign,
		},
		Total: row, Herd: &herd,
	}
	rep.Failures = verdict(row, c.n, ended, c.deadline.String())
	rep.Passed = len(rep.Failures) == 0
	return rep
}

// verdict lists why a run failed, by the rules of `hourglass bench`
// (benchreport.Verdict).
func verdict(total Row, n int, ended, deadline string) []string {
	return benchreport.Verdict(total, n, ended, deadline)
}

// writeTable prints the report for a person.
func (r *Report) writeTable(w io.Writer) {
	s, t, l := r.Settings, r.Total, r.Total.Lateness
	fmt.Fprintf(w, "natsherd: %d messages, herd; %s\n", s.Messages, r.Server)
	fmt.Fprintf(w, "  %d producers, batch %d, %d B bodies; %d consumers, max %d, max ack pending %d, ack wait %s; ended: %s after %.1f s\n",
		s.Producers, s.Batch, s.BodyBytes, s.Consumers, s.Max, s.MaxAckPending, s.Invisible, r.Ended, r.DurationS)
	fmt.Fprintf(w, "sent %d, received %d, lost %d, early %d, dup %d; lateness p50 %.3f p99 %.3f max %.3f ms; send %.0f/s, recv %.0f/s\n",
		t.Sent, t.Received, t.Lost, t.Early, t.Duplicated, l.P50, l.P99, l.Max, t.SendRate, t.ReceiveRate)
	bl := t.BrokerLateness
	fmt.Fprintf(w, "broker-side (stored on the target subject - due) p50 %.3f p99 %.3f max %.3f ms\n", bl.P50, bl.P99, bl.Max)
	fmt.Fprintf(w, "sends: %d batches, %d failed publishes (published again under the same ID)\n", r.Sends.Requests, r.Sends.Failed)
	fmt.Fprintf(w, "receives: %d fetches, %d errors, %d ack failures, %d redeliveries, %d foreign\n",
		r.Receives.Requests, r.Receives.Errors, r.Receives.AckFailures, r.Receives.Redelivered, r.Receives.Foreign)
	if h := r.Herd; h != nil {
		all := "all arrived"
		if !h.AllArrived {
			all = "NOT all arrived; last arrival"
		}
		fmt.Fprintf(w, "herd: %d messages due at %s (%d sent after it): first arrival %.1f ms after, %s %.1f ms after, drained at %.0f msg/s\n",
			h.Messages, h.At.Format(time.RFC3339Nano), h.SentAfterAt, h.FirstAfterMs, all, h.LastAfterMs, h.DrainRate)
	}
	if r.Passed {
		fmt.Fprintln(w, "PASS: no acknowledged message lost, none early")
	} else {
		fmt.Fprintln(w, "FAIL: "+strings.Join(r.Failures, "; "))
	}
}
