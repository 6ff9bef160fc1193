// Command kafkabench compares hourglass's Kafka mode with the first seed's
// scheme C (a topic per delay level and a forwarder that pauses a partition
// until its head is due, at least once) on the same Kafka with the same
// load: N messages of 256 B produced over a few seconds, each with a delay
// drawn from the tiers. It reports, per system and run, lateness at a
// consumer (p50/p99/max, and a warm p99 without the messages due in the
// first -warmup; read_committed for both), records early, lost
// and duplicated, bytes written to Kafka per message (growth of every log
// directory, internal topics included) and the worker's peak RSS (VmHWM of
// the worker process). With -kill the worker is SIGKILLed once when half
// the messages have arrived and restarted, and the duplicates it causes
// are counted.
//
//	go build -o /tmp/hourglass ./cmd/hourglass
//	go run ./internal/kafkabench -hourglass /tmp/hourglass -brokers 127.0.0.1:19092 -n 20000 -tiers 1s,5s,30s -runs 3
//
// It is a developer's benchmark, not linked into the shipped binary (the
// operator's acceptance test is `hourglass bench`). The hourglass worker
// is the real `hourglass kafka` binary (-hourglass; default the
// `hourglass` beside this command, else on $PATH); the scheme C forwarder
// is this benchmark re-run with -role forwarder. Both run as child processes so a kill is a
// real SIGKILL and the RSS is the worker's alone.
//
// The drill (-workers N -kill) runs N workers and SIGKILLs one of them
// when half the messages arrived, then restarts it with its worker ID;
// -delay-topic benchmarks workers already running (a deployment) instead:
// it produces to their delay topic and reads a business topic of its own.
// -kill-broker runs a command at that moment (a soak kills a Kafka broker
// with it; see scripts/soak-kafka.sh). -strict makes any message of hourglass
// lost, duplicated or early an exit status of 1.
//
// -systems also takes hourglass-alo (the worker with --delivery
// at-least-once) and floor: a bare exactly-once loop (floor.go) that
// consumes the same delay topic, holds each record until due, and forwards
// in a transaction with the consumed offsets, waiting for each to
// complete: the floor of any exactly-once delay forwarder on this Kafka.
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
	"path/filepath"
	"sort"
	"strings"
	"time"
)

type config struct {
	// reexec is the command line that runs this benchmark again (for the
	// scheme C forwarder).
	reexec    []string
	workers   int
	repl      int
	killCmd   string
	external  string // delay topic of workers already running; "" starts them
	strict    bool
	brokers   string
	n         int
	tiers     []time.Duration
	produceIn time.Duration
	runs      int
	systems   []string
	kill      bool
	hourglass string
	body      int
	warmup    time.Duration
	// -pending: memory per pending message (pending.go).
	pending int
	dueIn   time.Duration
	compare string
}

func main() {
	self, err := os.Executable()
	if err != nil {
		fatalf("cannot find the running binary, which the scheme C forwarder re-runs: %v", err)
	}
	os.Exit(run(os.Args[1:], []string{self}))
}

// run runs the benchmark with args and returns the exit status. reexec is
// the command line that runs it again, args left out.
func run(args, reexec []string) int {
	c := config{reexec: reexec}
	var tiers, systems, role, prefix string
	fs := flag.NewFlagSet("kafkabench", flag.ExitOnError)
	fs.StringVar(&c.brokers, "brokers", "127.0.0.1:19092", "Kafka bootstrap addresses, host:port,...")
	fs.IntVar(&c.n, "n", 20000, "messages per run")
	fs.StringVar(&tiers, "tiers", "1s,5s,30s", "delay tiers; each message draws one uniformly")
	fs.DurationVar(&c.produceIn, "produce-in", 5*time.Second, "produce the messages evenly over this long")
	fs.IntVar(&c.runs, "runs", 3, "runs per system")
	fs.StringVar(&systems, "systems", "hourglass,schemec", "systems to run, in this order each run: hourglass, hourglass-alo (--delivery at-least-once), schemec, floor (a bare exactly-once loop: consume, hold until due, produce and commit offsets in one transaction, wait for its completion)")
	fs.BoolVar(&c.kill, "kill", false, "SIGKILL the worker once half the messages arrived, restart it, count duplicates")
	fs.StringVar(&c.hourglass, "hourglass", "", "hourglass binary for the workers (default: the hourglass beside this command, else on $PATH)")
	fs.IntVar(&c.workers, "workers", 1, "workers (or scheme C forwarders) in the group; -kill kills the first")
	fs.IntVar(&c.repl, "replication", 1, "replication factor of the topics the benchmark creates")
	fs.StringVar(&c.killCmd, "kill-broker", "", "shell command run when half the messages arrived (e.g. one that kills a Kafka broker)")
	fs.StringVar(&c.external, "delay-topic", "", "benchmark the workers already running on this delay topic instead of starting workers (hourglass only; no -kill, no RSS)")
	fs.BoolVar(&c.strict, "strict", false, "exit 1 if hourglass lost, duplicated or delivered early any message (scheme C duplicates by design)")
	fs.IntVar(&c.body, "body", 256, "message body bytes")
	fs.DurationVar(&c.warmup, "warmup", 500*time.Millisecond, "the warm p99 leaves out messages due this soon after the first")
	fs.IntVar(&c.pending, "pending", 0, "instead: measure worker RSS per pending message with this many messages due -due-in ahead, against the -compare binary")
	fs.DurationVar(&c.dueIn, "due-in", 48*time.Hour, "with -pending: how far ahead the messages are due")
	fs.StringVar(&c.compare, "compare", "", "with -pending: the baseline hourglass binary, measured alternately with -hourglass")
	fs.StringVar(&role, "role", "", "internal: 'forwarder' runs the scheme C forwarder, 'floor' the exactly-once floor")
	fs.StringVar(&prefix, "prefix", "", "internal: topic prefix for -role forwarder")
	_ = fs.Parse(args)
	checkFlags(&c, tiers, systems)
	if role == "forwarder" {
		if err := runForwarder(context.Background(), c, prefix); err != nil {
			fatalf("forwarder: %v", err)
		}
		return 0
	}
	if role == "floor" {
		if err := runFloor(context.Background(), c, prefix); err != nil {
			fatalf("floor: %v", err)
		}
		return 0
	}
	c.systems = strings.Split(systems, ",")
	for _, s := range c.systems {
		if s != "hourglass" && s != "hourglass-alo" && s != "schemec" && s != "floor" {
			fatalf("unknown system %q (hourglass, hourglass-alo, schemec, floor)", s)
		}
	}
	if c.hourglass == "" {
		c.hourglass = findHourglass(c.reexec[0])
	}
	if c.pending > 0 {
		if c.compare == "" || c.dueIn <= 0 {
			fatalf("-pending needs -compare (the baseline binary) and a positive -due-in")
		}
		return runPending(c)
	}
	results := map[string][]result{}
	for run := 1; run <= c.runs; run++ {
		for _, s := range c.systems {
			r, err := runOnce(c, s, run)
			if err != nil {
				fatalf("%s run %d: %v", s, run, err)
			}
			fmt.Printf("%s run %d: %s\n", s, run, r)
			results[s] = append(results[s], r)
		}
	}
	return summarizeAll(c, results)
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kafkabench: "+format+"\n", args...)
	os.Exit(1)
}

// result is one run of one system.
type result struct {
	p50, p99, max                 int64 // lateness, ms
	p99warm                       int64 // lateness p99 of messages due -warmup or more after the first, ms
	early, lost, dup              int
	bytesPerMsg                   float64
	rssMiB                        float64
	elapsed                       time.Duration
	afterKillDup, afterKillWindow int
}

func (r result) String() string {
	return fmt.Sprintf("lateness p50 %d / p99 %d / max %d ms (warm p99 %d ms); early %d, lost %d, duplicated %d; %.0f B written per message; worker peak RSS %.0f MiB",
		r.p50, r.p99, r.max, r.p99warm, r.early, r.lost, r.dup, r.bytesPerMsg, r.rssMiB)
}

// summarize gives the median and range of each figure over the runs.
func summarize(rs []result) string {
	med := func(f func(result) float64) string {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		sort.Float64s(v)
		return fmt.Sprintf("%.0f (%.0f-%.0f)", v[len(v)/2], v[0], v[len(v)-1])
	}
	return fmt.Sprintf("median (range) over %d runs: p50 %s ms, p99 %s ms, max %s ms, warm p99 %s ms, early %s, lost %s, duplicated %s, %s B/message, RSS %s MiB",
		len(rs),
		med(func(r result) float64 { return float64(r.p50) }),
		med(func(r result) float64 { return float64(r.p99) }),
		med(func(r result) float64 { return float64(r.max) }),
		med(func(r result) float64 { return float64(r.p99warm) }),
		med(func(r result) float64 { return float64(r.early) }),
		med(func(r result) float64 { return float64(r.lost) }),
		med(func(r result) float64 { return float64(r.dup) }),
		med(func(r result) float64 { return r.bytesPerMsg }),
		med(func(r result) float64 { return r.rssMiB }))
}

// checkFlags refuses (with fatalf) flag values out of range or in conflict,
// and parses the -tiers list into c.tiers.
func checkFlags(c *config, tiers, systems string) {
	if c.workers < 1 || c.workers > 64 {
		fatalf("-workers %d is not in [1, 64]", c.workers)
	}
	if c.repl < 1 || c.repl > 16 {
		fatalf("-replication %d is not in [1, 16]", c.repl)
	}
	if c.external != "" && (c.kill || systems != "hourglass") {
		fatalf("-delay-topic (running workers) goes with -systems hourglass and without -kill")
	}
	if c.n < 2 {
		fatalf("-n %d: want at least 2 messages", c.n)
	}
	for _, s := range strings.Split(tiers, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d <= 0 {
			fatalf("bad tier %q", s)
		}
		c.tiers = append(c.tiers, d)
	}
}

// summarizeAll prints each system's summary over its runs and returns the
// exit code: 1 under -strict when hourglass lost, duplicated or delivered
// early any message, else 0.
func summarizeAll(c config, results map[string][]result) int {
	fmt.Println()
	bad := 0
	for _, s := range c.systems {
		fmt.Printf("%-9s %s\n", s, summarize(results[s]))
		for _, r := range results[s] {
			if s == "hourglass" { // scheme C is at least once by design
				bad += r.lost + r.dup + r.early
			}
		}
	}
	if c.strict && bad > 0 {
		fmt.Printf("FAIL: %d messages lost, duplicated or early\n", bad)
		return 1
	}
	return 0
}

// findHourglass is the hourglass binary the workers run when -hourglass
// names none: the one beside self (both built into one directory), else
// the one on $PATH. Not finding one is fatal: the benchmark measures that
// binary and must not guess.
func findHourglass(self string) string {
	beside := filepath.Join(filepath.Dir(self), "hourglass")
	if st, err := os.Stat(beside); err == nil && !st.IsDir() {
		return beside
	}
	p, err := exec.LookPath("hourglass")
	if err != nil {
		fatalf("no hourglass binary beside %s or on $PATH: build one (go build -o DIR/hourglass ./cmd/hourglass) and name it with -hourglass", self)
	}
	return p
}
