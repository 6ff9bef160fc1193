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
//	go run ./internal/kafkabench -brokers 127.0.0.1:19092 -n 20000 -tiers 1s,5s,30s -runs 3
//
// The hourglass worker is the real `hourglass kafka` binary (-hourglass, or
// built into a temp dir); the scheme C forwarder is this program re-run
// with -role forwarder. Both run as child processes so a kill is a real
// SIGKILL and the RSS is the worker's alone.
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
}

func main() {
	var c config
	var tiers, systems, role, prefix string
	flag.StringVar(&c.brokers, "brokers", "127.0.0.1:19092", "Kafka bootstrap address")
	flag.IntVar(&c.n, "n", 20000, "messages per run")
	flag.StringVar(&tiers, "tiers", "1s,5s,30s", "delay tiers; each message draws one uniformly")
	flag.DurationVar(&c.produceIn, "produce-in", 5*time.Second, "produce the messages evenly over this long")
	flag.IntVar(&c.runs, "runs", 3, "runs per system")
	flag.StringVar(&systems, "systems", "hourglass,schemec", "systems to run, in this order each run")
	flag.BoolVar(&c.kill, "kill", false, "SIGKILL the worker once half the messages arrived, restart it, count duplicates")
	flag.StringVar(&c.hourglass, "hourglass", "", "hourglass binary (default: go build it)")
	flag.IntVar(&c.body, "body", 256, "message body bytes")
	flag.DurationVar(&c.warmup, "warmup", 500*time.Millisecond, "the warm p99 leaves out messages due this soon after the first")
	flag.StringVar(&role, "role", "", "internal: 'forwarder' runs the scheme C forwarder")
	flag.StringVar(&prefix, "prefix", "", "internal: topic prefix for -role forwarder")
	flag.Parse()
	for _, s := range strings.Split(tiers, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d <= 0 {
			fatalf("bad tier %q", s)
		}
		c.tiers = append(c.tiers, d)
	}
	if role == "forwarder" {
		if err := runForwarder(context.Background(), c, prefix); err != nil {
			fatalf("forwarder: %v", err)
		}
		return
	}
	c.systems = strings.Split(systems, ",")
	for _, s := range c.systems {
		if s != "hourglass" && s != "schemec" {
			fatalf("unknown system %q (hourglass, schemec)", s)
		}
	}
	if c.hourglass == "" {
		dir, err := os.MkdirTemp("", "kafkabench")
		if err != nil {
			fatalf("%v", err)
		}
		defer os.RemoveAll(dir)
		c.hourglass = filepath.Join(dir, "hourglass")
		if out, err := exec.Command("go", "build", "-o", c.hourglass, "./cmd/hourglass").CombinedOutput(); err != nil {
			fatalf("go build: %v\n%s", err, out)
		}
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
	fmt.Println()
	for _, s := range c.systems {
		fmt.Printf("%-9s %s\n", s, summarize(results[s]))
	}
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
