package kafkabench

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// Config is one invocation of the benchmark: what -help lists.
type Config struct {
	// Brokers are the Kafka seed brokers, host:port,...
	Brokers string
	// N is the number of messages per run; Body their size in bytes.
	N, Body int
	// Tiers are the delays; each message draws one uniformly.
	Tiers []time.Duration
	// ProduceIn spreads the N messages evenly over this long.
	ProduceIn time.Duration
	// Runs is the number of runs per system; each run runs every system
	// once, in the order of Systems, so that a drift of the machine
	// touches them alike.
	Runs int
	// Systems are the names of the systems measured.
	Systems []string
	// Hourglass is the binary the hourglass workers run.
	Hourglass string
	// Workers is the number of worker processes per system; Replication
	// the replication factor of the topics the benchmark creates.
	Workers, Replication int
	// Kill SIGKILLs the first worker once half the messages arrived; it
	// is restarted with its worker ID unless NoRestart.
	Kill, NoRestart bool
	// Static starts the hourglass workers with --static-membership.
	Static bool
	// SessionTimeout is the workers' group session timeout.
	SessionTimeout time.Duration
	// KillCmd is a shell command run when half the messages arrived.
	KillCmd string
	// DelayTopic, when set, is the delay topic of workers already
	// running: no worker is started.
	DelayTopic string
	// Strict makes any message lost, early, or duplicated where the
	// system promises none, an exit status of 1.
	Strict bool
	// Warmup: the warm p99 leaves out the messages due this soon after
	// the first.
	Warmup time.Duration
	// JSONPath, when set, receives the report as JSON.
	JSONPath string
	// KeepTopics keeps each run's topics; by default a run deletes them
	// once its workers have stopped.
	KeepTopics bool
}

// Limits of the flags: beyond them a run is a mistake, not a benchmark.
const (
	maxN       = 10_000_000
	maxBody    = 1 << 20
	maxRuns    = 100
	maxWorkers = 64
	maxRepl    = 16
	// idLen is the length of a message's ID ("m0000000"), which starts
	// its body.
	idLen = 8
)

// internalUsage marks a flag that only the benchmark itself passes (to
// the floor's process): -help leaves it out.
const internalUsage = "internal: "

// parseConfig parses args. It returns ok=false with the exit code when
// the command ends there: 0 after -help, 2 after a bad flag or value (the
// error and a pointer to -help are on stderr).
func parseConfig(args []string, stderr io.Writer, opts Options) (c Config, role, prefix string, code int, ok bool) {
	var tiers, systems string
	fs := flag.NewFlagSet(opts.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Brokers, "brokers", opts.Brokers, "Kafka seed brokers, host:port,... (or $HOURGLASS_KAFKA_BROKERS); required")
	fs.IntVar(&c.N, "n", 20000, "messages per run")
	fs.StringVar(&tiers, "tiers", "1s,5s,30s", "delay tiers, comma-separated; each message draws one uniformly")
	fs.DurationVar(&c.ProduceIn, "produce-in", 5*time.Second, "produce the messages evenly over this long (-n / -produce-in is the rate falling due)")
	fs.IntVar(&c.Runs, "runs", 3, "runs of each system")
	fs.StringVar(&systems, "systems", "floor,hourglass", "systems to measure, in this order each run: "+opts.systemHelp())
	fs.StringVar(&c.Hourglass, "hourglass", opts.Hourglass, "hourglass binary the workers run")
	fs.IntVar(&c.Workers, "workers", 1, "worker processes per system; -kill kills the first")
	fs.IntVar(&c.Replication, "replication", 1, "replication factor of the topics the benchmark creates")
	fs.BoolVar(&c.Kill, "kill", false, "drill: SIGKILL the first worker once half the messages arrived, and restart it with its worker ID (the floor, which keeps no progress, is not killed)")
	fs.BoolVar(&c.NoRestart, "no-restart", false, "with -kill: leave the killed worker dead; the others take its partitions over after -session-timeout (needs -workers 2 or more)")
	fs.BoolVar(&c.Static, "static", false, "start the hourglass workers with --static-membership: a worker restarted within -session-timeout resumes its partitions without a rebalance")
	fs.DurationVar(&c.SessionTimeout, "session-timeout", 6*time.Second, "the workers' group session timeout (the broker's minimum is 6s by default)")
	fs.StringVar(&c.KillCmd, "kill-broker", "", "shell command run once half the messages arrived (for example one that kills a Kafka node)")
	fs.StringVar(&c.DelayTopic, "delay-topic", "", "measure the hourglass workers already running on this delay topic instead of starting workers (with -systems hourglass, without -kill)")
	fs.BoolVar(&c.Strict, "strict", false, "exit 1 if a system lost or delivered early any message, or duplicated one without a crash that allows it")
	fs.IntVar(&c.Body, "body", 256, "message body bytes (at least 8: the message's ID)")
	fs.DurationVar(&c.Warmup, "warmup", 500*time.Millisecond, "the warm p99 leaves out the messages due this soon after the first")
	fs.StringVar(&c.JSONPath, "json", "", "also write the report as JSON to this file")
	fs.BoolVar(&c.KeepTopics, "keep-topics", false, "keep each run's topics (prefix kb-); by default a run deletes them when it ends")
	fs.StringVar(&role, "role", "", internalUsage+"'floor' or 'floor-alo' runs that floor's process")
	fs.StringVar(&prefix, "prefix", "", internalUsage+"the topic prefix of -role")
	fs.Usage = func() { usage(fs, opts) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, "", "", 0, false
		}
		return c, "", "", 2, false
	}
	var err error
	if role != "" {
		if (role != "floor" && role != "floor-alo") || prefix == "" || c.Brokers == "" {
			err = fmt.Errorf("-role %q is internal: only 'floor' or 'floor-alo', with -prefix and -brokers", role)
		}
	} else {
		err = c.check(fs.Args(), tiers, systems, opts)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\nrun '%s -help' for the flags\n", opts.Name, err, opts.Name)
		return c, "", "", 2, false
	}
	return c, role, prefix, 0, true
}

// check validates the flags and fills Tiers and Systems from their lists.
func (c *Config) check(rest []string, tiers, systems string, opts Options) error {
	switch {
	case len(rest) > 0:
		return fmt.Errorf("unexpected argument %q", rest[0])
	case strings.TrimSpace(c.Brokers) == "":
		return errors.New("-brokers is required (host:port,...; or $HOURGLASS_KAFKA_BROKERS)")
	case c.N < 2 || c.N > maxN:
		return fmt.Errorf("-n %d: want 2 to %d messages", c.N, maxN)
	case c.ProduceIn <= 0:
		return fmt.Errorf("-produce-in %v: want a positive duration", c.ProduceIn)
	case c.Runs < 1 || c.Runs > maxRuns:
		return fmt.Errorf("-runs %d: want 1 to %d", c.Runs, maxRuns)
	case c.Workers < 1 || c.Workers > maxWorkers:
		return fmt.Errorf("-workers %d: want 1 to %d", c.Workers, maxWorkers)
	case c.Replication < 1 || c.Replication > maxRepl:
		return fmt.Errorf("-replication %d: want 1 to %d", c.Replication, maxRepl)
	case c.Body < idLen || c.Body > maxBody:
		return fmt.Errorf("-body %d: want %d to %d bytes", c.Body, idLen, maxBody)
	case c.Warmup < 0:
		return fmt.Errorf("-warmup %v: want 0 or more", c.Warmup)
	case c.SessionTimeout <= 0:
		return fmt.Errorf("-session-timeout %v: want a positive duration", c.SessionTimeout)
	case c.NoRestart && !c.Kill:
		return errors.New("-no-restart goes with -kill")
	case c.NoRestart && c.Workers < 2:
		return errors.New("-no-restart needs -workers 2 or more: with one worker nothing would take its partitions over")
	}
	for _, s := range strings.Split(tiers, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d <= 0 {
			return fmt.Errorf("-tiers: %q is not a positive duration", s)
		}
		c.Tiers = append(c.Tiers, d)
	}
	for _, s := range strings.Split(systems, ",") {
		s = strings.TrimSpace(s)
		if opts.system(s) == nil {
			return fmt.Errorf("-systems: unknown system %q (%s)", s, strings.Join(opts.systemNames(), ", "))
		}
		if slices.Contains(c.Systems, s) {
			return fmt.Errorf("-systems: %s named twice", s)
		}
		c.Systems = append(c.Systems, s)
	}
	if c.DelayTopic != "" && (c.Kill || c.Static || len(c.Systems) != 1 || c.Systems[0] != "hourglass") {
		return errors.New("-delay-topic (workers already running) goes with -systems hourglass, without -kill or -static")
	}
	if c.DelayTopic == "" && slices.ContainsFunc(c.Systems, func(s string) bool { return opts.system(s).Hourglass }) {
		if c.Hourglass == "" {
			return errors.New("-hourglass is required: no hourglass binary to run the workers")
		}
		if st, err := os.Stat(c.Hourglass); err != nil || st.IsDir() {
			return fmt.Errorf("-hourglass %s: not a file", c.Hourglass)
		}
	}
	return nil
}

// usage prints the command's help: what it does and its flags, without
// the internal ones.
func usage(fs *flag.FlagSet, opts Options) {
	w := fs.Output()
	fmt.Fprintf(w, "usage: %s -brokers host:port,... [flags]\n\n%s\n\nflags:\n", opts.Name, strings.TrimSpace(helpText))
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, internalUsage) {
			return
		}
		name, text := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  -%s %s\n    \t%s", f.Name, name, strings.ReplaceAll(text, "\n", "\n    \t"))
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// helpText heads the command's -help.
const helpText = `
Measures Kafka mode on your Kafka beside the floor of that Kafka: a bare
exactly-once loop (consume, hold until due, produce and commit the
consumed offsets in one transaction, wait for its completion), the least
an exactly-once delay forwarder can cost there. Each run creates topics
of its own (prefix kb-, deleted when it ends), produces -n messages over
-produce-in with delays drawn from -tiers, and reads the business topic
read_committed. It reports, per system, lateness p50/p99/max at that
consumer (median [range] over the runs), messages lost, duplicated and
early, bytes written to Kafka per message, the workers' peak RSS, and
the load average.

Drill: -workers 2 -kill SIGKILLs a worker at half and restarts it (-static:
as a static member, no rebalance; -no-restart: it stays dead and the
others take over after -session-timeout); "after kill" is the lateness of
the messages due from the kill on. Exit status 1 with -strict when a
message was lost, early, or duplicated where the system promises none.
Worker logs: KAFKABENCH_VERBOSE=1 prints them after each run (=2: debug).`
