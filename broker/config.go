package broker

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/remoting"
	"github.com/hourglass-mq/hourglass/rocketmq"
	"github.com/hourglass-mq/hourglass/server"
)

// Config is every setting of a hourglass server. Each field is also a
// command-line flag, a key of the JSON config file and an environment
// variable; the names are listed in the field docs (flag name; the file key
// is the flag name with '-' replaced by '_'; the variable is HOURGLASS_ and
// the flag name upper-cased with '-' replaced by '_').
//
// Precedence, from strongest to weakest: command-line flags, environment
// variables, the config file, the defaults of DefaultConfig. To get it,
// call RegisterFlags, parse the flags, then LoadFile and then ApplyEnv (or
// Resolve, which does both and validates): both leave alone every setting
// given on the command line, and the environment, applied last, overrides
// the file.
type Config struct {
	// ConfigFile is the path of an optional JSON config file
	// (flag -config, variable HOURGLASS_CONFIG). Empty means none. It is
	// read by Resolve; LoadFile takes its path as an argument.
	ConfigFile string

	// DataDir is the data directory, created if missing (flag -data-dir).
	DataDir string
	// Listen is the TCP address to listen on, host:port (flag -listen).
	// Port 0 picks a free port; Run reports the bound address to ready.
	Listen string
	// GRPCListen is the address of the RocketMQ 5 gRPC service, host:port
	// (flag -grpc-listen; package rocketmq). Empty disables it.
	GRPCListen string
	// GRPCPlaintext serves gRPC without TLS (flag -grpc-plaintext); by
	// default it is TLS.
	GRPCPlaintext bool
	// GRPCCertFile and GRPCKeyFile are the PEM certificate and key of the
	// gRPC TLS (flags -grpc-cert-file, -grpc-key-file); both empty means a
	// self-signed certificate made once and kept in <data-dir>/grpc-tls.
	GRPCCertFile, GRPCKeyFile string
	// RemotingListen is the address of RocketMQ's classic remoting
	// protocol, name server and broker in one, host:port (flag
	// -remoting-listen; package remoting). Empty disables it.
	RemotingListen string
	// RemotingTLS serves the remoting protocol over TLS (flag
	// -remoting-tls), with the certificate of -grpc-cert-file and
	// -grpc-key-file, or a self-signed one kept in <data-dir>/remoting-tls.
	// Plaintext by default, as RocketMQ 4.x's own.
	RemotingTLS bool
	// RemotingMaxConns bounds the remoting connections open at once
	// (flag -remoting-max-conns; remoting.Options.MaxConns); 0 means no
	// bound.
	RemotingMaxConns int
	// GRPCLongPoll bounds a RocketMQ receive's long poll and is the
	// long-polling timeout announced to consumers (flag -grpc-long-poll).
	GRPCLongPoll time.Duration
	// GRPCEarlyAcks answers a RocketMQ AckMessage before its record is
	// durable (flag -grpc-early-acks; rocketmq.Options.EarlyAcks): a
	// crash may deliver an acked message again, never lose one.
	GRPCEarlyAcks bool
	// GRPCSignatureSkew is how far a signed RocketMQ call's date-time may
	// be from the broker's clock (flag -grpc-signature-skew), in [1s,
	// 15m]; default 30s. It is also how long a captured signature can be
	// replayed (docs/operations.md), so keep it as narrow as the clients'
	// clock offsets allow.
	GRPCSignatureSkew time.Duration
	// AuthToken, when not empty, is the bearer token every /v1 request must
	// carry (Authorization: Bearer <token>); /healthz stays open, and so
	// does /metrics unless MetricsToken is set (flag -auth-token). Empty means no authentication. Prefer the
	// environment variable HOURGLASS_AUTH_TOKEN or the file over the flag:
	// a flag is visible to every local user in the process list. On the
	// gRPC port it is the access secret RocketMQ clients sign with.
	AuthToken string
	// MetricsToken, when not empty, puts /metrics behind a bearer token
	// (flag -metrics-token, variable HOURGLASS_METRICS_TOKEN): a scrape
	// must carry Authorization: Bearer with this token or with AuthToken,
	// else 401. Empty (the default) leaves /metrics open, as it always
	// was, so that existing scrapes go on working; its series name every
	// topic and consumer group (docs/operations.md says what it exposes).
	// A token of its own lets Prometheus read metrics without the power
	// to send, receive or cancel that AuthToken gives.
	MetricsToken string
	// Credentials is the credentials file of the principals and their
	// rules (flag -credentials; package access); empty means none. It is
	// reread when it changes; a bad file keeps the rules in force.
	Credentials string
	// CredentialsKeyFile is the key file the principals' secrets derive
	// from, needed to verify RocketMQ signatures (flag
	// -credentials-key-file); empty means the credentials file with
	// ".key" appended.
	CredentialsKeyFile string
	// AuditLog is where the audit trail of admin and message-management
	// actions and of refusals goes (flag -audit-log): empty means the
	// broker's log, each record with logger=audit; "-" JSON lines on
	// stderr; any other value a file appended to in JSON lines.
	AuditLog string
	// TLSCertFile and TLSKeyFile are the PEM certificate and key of the
	// HTTP API and console (flags -tls-cert-file, -tls-key-file), reloaded
	// when the files change; both empty serve plain HTTP. They are also
	// the certificate of gRPC and remoting when -grpc-cert-file is not
	// set.
	TLSCertFile, TLSKeyFile string
	// TLSClientCA is a PEM file of the CAs whose client certificates every
	// TLS listener verifies when a client presents one (flag
	// -tls-client-ca); the subject common name of such a certificate is
	// the principal of a request without other credentials. Empty asks
	// for none.
	TLSClientCA string
	// Clock is the broker's clock: "system" (the default, and the only
	// mode for production) or "virtual" (flag -clock). A VIRTUAL clock
	// moves only by POST /v1/clock/advance, for users' integration tests;
	// a data directory is tied to the mode it was created with (see
	// checkClockMode).
	Clock string
	// BackupDir is the directory under which POST /v1/admin/backup may
	// write backups (flag -backup-dir): a request names a new directory
	// inside it. Empty disables the route (409 failed_precondition), so
	// that no client can make the broker write elsewhere.
	BackupDir string

	// Flush is the commit-log flush policy, "sync" or "async" (flag -flush).
	// sync acknowledges a send after fdatasync; async acknowledges after the
	// write and syncs every FlushInterval, so a power loss may lose up to one
	// interval of acknowledged sends (a process crash loses nothing).
	Flush string
	// FlushInterval is the sync period under async flush (flag
	// -flush-interval). Ignored under sync. Must be positive.
	FlushInterval time.Duration
	// SegmentBytes is the commit-log segment size in bytes (flag
	// -segment-bytes; accepts suffixes KiB, MiB, GiB). At least 1 MiB.
	SegmentBytes int64
	// Preallocate writes log segments over preallocated zeros (flag
	// -preallocate; engine.Options.Preallocate): cheaper fdatasyncs for
	// up to two segments of disk. Off by default, as in the engine: a
	// batch written over zeros is no longer all-or-nothing at a power
	// loss (invariant E22), and the start may then refuse an image that
	// a growing file would have cut cleanly.
	Preallocate bool

	// MaxBodyBytes bounds one message body, in bytes (flag -max-body-bytes).
	MaxBodyBytes int64
	// MaxProperties bounds the properties of one message (flag
	// -max-properties), in [1, message.MaxPropertiesCeiling]; default 128,
	// RocketMQ's. The properties a protocol adapter adds for itself
	// (RocketMQ's keys, born time and host) do not count.
	MaxProperties int
	// MaxDelay bounds how far ahead a message may be due (flag -max-delay).
	// A later delivery time is rejected with invalid_argument.
	MaxDelay time.Duration
	// DelayLevels is the table that a send's "level" indexes, level 1 first
	// (flag -delay-levels, a comma-separated list of durations). Each must
	// be positive and at most MaxDelay. Default: RocketMQ 4.x's 18 levels.
	DelayLevels []time.Duration
	// DefaultQueues is the queue count of a topic created without one
	// (auto-created, or PUT without "queues") (flag -default-queues).
	DefaultQueues int
	// AutoCreateTopics makes a send to an unknown topic create it; when
	// false such a send fails with not_found (flag -auto-create-topics).
	AutoCreateTopics bool
	// MaxTopics bounds the number of topics (flag -max-topics); dead-letter
	// topics do not count.
	MaxTopics int
	// MaxGroups bounds the number of consumer groups (flag -max-groups).
	MaxGroups int
	// MaxScheduleBytes bounds the sum of the recurring schedules' message
	// sizes (flag -max-schedule-bytes).
	MaxScheduleBytes int64
	// MaxStreams bounds the streams, receive and send, open at once (flag
	// -max-streams): each holds three goroutines and its buffers for as
	// long as its client keeps it, idle or not.
	MaxStreams int
	// MaxBatch bounds the messages of one batch send (flag -max-batch).
	MaxBatch int
	// MaxRequestBytes bounds the body of any HTTP request, in bytes; a
	// larger one fails with 413 too_large (flag -max-request-bytes). It must
	// hold one maximal message sent as body_base64 (4/3 of MaxBodyBytes plus
	// 64 KiB of headers): the default 8 MiB does so for a 4 MiB body. A
	// batch is bounded by both this and MaxBatch.
	MaxRequestBytes int64

	// DispatchRate bounds how many due messages per second become visible,
	// so a herd reaches consumers at a bounded rate (flag -dispatch-rate).
	// Negative means unbounded; zero is rejected (it would mean the
	// engine's default, which is spelled out here instead).
	DispatchRate int
	// CheckpointInterval is how often the engine checkpoints; it bounds the
	// log replayed at startup (flag -checkpoint-interval). Must be positive.
	CheckpointInterval time.Duration
	// CheckpointBytes asks for a checkpoint as soon as this much log was
	// written since the last one, so that the log replayed after a crash
	// is bounded at any send rate (flag -checkpoint-bytes). 0 leaves only
	// the interval.
	CheckpointBytes int64
	// Retention is how long a commit-log segment whose messages are all
	// visible is kept for consumers before deletion (flag -retention).
	// Must be positive.
	Retention time.Duration
	// ScrubRate bounds the background scrub of sealed log segments, in
	// bytes per second (flag -scrub-rate); 0 turns the scrub off.
	// ScrubInterval is the pause between the end of a pass and the next
	// (flag -scrub-interval); must be positive. ScrubDelay is the wait
	// between the start and the first pass (flag -scrub-delay, default
	// 1s); 0 starts it at once.
	ScrubRate     int64
	ScrubInterval time.Duration
	ScrubDelay    time.Duration
	// DedupWindow is every topic's idempotent-send policy (flag
	// -dedup-window): a duration, "delivered", optionally "+first-wins"
	// (dedupconfig.go). DedupTopics overrides it per topic (flag
	// -dedup-topics: topic=policy, comma-separated).
	DedupWindow string
	DedupTopics string

	// ReadHeaderTimeout bounds how long a client may take to send a
	// request's line and headers (flag -read-header-timeout). Must be
	// positive.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds how long a client may take to send a whole
	// request, headers and body; a body sent slowly is cut off with 400 and
	// the connection closed (flag -read-timeout). It covers the request
	// only: a long-poll receive waits after its small body was read. At
	// least ReadHeaderTimeout.
	ReadTimeout time.Duration
	// WriteTimeout bounds the handling of a request and the writing of its
	// answer once the request was read (flag -write-timeout). It must exceed
	// the longest long-poll wait (engine.MaxReceiveWait, 30s) by at least
	// 5s, so that a long poll answers before its connection is cut.
	WriteTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its next
	// request (flag -idle-timeout). Must be positive.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's line and headers, in bytes; a
	// larger one is answered 431 (flag -max-header-bytes). At least 256KiB
	// by default so that a path with the longest key (65535 bytes, 3 bytes
	// a byte percent-encoded) fits; at least 4KiB.
	MaxHeaderBytes int64

	// DrainTimeout bounds a graceful shutdown: how long in-flight requests
	// may take to finish once shutdown starts, after which their
	// connections are closed (flag -drain-timeout). Zero closes them at
	// once. Long-poll receives end at once when shutdown starts.
	DrainTimeout time.Duration
	// LogLevel is debug, info, warn or error (flag -log-level). Requests are
	// logged at debug; client errors at warn; server errors at error.
	LogLevel string
	// LogFormat is text or json (flag -log-format).
	LogFormat string

	// cmdline records the settings given on the command line, so that
	// LoadFile and ApplyEnv leave them alone.
	cmdline map[string]bool
}

// DefaultConfig returns the defaults. Those of engine settings are the
// engine's own (engine.NewOptions), and those of the HTTP API the API's
// (server.DefaultOptions), so that they cannot disagree; the broker
// restates only its own (listening, logging, the adapters' addresses).
func DefaultConfig() Config {
	eng := engine.NewOptions("")
	web := server.DefaultOptions()
	return Config{
		DataDir:            "./hourglass-data",
		Listen:             "127.0.0.1:7070",
		GRPCListen:         "127.0.0.1:8081",
		GRPCLongPoll:       rocketmq.DefaultLongPoll,
		GRPCSignatureSkew:  rocketmq.DefaultSignatureSkew,
		RemotingListen:     "127.0.0.1:9876",
		RemotingMaxConns:   remoting.DefaultMaxConns,
		Clock:              api.ClockSystem,
		Flush:              eng.Flush.String(),
		FlushInterval:      eng.FlushInterval,
		SegmentBytes:       eng.SegmentBytes,
		Preallocate:        false,
		MaxBodyBytes:       int64(eng.Limits.MaxBodyBytes),
		MaxProperties:      eng.Limits.MaxProperties,
		MaxDelay:           eng.Limits.MaxDelay,
		DelayLevels:        append([]time.Duration(nil), eng.Limits.DelayLevels...),
		DefaultQueues:      eng.DefaultQueues,
		AutoCreateTopics:   !eng.NoAutoCreate,
		MaxTopics:          eng.MaxTopics,
		MaxGroups:          eng.MaxGroups,
		MaxScheduleBytes:   256 << 20,
		MaxBatch:           web.MaxBatch,
		MaxRequestBytes:    web.MaxRequestBytes,
		MaxStreams:         web.MaxStreams,
		DispatchRate:       eng.DispatchRate,
		CheckpointInterval: eng.CheckpointInterval,
		CheckpointBytes:    eng.CheckpointBytes,
		Retention:          eng.Retention,
		ScrubRate:          eng.ScrubRate,
		ScrubInterval:      eng.ScrubInterval,
		ScrubDelay:         time.Second,
		DedupWindow:        engine.DefaultDedupWindow.String(),
		ReadHeaderTimeout:  web.ReadHeaderTimeout,
		ReadTimeout:        web.ReadTimeout,
		WriteTimeout:       web.WriteTimeout,
		IdleTimeout:        web.IdleTimeout,
		MaxHeaderBytes:     web.MaxHeaderBytes,
		DrainTimeout:       15 * time.Second,
		LogLevel:           "info",
		LogFormat:          "text",
	}
}

// setting is one configurable field: its flag name, help text and a
// flag.Value that reads and writes the field.
type setting struct {
	name  string
	usage string
	value flag.Value
}

// settings lists every setting of c, bound to c's fields.
func (c *Config) settings() []setting {
	return []setting{
		{"config", "path of an optional JSON config file; keys are flag names with '_' for '-'", (*stringValue)(&c.ConfigFile)},
		{"data-dir", "data directory (created if missing)", (*stringValue)(&c.DataDir)},
		{"listen", "TCP address to listen on, host:port (port 0 picks a free port)", (*stringValue)(&c.Listen)},
		{"grpc-listen", "TCP address of the RocketMQ 5 gRPC service, host:port; empty disables it", (*stringValue)(&c.GRPCListen)},
		{"grpc-plaintext", "serve gRPC without TLS (clients must turn TLS off)", (*boolValue)(&c.GRPCPlaintext)},
		{"grpc-cert-file", "PEM certificate of the gRPC TLS; empty: a self-signed one in <data-dir>/grpc-tls", (*stringValue)(&c.GRPCCertFile)},
		{"grpc-key-file", "PEM private key of -grpc-cert-file", (*stringValue)(&c.GRPCKeyFile)},
		{"grpc-long-poll", "longest RocketMQ receive long poll, announced to consumers (at most 30s)", (*durationValue)(&c.GRPCLongPoll)},
		{"grpc-early-acks", "answer a RocketMQ ack once its lease has ended, before its record's fdatasync: more acks a second from clients that ack one message a call; a crash may deliver an acked message again (never lose one)", (*boolValue)(&c.GRPCEarlyAcks)},
		{"grpc-signature-skew", "how far a signed RocketMQ call's x-mq-date-time may be from the broker's clock, 1s to 15m; also how long a captured signature can be replayed", (*durationValue)(&c.GRPCSignatureSkew)},
		{"remoting-listen", "TCP address of RocketMQ's remoting protocol (4.x clients: name server and broker in one), host:port; empty disables it", (*stringValue)(&c.RemotingListen)},
		{"remoting-tls", "serve the remoting protocol over TLS (certificate of -grpc-cert-file, or a self-signed one in <data-dir>/remoting-tls)", (*boolValue)(&c.RemotingTLS)},
		{"remoting-max-conns", "most remoting connections open at once (one past it is closed, with a log line); 0 means no bound", (*intValue)(&c.RemotingMaxConns)},
		{"auth-token", "bearer token required on every /v1 request; empty disables auth (prefer HOURGLASS_AUTH_TOKEN: flags show in the process list)", (*secretValue)(&c.AuthToken)},
		{"metrics-token", "bearer token required on GET /metrics (the -auth-token is accepted too); empty leaves /metrics open to anyone who reaches the port (prefer HOURGLASS_METRICS_TOKEN)", (*secretValue)(&c.MetricsToken)},
		{"credentials", "credentials file of the principals and their rules (hourglass principal add); reread when it changes", (*stringValue)(&c.Credentials)},
		{"credentials-key-file", "key file the principals' secrets derive from (verifies RocketMQ signatures); empty: the credentials file with .key appended", (*stringValue)(&c.CredentialsKeyFile)},
		{"audit-log", "audit trail of admin and message-management actions and refusals: empty: the broker's log (logger=audit); -: JSON on stderr; else a file (JSON lines)", (*stringValue)(&c.AuditLog)},
		{"tls-cert-file", "PEM certificate of the HTTP API and console (also gRPC's and remoting's without -grpc-cert-file), reloaded when it changes; empty: plain HTTP", (*stringValue)(&c.TLSCertFile)},
		{"tls-key-file", "PEM private key of -tls-cert-file", (*stringValue)(&c.TLSKeyFile)},
		{"tls-client-ca", "PEM CAs whose client certificates the TLS listeners verify (mTLS); a certificate's subject CN is then a principal", (*stringValue)(&c.TLSClientCA)},
		{"clock", "clock of the broker: system, or virtual (FOR TESTS ONLY: time moves only by POST /v1/clock/advance; the data directory must be empty or virtual too)", (*stringValue)(&c.Clock)},
		{"backup-dir", "directory under which POST /v1/admin/backup may write backups; empty disables the route", (*stringValue)(&c.BackupDir)},
		{"flush", "commit-log flush policy: sync (ack after fdatasync) or async (ack after write, fdatasync every -flush-interval)", (*stringValue)(&c.Flush)},
		{"flush-interval", "fdatasync period under -flush async", (*durationValue)(&c.FlushInterval)},
		{"segment-bytes", "commit-log segment size in bytes (suffixes KiB, MiB, GiB), at least 1MiB", (*sizeValue)(&c.SegmentBytes)},
		{"max-body-bytes", "largest message body in bytes (suffixes KiB, MiB, GiB)", (*sizeValue)(&c.MaxBodyBytes)},
		{"max-properties", "most properties of one message, 1 to 60000 (those a protocol adapter adds for itself not counted)", (*intValue)(&c.MaxProperties)},
		{"max-delay", "furthest a message may be due ahead of now; later times are rejected", (*durationValue)(&c.MaxDelay)},
		{"delay-levels", "comma-separated durations that a send's \"level\" (1-based) indexes", (*durationsValue)(&c.DelayLevels)},
		{"default-queues", "queue count of a topic created without one", (*intValue)(&c.DefaultQueues)},
		{"preallocate", "write commit-log segments over preallocated zeros, for cheaper fdatasyncs (the active segment and one spare take -segment-bytes each from the start)", (*boolValue)(&c.Preallocate)},
		{"auto-create-topics", "create an unknown topic on first send (false: such a send is not_found)", (*boolValue)(&c.AutoCreateTopics)},
		{"max-topics", "largest number of topics (dead-letter topics not counted)", (*intValue)(&c.MaxTopics)},
		{"max-groups", "largest number of consumer groups, all topics together", (*intValue)(&c.MaxGroups)},
		{"max-schedule-bytes", "largest sum of the recurring schedules' message sizes (body, key, tag, properties; suffixes KiB, MiB, GiB)", (*sizeValue)(&c.MaxScheduleBytes)},
		{"max-streams", "most streams (receive and send) open at once", (*intValue)(&c.MaxStreams)},
		{"max-batch", "most messages in one batch send", (*intValue)(&c.MaxBatch)},
		{"max-request-bytes", "largest HTTP request body in bytes (suffixes KiB, MiB, GiB); must fit one max-size body in base64", (*sizeValue)(&c.MaxRequestBytes)},
		{"dispatch-rate", "most due messages made visible per second; negative means unbounded", (*intValue)(&c.DispatchRate)},
		{"checkpoint-interval", "how often the engine checkpoints (bounds the log replayed at startup)", (*durationValue)(&c.CheckpointInterval)},
		{"checkpoint-bytes", "checkpoint also as soon as this much log was written since the last one (suffixes KiB, MiB, GiB): bounds the log replayed after a crash at any send rate; 0 leaves only the interval", (*sizeValue)(&c.CheckpointBytes)},
		{"retention", "how long a fully delivered commit-log segment is kept before deletion", (*durationValue)(&c.Retention)},
		{"scrub-rate", "bytes per second the background scrub reads sealed log segments at, to find damage before a consumer meets it (suffixes KiB, MiB, GiB); 0 turns it off", (*sizeValue)(&c.ScrubRate)},
		{"scrub-interval", "pause between the end of a scrub pass and the start of the next", (*durationValue)(&c.ScrubInterval)},
		{"scrub-delay", "wait between the start and the first scrub pass; 0 starts it at once", (*durationValue)(&c.ScrubDelay)},
		{"dedup-window", "how long a send's dedup_id holds: a duration or \"delivered\" (until its message is visible), optionally +first-wins (a conflicting send gets the first receipt instead of 409)", (*stringValue)(&c.DedupWindow)},
		{"dedup-topics", "per-topic dedup policies overriding -dedup-window: topic=policy, comma-separated", (*stringValue)(&c.DedupTopics)},
		{"read-header-timeout", "longest a client may take to send a request's line and headers", (*durationValue)(&c.ReadHeaderTimeout)},
		{"read-timeout", "longest a client may take to send a whole request, body included; a slower body is cut off with 400 (not the long-poll wait, which comes after)", (*durationValue)(&c.ReadTimeout)},
		{"write-timeout", "longest the handling and answer of a read request may take; must exceed the 30s long-poll wait by at least 5s", (*durationValue)(&c.WriteTimeout)},
		{"idle-timeout", "how long a keep-alive connection may wait for its next request", (*durationValue)(&c.IdleTimeout)},
		{"max-header-bytes", "largest request line plus headers in bytes (suffixes KiB, MiB); a larger one is answered 431. A key is named in the path of lookups, cancels and reschedules by key, percent-encoded: below 100KiB the longest keys a message may have (32 KiB) cannot be", (*sizeValue)(&c.MaxHeaderBytes)},
		{"drain-timeout", "on shutdown, how long in-flight requests may take before their connections are closed (0: at once)", (*durationValue)(&c.DrainTimeout)},
		{"log-level", "log level: debug (logs every request), info, warn or error", (*stringValue)(&c.LogLevel)},
		{"log-format", "log format: text or json", (*stringValue)(&c.LogFormat)},
	}
}

// RegisterFlags binds every setting of c to a flag of fs, with c's current
// value as the default. c must outlive the parse of fs; settings given on
// the command line are remembered so LoadFile and ApplyEnv do not override
// them.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	if c.cmdline == nil {
		c.cmdline = map[string]bool{}
	}
	for _, s := range c.settings() {
		fs.Var(&cmdlineValue{Value: s.value, name: s.name, seen: c.cmdline}, s.name, s.usage)
	}
}

// minRequestBytes is the smallest request limit that carries one body of
// maxBody bytes as base64 plus 64 KiB of headers and JSON.
func minRequestBytes(maxBody int64) int64 {
	return (maxBody+2)/3*4 + 64<<10
}

// flushPolicy is -flush as the engine spells it.
func (c Config) flushPolicy() (engine.FlushPolicy, error) {
	p, err := engine.ParseFlushPolicy(c.Flush)
	if err != nil {
		return 0, fmt.Errorf("-flush %q is not sync or async", c.Flush)
	}
	return p, nil
}

func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("-log-level %q is not debug, info, warn or error", s)
}

// NewLogger returns a logger writing to w with c's level and format. An
// invalid level falls back to info (Validate reports it).
func (c Config) NewLogger(w io.Writer) *slog.Logger {
	lvl, err := parseLevel(c.LogLevel)
	if err != nil {
		lvl = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// ServerOptions maps c onto the HTTP API's options; the parts the core
// runs beside the engine (the virtual clock, the schedules) are added by
// the caller that opened them.
func (c Config) ServerOptions() server.Options {
	return server.Options{
		DataDir: c.DataDir, StateFiles: stateFiles, BackupDir: c.BackupDir,
		AuthToken: c.AuthToken, MetricsToken: c.MetricsToken,
		AutoCreateTopics: c.AutoCreateTopics, MaxBatch: c.MaxBatch, MaxStreams: c.MaxStreams,
		MaxRequestBytes:   c.MaxRequestBytes,
		ReadHeaderTimeout: c.ReadHeaderTimeout, ReadTimeout: c.ReadTimeout,
		WriteTimeout: c.WriteTimeout, IdleTimeout: c.IdleTimeout, MaxHeaderBytes: c.MaxHeaderBytes,
	}
}

// EngineOptions maps c onto the engine's options; logger receives the
// engine's logs.
func (c Config) EngineOptions(logger *slog.Logger) engine.Options {
	o := engine.NewOptions(c.DataDir)
	o.Logger = logger
	o.Flush, _ = c.flushPolicy()
	o.FlushInterval = c.FlushInterval
	o.SegmentBytes = c.SegmentBytes
	o.Preallocate = c.Preallocate
	o.Limits.MaxBodyBytes = int(c.MaxBodyBytes)
	o.Limits.MaxProperties = c.MaxProperties
	o.Limits.MaxDelay = c.MaxDelay
	o.Limits.DelayLevels = append([]time.Duration(nil), c.DelayLevels...)
	o.DefaultQueues = c.DefaultQueues
	o.NoAutoCreate = !c.AutoCreateTopics
	o.MaxTopics = c.MaxTopics
	o.MaxGroups = c.MaxGroups
	o.MaxBatch = c.MaxBatch
	o.DispatchRate = c.DispatchRate
	o.CheckpointInterval = c.CheckpointInterval
	o.CheckpointBytes = c.CheckpointBytes
	if c.CheckpointBytes == 0 {
		o.CheckpointBytes = -1 // only the interval
	}
	o.Retention = c.Retention
	o.ScrubRate, o.ScrubInterval = c.ScrubRate, c.ScrubInterval
	o.ScrubDelay = max(c.ScrubDelay, time.Nanosecond) // the engine's 0 means its default
	if c.ScrubRate == 0 {
		o.ScrubRate = -1 // off
	}
	o.Dedup, _ = parseDedupPolicy(c.DedupWindow)
	o.DedupTopics, _ = parseDedupTopics(c.DedupTopics)
	return o
}

// flag.Value implementations over Config's field types.
