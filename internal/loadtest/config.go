package loadtest

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Mode is how due times are chosen.
type Mode string

// The modes.
const (
	// ModeTiers spreads the messages evenly over fixed delays: message i
	// gets tier i mod len(tiers), due that delay after it is sent.
	ModeTiers Mode = "tiers"
	// ModeSpread gives each message a delay drawn uniformly at random
	// from [SpreadMin, SpreadMax].
	ModeSpread Mode = "spread"
	// ModeHerd makes every message due at the same instant.
	ModeHerd Mode = "herd"
)

// Config is one bench run. Main fills it from the command line; its zero
// value is not usable (see defaultConfig).
type Config struct {
	// Server is the base URL of the broker (ignored by a drill, which
	// starts its own).
	Server string
	// Token is the bearer token, empty for none.
	Token string
	// Topic is the topic the bench sends to; empty means a fresh name per
	// run, so that nothing left from an earlier run is counted.
	Topic string
	// Group is the consumer group the bench receives with.
	Group string

	// N is the number of messages to get acknowledged by the broker.
	N int
	// Mode, with Tiers, SpreadMin/SpreadMax or Herd, chooses due times.
	Mode                 Mode
	Tiers                []time.Duration
	SpreadMin, SpreadMax time.Duration
	// HerdAt is the herd's instant: absolute when HerdAbs is set,
	// otherwise HerdIn after the start of sending.
	HerdAt  time.Time
	HerdIn  time.Duration
	HerdAbs bool

	// Producers is the number of concurrent senders.
	Producers int
	// Rate is the target send rate over all producers in messages per
	// second; 0 sends as fast as the broker accepts.
	Rate float64
	// Batch is the number of messages per send request (1 uses the
	// single-message endpoint).
	Batch int
	// BodyBytes is the size of each message body.
	BodyBytes int

	// Consumers is the number of concurrent receivers.
	Consumers int
	// Max is the most messages one receive returns.
	Max int
	// Invisible is the lease of a receive.
	Invisible time.Duration
	// Wait is the long-poll wait of a receive.
	Wait time.Duration
	// Stream makes each consumer a streaming receive (POST .../stream)
	// instead of a receive loop; Window is its window (0: the broker's
	// default).
	Stream bool
	Window int

	// Deadline is how long after the last due time the bench waits for
	// stragglers before it counts them lost.
	Deadline time.Duration
	// Linger is how long the bench keeps receiving after every message
	// arrived, to catch late duplicates.
	Linger time.Duration

	// JSONPath and SVGPath name the machine report and the chart (an SVG
	// document); empty writes none.
	JSONPath, SVGPath string
	// Progress is the period of the live progress line; 0 prints none.
	Progress time.Duration
	// Seed seeds the random choices (spread delays, kill moments).
	Seed uint64

	// Drill starts the broker as a child process and kills it Kills
	// times, each time leaving it down for Downtime.
	Drill    bool
	Kills    int
	Downtime time.Duration
	// Dedup gives every message a dedup ID (its bench ID), so that a send
	// whose answer was lost is sent again with the same IDs and due times
	// and stored at most once, instead of being resent as new messages.
	Dedup bool
	// DataDir is the drill broker's data directory; empty uses a fresh
	// temporary directory that is removed afterwards.
	DataDir string
	// Binary is the hourglass executable the drill starts.
	Binary string
	// ServerArgs are extra arguments of "hourglass serve".
	ServerArgs []string
	// ServerLog, when set, receives the drill broker's output.
	ServerLog string
}

// Defaults of the flags.
const (
	defaultServer    = "http://127.0.0.1:7070"
	defaultGroup     = "bench"
	defaultN         = 10000
	defaultTiers     = "1s,5s,30s,5m"
	defaultProducers = 4
	defaultBatch     = 100
	defaultConsumers = 4
	defaultMax       = 256
	defaultInvisible = 30 * time.Second
	defaultWait      = time.Second
	defaultBodyBytes = 256
	// defaultDeadline is the straggler wait of an ordinary run.
	defaultDeadline = 30 * time.Second
	// maxBatch, maxReceive and maxWindow are the API's limits.
	maxBatch   = 1000
	maxReceive = 1000
	maxWindow  = 10_000
)

// autoDuration is a duration flag whose unset value means "computed from
// the other settings"; it prints as "auto".
type autoDuration struct {
	d   time.Duration
	set bool
}

func (a *autoDuration) String() string {
	if a == nil || !a.set {
		return "auto"
	}
	return a.d.String()
}

func (a *autoDuration) Set(s string) error {
	if s == "auto" {
		a.set = false
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return errors.New("must not be negative")
	}
	a.d, a.set = d, true
	return nil
}

const usageText = `usage: hourglass bench [flags]

Sends -n messages with delays, receives them in a consumer group, acks each,
and reports per delay tier how late they arrived (p50, p95, p99, p99.9, max),
how many arrived early (must be 0), were lost (acknowledged by the broker but
never received before the deadline) or duplicated, and the send and receive
rates. A progress line goes to stderr while it runs, a table to stdout at the
end; --json and --svg write the report and a chart of lateness (SVG).

Due times: --tiers (each message gets the next tier in turn), --spread
(uniform random delay), or --herd N@T (N messages all due at instant T, a
duration after sending starts such as 10s, or an RFC 3339 time).

Early arrivals are counted with zero tolerance: an arrival before the due
time by any amount counts. This assumes the bench and the broker read the
same clock (same machine, or well synchronised clocks).

--drill starts the broker itself (--binary serve --data-dir D --listen on a
free loopback port, plus --server-args), sends and receives throughout,
SIGKILLs it --kills times at random moments, leaves it down for --downtime,
restarts it on the same data directory, and reports lost and duplicated
messages and, separately, the lateness of messages due while it was down.
A send the broker refused (connection refused) is retried under the same IDs;
any other failed send may have been stored: with --dedup (the default) it is
sent again with the same dedup IDs and due times, so the broker stores each
message once; with --dedup=false it is not acknowledged, so it is resent as
new messages and counted as failed, not as lost. With --rate 0 the drill paces its sends
over the kill window (kills x (downtime + 2s)) so that it sends throughout.

Exit status: 0 no message lost or early; 1 otherwise (or the run failed);
2 bad command line.

flags:
`

// parseArgs parses the bench's command line. It returns ok=false with the
// exit code when the command must end: 0 after --help, 2 after an error
// (which it has printed to stderr).
func parseArgs(args []string, stderr io.Writer) (cfg Config, code int, ok bool) {
	var raw rawArgs
	fs := benchFlags(&cfg, &raw, stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, 0, false
		}
		return cfg, 2, false
	}
	err := func() error {
		if fs.NArg() > 0 {
			return fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
		if raw.png != "" {
			return fmt.Errorf("--png is gone: the chart is an SVG document now; use --svg %s", strings.TrimSuffix(raw.png, ".png")+".svg")
		}
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["server"] {
			if v, ok := os.LookupEnv("HOURGLASS_SERVER"); ok && v != "" {
				cfg.Server = v
			}
		}
		if !set["token"] {
			if v, ok := os.LookupEnv("HOURGLASS_TOKEN"); ok {
				cfg.Token = v
			}
		}
		cfg.Seed = uint64(raw.seed)
		cfg.ServerArgs = strings.Fields(raw.serverArgs)
		if err := cfg.pickMode(set, &raw); err != nil {
			return err
		}
		if err := cfg.checkLimits(); err != nil {
			return err
		}
		if err := cfg.checkDrill(set); err != nil {
			return err
		}
		cfg.setWaits(&raw)
		return nil
	}()
	if err != nil {
		fmt.Fprintf(stderr, "hourglass bench: %v\n", err)
		fmt.Fprintln(stderr, "run 'hourglass bench --help' for the flags")
		return cfg, 2, false
	}
	return cfg, 0, true
}

// rawArgs are the flags parsed into something other than a Config field.
type rawArgs struct {
	tiers, spread, herd, serverArgs string
	png                             string // the old chart flag, refused with a pointer to --svg
	deadline, linger                autoDuration
	seed                            int64
}

// benchFlags is the flag table of hourglass bench.
func benchFlags(cfg *Config, raw *rawArgs, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("hourglass bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.Server, "server", defaultServer, "broker base `URL` (or $HOURGLASS_SERVER)")
	fs.StringVar(&cfg.Token, "token", "", "bearer `token` (or $HOURGLASS_TOKEN)")
	fs.StringVar(&cfg.Topic, "topic", "", "topic to use (default: a fresh name per run)")
	fs.StringVar(&cfg.Group, "group", defaultGroup, "consumer `group`")
	fs.IntVar(&cfg.N, "n", defaultN, "number of messages the broker must acknowledge")
	fs.StringVar(&raw.tiers, "tiers", defaultTiers, "comma-separated delay `tiers`, used in turn")
	fs.StringVar(&raw.spread, "spread", "", "uniform random delay `range`, e.g. 0s-10m (instead of --tiers)")
	fs.StringVar(&raw.herd, "herd", "", "`N@T`: N messages all due at T (a duration after sending starts, or RFC 3339)")
	fs.IntVar(&cfg.Producers, "producers", defaultProducers, "concurrent producers")
	fs.Float64Var(&cfg.Rate, "rate", 0, "target send rate in messages/s over all producers (0: as fast as possible)")
	fs.IntVar(&cfg.Batch, "batch", defaultBatch, "messages per send request (1-1000)")
	fs.IntVar(&cfg.BodyBytes, "body-bytes", defaultBodyBytes, "message body size in `bytes`")
	fs.IntVar(&cfg.Consumers, "consumers", defaultConsumers, "concurrent consumers")
	fs.IntVar(&cfg.Max, "max", defaultMax, "most messages per receive (1-1000)")
	fs.DurationVar(&cfg.Invisible, "invisible", defaultInvisible, "lease of a receive (unacked messages return after it)")
	fs.DurationVar(&cfg.Wait, "wait", defaultWait, "long-poll wait of a receive")
	fs.BoolVar(&cfg.Stream, "stream", false, "consume through streaming receives (one exchange per consumer, leased ahead of the acks) instead of receive requests")
	fs.IntVar(&cfg.Window, "window", 0, "with --stream: most messages leased ahead of the acks per consumer (0: the broker's default, 1000)")
	fs.Var(&raw.deadline, "deadline", "wait this `duration` after the last due time for stragglers before counting them lost\n(auto: 30s; in a drill downtime + invisible + 30s)")
	fs.Var(&raw.linger, "linger", "keep receiving this `duration` after all arrived, to catch late duplicates\n(auto: 0; in a drill invisible + 2s)")
	fs.StringVar(&cfg.JSONPath, "json", "", "write the report as JSON to `file`")
	fs.StringVar(&cfg.SVGPath, "svg", "", "write the lateness chart, over the run and as a histogram, as SVG to `file`")
	fs.StringVar(&raw.png, "png", "", "gone: the chart is SVG now (--svg)")
	fs.DurationVar(&cfg.Progress, "progress", time.Second, "period of the progress line on stderr (0: none)")
	fs.Int64Var(&raw.seed, "seed", 0, "random seed (0: from the clock); reported so a run can be repeated")
	fs.BoolVar(&cfg.Dedup, "dedup", true, "give every message a dedup ID and resend a send whose answer was lost with it\n(false: resend its messages as new ones)")
	fs.BoolVar(&cfg.Drill, "drill", false, "crash drill: start the broker, kill -9 and restart it during the run")
	fs.IntVar(&cfg.Kills, "kills", 3, "drill: number of kills")
	fs.DurationVar(&cfg.Downtime, "downtime", 5*time.Second, "drill: how long the broker stays down after each kill")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "drill: broker data `directory` (default: a temporary one, removed after)")
	fs.StringVar(&cfg.Binary, "binary", "", "drill: hourglass `executable` to start (default: this program)")
	fs.StringVar(&raw.serverArgs, "server-args", "", "drill: extra `arguments` of serve, space-separated")
	fs.StringVar(&cfg.ServerLog, "server-log", "", "drill: append the broker's output to `file` (default: keep only its tail for errors)")
	return fs
}

// pickMode sets the due-time mode: tiers, a spread or a herd, one of them.
func (cfg *Config) pickMode(set map[string]bool, raw *rawArgs) error {
	modes := 0
	for _, f := range []string{"tiers", "spread", "herd"} {
		if set[f] {
			modes++
		}
	}
	if modes > 1 {
		return fmt.Errorf("--tiers, --spread and --herd are alternatives; give one")
	}
	var err error
	switch {
	case set["herd"]:
		cfg.Mode = ModeHerd
		if set["n"] {
			return fmt.Errorf("--herd N@T gives the message count; drop -n")
		}
		if err = parseHerd(raw.herd, cfg); err != nil {
			return fmt.Errorf("--herd: %v", err)
		}
	case set["spread"]:
		cfg.Mode = ModeSpread
		if cfg.SpreadMin, cfg.SpreadMax, err = parseSpread(raw.spread); err != nil {
			return fmt.Errorf("--spread: %v", err)
		}
	default:
		cfg.Mode = ModeTiers
		if cfg.Tiers, err = parseTiers(raw.tiers); err != nil {
			return fmt.Errorf("--tiers: %v", err)
		}
	}
	return nil
}

// checkLimits checks the counts and durations against their ranges.
func (cfg *Config) checkLimits() error {
	switch {
	case cfg.N < 1:
		return fmt.Errorf("-n must be at least 1")
	case cfg.Producers < 1:
		return fmt.Errorf("--producers must be at least 1")
	case cfg.Consumers < 1:
		return fmt.Errorf("--consumers must be at least 1")
	case cfg.Batch < 1 || cfg.Batch > maxBatch:
		return fmt.Errorf("--batch must be in 1..%d", maxBatch)
	case cfg.Max < 1 || cfg.Max > maxReceive:
		return fmt.Errorf("--max must be in 1..%d", maxReceive)
	case cfg.Rate < 0:
		return fmt.Errorf("--rate must not be negative")
	case cfg.BodyBytes < 0:
		return fmt.Errorf("--body-bytes must not be negative")
	case cfg.Invisible < time.Second:
		return fmt.Errorf("--invisible must be at least 1s")
	case cfg.Wait < 0 || cfg.Wait > 30*time.Second:
		return fmt.Errorf("--wait must be in 0s..30s")
	case cfg.Window < 0 || cfg.Window > maxWindow:
		return fmt.Errorf("--window must be in 0..%d", maxWindow)
	case cfg.Window != 0 && !cfg.Stream:
		return fmt.Errorf("--window needs --stream")
	case cfg.Progress < 0:
		return fmt.Errorf("--progress must not be negative")
	case cfg.Group == "":
		return fmt.Errorf("--group must not be empty")
	}
	return nil
}

// checkDrill checks the drill's flags, and that none is given without it.
func (cfg *Config) checkDrill(set map[string]bool) error {
	if !cfg.Drill {
		for _, f := range []string{"kills", "downtime", "data-dir", "binary", "server-args", "server-log"} {
			if set[f] {
				return fmt.Errorf("--%s only applies to --drill", f)
			}
		}
		return nil
	}
	switch {
	case set["server"]:
		return fmt.Errorf("--drill starts its own broker; drop --server")
	case cfg.Kills < 1:
		return fmt.Errorf("--kills must be at least 1")
	case cfg.Downtime < 0:
		return fmt.Errorf("--downtime must not be negative")
	}
	if cfg.Binary == "" {
		var err error
		if cfg.Binary, err = os.Executable(); err != nil {
			cfg.Binary = os.Args[0]
		}
	}
	return nil
}

// setWaits sets the deadline for stragglers and the linger for late
// duplicates: the flags when given, else what the mode implies.
func (cfg *Config) setWaits(raw *rawArgs) {
	cfg.Deadline = defaultDeadline
	if cfg.Drill {
		cfg.Deadline = cfg.Downtime + cfg.Invisible + defaultDeadline
		cfg.Linger = cfg.Invisible + 2*time.Second
	}
	if raw.deadline.set {
		cfg.Deadline = raw.deadline.d
	}
	if raw.linger.set {
		cfg.Linger = raw.linger.d
	}
}

// parseTiers parses "1s,5s,30s,5m".
func parseTiers(s string) ([]time.Duration, error) {
	var out []time.Duration
	seen := map[time.Duration]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("empty tier in %q", s)
		}
		d, err := time.ParseDuration(part)
		if err != nil {
			return nil, err
		}
		if d < 0 {
			return nil, fmt.Errorf("tier %s is negative", part)
		}
		if seen[d] {
			return nil, fmt.Errorf("tier %s is given twice", part)
		}
		seen[d] = true
		out = append(out, d)
	}
	if len(out) > len(palette) {
		return nil, fmt.Errorf("at most %d tiers", len(palette))
	}
	return out, nil
}

// parseSpread parses "0s-10m".
func parseSpread(s string) (lo, hi time.Duration, err error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return 0, 0, fmt.Errorf("%q is not MIN-MAX, e.g. 0s-10m", s)
	}
	if lo, err = time.ParseDuration(strings.TrimSpace(a)); err != nil {
		return 0, 0, err
	}
	if hi, err = time.ParseDuration(strings.TrimSpace(b)); err != nil {
		return 0, 0, err
	}
	if lo < 0 || hi < lo {
		return 0, 0, fmt.Errorf("need 0 <= MIN <= MAX, got %s-%s", lo, hi)
	}
	return lo, hi, nil
}

// parseHerd parses "N@T" into cfg.N and the herd instant.
func parseHerd(s string, cfg *Config) error {
	a, b, ok := strings.Cut(s, "@")
	if !ok {
		return fmt.Errorf("%q is not N@T, e.g. 100000@30s", s)
	}
	n, err := strconv.Atoi(strings.TrimSpace(a))
	if err != nil || n < 1 {
		return fmt.Errorf("N in %q must be a positive integer", s)
	}
	cfg.N = n
	b = strings.TrimSpace(b)
	if d, err := time.ParseDuration(b); err == nil {
		if d < 0 {
			return fmt.Errorf("T %s is negative", b)
		}
		cfg.HerdIn = d
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, b)
	if err != nil {
		return fmt.Errorf("T %q is neither a duration (10s) nor an RFC 3339 time", b)
	}
	cfg.HerdAt, cfg.HerdAbs = t, true
	return nil
}
