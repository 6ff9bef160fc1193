// Command rmqbench measures a RocketMQ 5 gRPC endpoint for delayed messages
// with the official Go client (github.com/apache/rocketmq-clients/golang/v5),
// unchanged: the same program runs against hourglass's gRPC service and
// against Apache RocketMQ's proxy, so the two are compared on one footing.
// scripts/bench-rocketmq.sh (make bench-rocketmq) runs both in the same run
// and docs/benchmarks.md records the figures.
//
// One run against one endpoint has two phases, each on its own topic with a
// fresh consumer group that is receiving before the first send:
//
//	spread  -warmup messages due at once, not measured, then -n messages of
//	        -size bytes whose delivery timestamps are spread evenly over
//	        -spread, the first one -lead after the sends start, or later:
//	        1.5 times the time the sends take at the warm-up's rate;
//	        lateness = arrival at a receiver - delivery timestamp:
//	        p50/p99/max, early (arrived before its timestamp), lost (not
//	        arrived -grace after the last timestamp)
//	herd    -n messages all due at one instant, a whole second far enough
//	        ahead for every send to finish first (twice the time the spread's
//	        sends took, at least -lead); last arrival after the instant
//
// Both phases report the send rate: messages acknowledged per second by
// -senders goroutines sharing -producers producer clients, from the first
// send to the last acknowledgement. Receivers are -receivers goroutines
// long-polling (-await) one SimpleConsumer for up to -batch messages each;
// acks go to separate goroutines so that they never hold up a receive. The
// arrival time is taken when Receive returns.
//
// The body carries the message's index and delivery timestamp (Unix ms, the
// precision both brokers keep), so the receiver needs no shared state with
// the senders and messages of another run are recognised and ignored:
//
//	offset  size  field
//	0       8     magic "rmqbench"
//	8       1     phase: 's' spread, 'h' herd
//	9       8     run nonce, big endian
//	17      4     index, big endian
//	21      8     delivery timestamp, Unix ms, big endian
//	29      -     padding up to -size bytes
//
// Usage:
//
//	go run ./internal/rmqbench -endpoint 127.0.0.1:8081 -system rocketmq \
//	    -spread-topic T1 -herd-topic T2 -json out.json
//	go run ./internal/rmqbench -summarize out-dir   # Markdown table of all runs
//
// With -metrics (hourglass only), each phase also reports the broker's own
// lateness (visible minus due) from hourglass's /metrics histogram, to tell
// the broker's part of the lateness from the delivery's and the client's.
//
// The machine's load average (1 min) is sampled every 2 s during each phase
// and reported with it, since benchmarks here share the machine.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
)

// config holds the flags of one run.
type config struct {
	endpoint    string
	system      string // label in the report: hourglass, rocketmq
	flush       string // label: how the broker flushes (sync, async)
	tls         bool
	spreadTopic string
	herdTopic   string
	group       string // consumer group prefix; the phase's topic is appended
	n           int
	size        int
	spread      time.Duration
	lead        time.Duration
	warmup      int
	grace       time.Duration
	producers   int
	senders     int
	receivers   int
	ackers      int
	batch       int
	await       time.Duration
	invisible   time.Duration
	jsonOut     string
	metrics     string // hourglass's /metrics URL, for the broker-side lateness
	cpuprofile  string // the herd's drain profiled to this file
	run         int
}

// defaults are the benchmark of issue 9: 20,000 messages of 256 B.
func defaults() config {
	return config{
		system: "unnamed", flush: "unknown", tls: true,
		group: "rmqbench", n: 20000, size: 256,
		spread: 20 * time.Second, lead: 10 * time.Second, warmup: 2000, grace: 30 * time.Second,
		producers: 4, senders: 32, receivers: 8, ackers: 8, batch: 32,
		await: 5 * time.Second, invisible: 30 * time.Second,
	}
}

// parseArgs reads the flags; summarize is the folder of -summarize, if given.
func parseArgs(args []string, stderr io.Writer) (cfg config, summarize string, err error) {
	cfg = defaults()
	fs := flag.NewFlagSet("rmqbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.endpoint, "endpoint", "", "RocketMQ 5 gRPC endpoint, host:port (required)")
	fs.StringVar(&cfg.system, "system", cfg.system, "name of the system measured, for the report")
	fs.StringVar(&cfg.flush, "flush", cfg.flush, "how the broker flushes, for the report (sync, async)")
	fs.BoolVar(&cfg.tls, "tls", cfg.tls, "connect with TLS, the client's default (no certificate check)")
	fs.StringVar(&cfg.spreadTopic, "spread-topic", "", "topic of the spread phase (DELAY type); empty skips the phase")
	fs.StringVar(&cfg.herdTopic, "herd-topic", "", "topic of the herd phase (DELAY type); empty skips the phase")
	fs.StringVar(&cfg.group, "group", cfg.group, "consumer group prefix (the topic is appended)")
	fs.IntVar(&cfg.n, "n", cfg.n, "messages per phase")
	fs.IntVar(&cfg.size, "size", cfg.size, "body bytes (at least 29)")
	fs.DurationVar(&cfg.spread, "spread", cfg.spread, "spread phase: delivery timestamps spread over this")
	fs.DurationVar(&cfg.lead, "lead", cfg.lead, "first delivery timestamp after the sends start (herd: at least this)")
	fs.IntVar(&cfg.warmup, "warmup", cfg.warmup, "spread: messages sent first, not measured, to warm up and learn the send rate (the lead is 1.5 times the spread's send time at that rate)")
	fs.DurationVar(&cfg.grace, "grace", cfg.grace, "wait this long after the last delivery timestamp before counting the rest lost")
	fs.IntVar(&cfg.producers, "producers", cfg.producers, "producer clients")
	fs.IntVar(&cfg.senders, "senders", cfg.senders, "goroutines sending, shared among the producers")
	fs.IntVar(&cfg.receivers, "receivers", cfg.receivers, "goroutines receiving from the SimpleConsumer")
	fs.IntVar(&cfg.ackers, "ackers", cfg.ackers, "goroutines acking")
	fs.IntVar(&cfg.batch, "batch", cfg.batch, "most messages per Receive")
	fs.DurationVar(&cfg.await, "await", cfg.await, "long-polling time of a Receive")
	fs.DurationVar(&cfg.invisible, "invisible", cfg.invisible, "invisible duration of a Receive")
	fs.StringVar(&cfg.jsonOut, "json", "", "also write the report as JSON to this file")
	fs.StringVar(&cfg.metrics, "metrics", "", "hourglass only: its /metrics URL, to report the broker-side lateness of each phase")
	fs.IntVar(&cfg.run, "run", 0, "run number, for the report")
	fs.StringVar(&cfg.cpuprofile, "cpuprofile", "", "herd: CPU profile of this process (the client) from the instant until the last arrival, to this file")
	fs.StringVar(&summarize, "summarize", "", "print a Markdown table of the JSON reports in this folder and exit")
	if err = fs.Parse(args); err != nil {
		return cfg, "", err
	}
	if fs.NArg() > 0 {
		return cfg, "", fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if summarize != "" {
		return cfg, summarize, nil
	}
	return cfg, "", cfg.validate()
}

// validate refuses settings the run cannot honour.
func (c config) validate() error {
	switch {
	case c.endpoint == "":
		return errors.New("-endpoint is required")
	case c.spreadTopic == "" && c.herdTopic == "":
		return errors.New("give -spread-topic, -herd-topic or both")
	case c.n < 1 || c.warmup < 0:
		return errors.New("-n must be at least 1 and -warmup not negative")
	case c.size < headerSize:
		return fmt.Errorf("-size must be at least %d (the header)", headerSize)
	case c.spread <= 0 || c.lead <= 0 || c.grace <= 0 || c.await <= 0 || c.invisible <= 0:
		return errors.New("-spread, -lead, -grace, -await and -invisible must be positive")
	case c.producers < 1 || c.senders < 1 || c.receivers < 1 || c.ackers < 1 || c.batch < 1:
		return errors.New("-producers, -senders, -receivers, -ackers and -batch must be at least 1")
	}
	return nil
}

// report is the JSON document of one run against one endpoint.
type report struct {
	System    string       `json:"system"`
	Flush     string       `json:"flush"`
	Endpoint  string       `json:"endpoint"`
	TLS       bool         `json:"tls"`
	Run       int          `json:"run"`
	N         int          `json:"n"`
	Size      int          `json:"size"`
	SpreadSec float64      `json:"spread_s"`
	Producers int          `json:"producers"`
	Senders   int          `json:"senders"`
	Receivers int          `json:"receivers"`
	Started   time.Time    `json:"started"`
	Spread    *phaseResult `json:"spread,omitempty"`
	Herd      *phaseResult `json:"herd,omitempty"`
	// PacedRate and Paced are the remoting Java bench's third phase
	// (compat/java-remoting/src/bench/java/Bench.java): the spread's
	// levels with the sends paced at PacedRate a second.
	PacedRate int          `json:"paced_rate,omitempty"`
	Paced     *phaseResult `json:"paced,omitempty"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(realMain(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// realMain runs the command and returns its exit code: 0 done, 1 failed,
// 2 bad command line.
func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, summarizeDir, err := parseArgs(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "rmqbench:", err)
		}
		return 2
	}
	if summarizeDir != "" {
		if err := summarizeFolder(summarizeDir, stdout); err != nil {
			fmt.Fprintln(stderr, "rmqbench:", err)
			return 1
		}
		return 0
	}
	quietClient(cfg.tls)
	rep, err := run(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "rmqbench:", err)
		return 1
	}
	printReport(stdout, rep)
	if cfg.jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(cfg.jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(stderr, "rmqbench:", err)
			return 1
		}
	}
	return 0
}

// quietClient keeps the official client's log out of the report: at warn
// level, in the folder of the environment variable rocketmq.client.logRoot
// when set, else in rmqbench-client-log under the temp dir (its default is
// the home directory; its console option writes to stdout, and it logs
// every Receive cut short at the end of a phase as an error). It also sets
// the client's TLS, a package-level switch of that client.
func quietClient(tls bool) {
	if os.Getenv("rocketmq.client.logRoot") == "" {
		os.Setenv("rocketmq.client.logRoot", filepath.Join(os.TempDir(), "rmqbench-client-log"))
	}
	os.Setenv("mq.consoleAppender.enabled", "false")
	os.Setenv("rocketmq.client.logLevel", "warn")
	rmq.ResetLogger()
	rmq.EnableSsl = tls
}

// run runs the phases the configuration names, spread first: the herd's
// lead is derived from the spread's send time.
func run(ctx context.Context, cfg config, progress io.Writer) (report, error) {
	rep := report{
		System: cfg.system, Flush: cfg.flush, Endpoint: cfg.endpoint, TLS: cfg.tls, Run: cfg.run,
		N: cfg.n, Size: cfg.size, SpreadSec: cfg.spread.Seconds(),
		Producers: cfg.producers, Senders: cfg.senders, Receivers: cfg.receivers,
		Started: time.Now().UTC(),
	}
	herdLead := cfg.lead
	if cfg.spreadTopic != "" {
		res, err := runPhase(ctx, cfg, phaseSpread, progress, 0)
		if err != nil {
			return rep, fmt.Errorf("spread: %w", err)
		}
		rep.Spread = &res
		herdLead = max(herdLead, 2*time.Duration(res.SendSeconds*float64(time.Second)))
	}
	if cfg.herdTopic != "" {
		res, err := runPhase(ctx, cfg, phaseHerd, progress, herdLead)
		if err != nil {
			return rep, fmt.Errorf("herd: %w", err)
		}
		rep.Herd = &res
	}
	return rep, nil
}
