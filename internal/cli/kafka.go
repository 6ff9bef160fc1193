package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hourglass-mq/hourglass/kafkamode"
	"github.com/hourglass-mq/hourglass/metrics"
)

func kafkaCommand() *command {
	return &command{
		name:    "kafka",
		summary: "run a Kafka mode worker (delayed delivery on your Kafka)",
		help: `Runs one Kafka mode worker until SIGINT or SIGTERM. Workers started with the
same --group share the delay topic's partitions (cooperative rebalancing).

Produce a delayed message as a record to the delay topic with the headers
_deliverAt (Unix ms) or _delayMs (ms after the record's timestamp), and
_bizTopic. At its due time the worker produces the record's key, value and
headers (without those three) to _bizTopic, adding hourglass-due-ms and
hourglass-source, in a Kafka transaction with its progress: consumers that
read with isolation.level=read_committed see each message once, never early.
A record with missing or bad headers goes to the dead-letter topic with a
hourglass-dlq-reason header. Missing topics are created (the state topic
compacted, with the delay topic's partition count).

Give a restarted worker its old --worker-id: it then fences the crashed
one's open transaction at once instead of after --txn-timeout. With
--static-membership it also gets its partitions back without a rebalance.
A worker that dies for good is fenced by the others when its session
expires (--session-timeout), at the rebalance that moves its partitions.
Two live workers must not share a --worker-id: they fence each other, and
the one fenced while the other is in the group exits, saying so.` + kafkaAPIHelp,
		run: runKafka,
	}
}

func runKafka(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cfg := kafkamode.DefaultConfig()
	brokers := fs.String("brokers", a.env("HOURGLASS_KAFKA_BROKERS", ""), "Kafka seed brokers, host:port,... (or $HOURGLASS_KAFKA_BROKERS); required")
	fs.StringVar(&cfg.DelayTopic, "delay-topic", cfg.DelayTopic, "topic producers write delayed records to")
	fs.StringVar(&cfg.DLQTopic, "dlq-topic", "", "dead-letter topic (default <delay-topic>.dlq)")
	fs.StringVar(&cfg.StateTopic, "state-topic", "", "compacted state topic of progress (snapshots, resolution records) (default <delay-topic>.state)")
	fs.StringVar(&cfg.Group, "group", cfg.Group, "consumer group the workers share")
	fs.StringVar(&cfg.WorkerID, "worker-id", cfg.WorkerID, "this worker's ID, unique among live workers; reuse it on restart")
	partitions := fs.Int("partitions", int(cfg.Partitions), "partitions of topics the worker creates")
	replication := fs.Int("replication", int(cfg.Replication), "replication factor of topics the worker creates (-1: broker default)")
	fs.DurationVar(&cfg.BodyLead, "body-lead", 0, "fetch a dropped body this long before its due time (default 3s)")
	fs.IntVar(&cfg.MaxBatch, "max-batch", 0, "most records forwarded in one transaction (default 5000)")
	fs.DurationVar(&cfg.SessionTimeout, "session-timeout", 0, "group session timeout: how long a crashed (or, with --static-membership, stopped) worker holds its partitions; the broker allows 6s to 30m by default (default 10s)")
	fs.StringVar(&cfg.Delivery, "delivery", kafkamode.DeliveryExactlyOnce, "exactly-once: forward in the transaction that commits progress; at-least-once: forward with the idempotent producer first (a consumer sees it one transaction sooner), commit after; a crash, a rebalance or a Kafka restart can then deliver a message twice, the second time with header hourglass-redelivery: 1 (a SIGTERM cannot)")
	fs.BoolVar(&cfg.StaticMember, "static-membership", false, "join as a static group member named --worker-id: a worker restarted with the same ID within --session-timeout resumes its partitions without a rebalance; a worker stopped for good then holds them for --session-timeout")
	fs.DurationVar(&cfg.TxnTimeout, "txn-timeout", 0, "transaction timeout: the longest a transaction of a worker that hung may stay open (a crashed worker's is fenced sooner, at its restart or at the rebalance after --session-timeout) (default 10s)")
	fs.DurationVar(&cfg.SnapshotInterval, "snapshot-interval", 0, "write each partition's pending index to the state topic this often; bounds what a take-over re-reads (default 30s)")
	fs.DurationVar(&cfg.NearWindow, "near-window", 0, "keep pending entries due within this long in RAM; later ones go to --spill-dir and come back when due within it (default 2m; must exceed --body-lead)")
	fs.StringVar(&cfg.SpillDir, "spill-dir", "", "directory for the spilled index (a local cache of Kafka: losing it loses nothing); the worker uses a subdirectory of its own, emptied at start (default: a temporary directory removed at exit)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	metricsAddr := fs.String("metrics-listen", "", "serve Prometheus metrics on http://ADDR/metrics (host:port; empty: off)")
	apiAddr := fs.String("listen", "", "serve the HTTP API (send, inspect, cancel, reschedule, forecast, /metrics) on host:port, e.g. 127.0.0.1:7070; empty: off")
	apiToken := fs.String("auth-token", "", "bearer token the HTTP API requires (prefer $HOURGLASS_AUTH_TOKEN: flags show in the process list); empty: none")
	sec := apiSecurityFlags(fs)
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if code, ok := checkKafkaFlags(a, c, fs, &cfg, pos, *brokers, *partitions, *replication); !ok {
		return code
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return a.usageError(c, "--log-level %q: want debug, info, warn or error", *logLevel)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(a.Stderr, &slog.HandlerOptions{Level: level}))
	w, err := kafkamode.New(cfg)
	if err != nil {
		return a.usageError(c, "%v", err)
	}
	if *metricsAddr != "" {
		stop, err := serveKafkaMetrics(a, w, *metricsAddr)
		if err != nil {
			return a.failed(c, err)
		}
		defer stop()
	}
	if *apiAddr != "" {
		if *apiToken == "" {
			*apiToken = a.env("HOURGLASS_AUTH_TOKEN", "")
		}
		sec.token = *apiToken
		stop, err := serveKafkaAPI(ctx, a, w, *apiAddr, *sec, cfg.Logger)
		if err != nil {
			return a.failed(c, err)
		}
		defer stop()
	}
	fmt.Fprintf(a.Stdout, "kafka worker %s joining group %s on %s\n", cfg.WorkerID, cfg.Group, strings.Join(cfg.Brokers, ","))
	if err := w.Run(ctx); err != nil {
		return a.failed(c, err)
	}
	return ExitOK
}

// checkKafkaFlags checks what parseFlags left of the kafka command's line
// and sets cfg's brokers, partitions and replication from it; when a flag
// is wrong it returns the usage error's exit code and false.
func checkKafkaFlags(a *App, c *command, fs *flag.FlagSet, cfg *kafkamode.Config, pos []string, brokers string, partitions, replication int) (int, bool) {
	if len(pos) > 0 {
		return a.usageError(c, "unexpected argument %q", pos[0]), false
	}
	if brokers == "" {
		return a.usageError(c, "--brokers is required (host:port,...)"), false
	}
	if cfg.StaticMember && !flagSet(fs, "worker-id") {
		// The default ID has the process ID in it: a restarted worker
		// would be another static member, and the old one's partitions
		// would wait --session-timeout at every restart.
		return a.usageError(c, "--static-membership needs --worker-id: the default (%s) changes at every restart", cfg.WorkerID), false
	}
	for _, b := range strings.Split(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			cfg.Brokers = append(cfg.Brokers, b)
		}
	}
	if partitions < 1 || partitions > 1<<20 {
		return a.usageError(c, "--partitions %d must be between 1 and %d", partitions, 1<<20), false
	}
	if replication < -1 || replication == 0 || replication > 1<<14 {
		return a.usageError(c, "--replication %d must be -1 or between 1 and %d", replication, 1<<14), false
	}
	cfg.Partitions, cfg.Replication = int32(partitions), int16(replication)
	return ExitOK, true
}

// serveKafkaMetrics serves the worker's Prometheus metrics on addr
// (--metrics-listen) and returns the function that stops serving.
func serveKafkaMetrics(a *App, w *kafkamode.Worker, addr string) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.KafkaHandler(w))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintf(a.Stdout, "metrics on http://%s/metrics\n", ln.Addr())
	return func() { srv.Close() }, nil
}

// flagSet reports whether the command line set the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
