// Command kafkabench is `hourglass bench kafka` (package
// kafkamode/kafkabench) with the developer's comparisons added: the first
// seed's scheme C (a topic per delay level and a forwarder that pauses a
// partition until its head is due, at least once) as -systems schemec,
// and -pending, the worker's memory per pending message against another
// hourglass binary. Every other flag, the run loop, the collector and the
// report are the shipped command's; see `hourglass bench kafka -help`.
//
//	go build -o /tmp/hourglass ./cmd/hourglass
//	go run ./internal/kafkabench -hourglass /tmp/hourglass -brokers 127.0.0.1:19092 -n 20000 -tiers 1s,5s,30s -runs 3 -systems floor,hourglass,schemec
//
// It is a developer's benchmark, not linked into the shipped binary. The
// hourglass workers run the binary named by -hourglass (default: the
// `hourglass` beside this command, else on $PATH); the scheme C forwarder
// and the floor are this command run again (-role forwarder, -role floor).
//
// -compare BIN adds the systems baseline and baseline-alo: the workers of
// another hourglass binary, to measure a change against the build before
// it in the same run.
//
// -pending N measures instead the worker's memory per pending message far
// from due, against another hourglass binary (-compare); see pending.go.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hourglass-mq/hourglass/kafkamode/kafkabench"
)

// config is the -pending benchmark's.
type config struct {
	brokers   string
	repl      int
	runs      int
	body      int
	hourglass string
	pending   int
	dueIn     time.Duration
	compare   string
}

func main() {
	self, err := os.Executable()
	if err != nil {
		fatalf("cannot find the running binary, which the forwarder and the floor re-run: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], self))
}

// run runs the benchmark with args and returns the exit status.
func run(ctx context.Context, args []string, self string) int {
	switch {
	case len(args) >= 2 && args[0] == "-role" && args[1] == "forwarder":
		return runForwarderRole(ctx, args[2:])
	case slices.ContainsFunc(args, func(a string) bool {
		return a == "-pending" || a == "--pending" || strings.HasPrefix(a, "-pending=") || strings.HasPrefix(a, "--pending=")
	}):
		return runPendingMain(args, self)
	}
	args, compare := takeCompare(args)
	extra := []kafkabench.System{schemeC()}
	if compare != "" {
		extra = append(extra,
			kafkabench.HourglassSystem("baseline", "the -compare binary, exactly once", "exactly-once", compare),
			kafkabench.HourglassSystem("baseline-alo", "the -compare binary, at least once", "at-least-once", compare))
	}
	return kafkabench.Main(ctx, args, os.Stdout, os.Stderr, kafkabench.Options{
		Name:      "kafkabench",
		Reexec:    []string{self},
		Hourglass: findHourglass(self),
		Brokers:   "127.0.0.1:19092",
		Extra:     extra,
	})
}

// takeCompare removes -compare BIN from args (without -pending: a
// baseline build measured in the same run as -systems baseline and
// baseline-alo) and returns the rest and BIN.
func takeCompare(args []string) (rest []string, bin string) {
	for i := 0; i < len(args); i++ {
		a := strings.TrimPrefix(args[i], "-")
		switch {
		case (a == "-compare" || a == "compare") && i+1 < len(args):
			bin = args[i+1]
			i++
		case strings.HasPrefix(a, "compare=") || strings.HasPrefix(a, "-compare="):
			bin = a[strings.IndexByte(a, '=')+1:]
		default:
			rest = append(rest, args[i])
		}
	}
	return rest, bin
}

// runForwarderRole is the scheme C forwarder's process.
func runForwarderRole(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("kafkabench -role forwarder", flag.ExitOnError)
	prefix := fs.String("prefix", "", "topic prefix")
	brokers := fs.String("brokers", "", "Kafka seed brokers")
	tierList := fs.String("tiers", "", "delay tiers")
	_ = fs.Parse(args)
	var tiers []time.Duration
	for _, s := range strings.Split(*tierList, ",") {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			fatalf("forwarder: bad tier %q", s)
		}
		tiers = append(tiers, d)
	}
	if *prefix == "" || *brokers == "" {
		fatalf("forwarder: -prefix and -brokers are required")
	}
	if err := runForwarder(ctx, *brokers, tiers, *prefix); err != nil {
		fatalf("forwarder: %v", err)
	}
	return 0
}

// runPendingMain parses the -pending benchmark's flags and runs it.
func runPendingMain(args []string, self string) int {
	var c config
	fs := flag.NewFlagSet("kafkabench -pending", flag.ExitOnError)
	fs.StringVar(&c.brokers, "brokers", "127.0.0.1:19092", "Kafka bootstrap addresses, host:port,...")
	fs.IntVar(&c.runs, "runs", 3, "runs per binary")
	fs.IntVar(&c.repl, "replication", 1, "replication factor of the topics the benchmark creates")
	fs.IntVar(&c.body, "body", 256, "message body bytes")
	fs.StringVar(&c.hourglass, "hourglass", "", "hourglass binary measured (default: the hourglass beside this command, else on $PATH)")
	fs.IntVar(&c.pending, "pending", 0, "measure worker RSS per pending message with this many messages due -due-in ahead, against the -compare binary")
	fs.DurationVar(&c.dueIn, "due-in", 48*time.Hour, "how far ahead the messages are due")
	fs.StringVar(&c.compare, "compare", "", "the baseline hourglass binary, measured alternately with -hourglass")
	_ = fs.Parse(args)
	if c.hourglass == "" {
		c.hourglass = findHourglass(self)
	}
	switch {
	case fs.NArg() > 0:
		fatalf("unexpected argument %q", fs.Arg(0))
	case c.pending < 1 || c.runs < 1 || c.repl < 1 || c.body < 1:
		fatalf("-pending, -runs, -replication and -body must be positive")
	case c.compare == "" || c.dueIn <= 0:
		fatalf("-pending needs -compare (the baseline binary) and a positive -due-in")
	case c.hourglass == "":
		fatalf("no hourglass binary beside %s or on $PATH: build one (go build -o DIR/hourglass ./cmd/hourglass) and name it with -hourglass", self)
	}
	return runPending(c)
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kafkabench: "+format+"\n", args...)
	os.Exit(1)
}

// findHourglass is the hourglass binary the workers run when -hourglass
// names none: the one beside self (both built into one directory), else
// the one on $PATH; "" when there is none (the benchmark then asks for
// -hourglass rather than guess).
func findHourglass(self string) string {
	beside := filepath.Join(filepath.Dir(self), "hourglass")
	if st, err := os.Stat(beside); err == nil && !st.IsDir() {
		return beside
	}
	p, err := exec.LookPath("hourglass")
	if err != nil {
		return ""
	}
	return p
}
