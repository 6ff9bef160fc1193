// Command enginebench runs the large benchmarks of the hourglass engine on a
// real directory and prints one Markdown result block per scenario, ready to
// paste into docs/benchmarks.md. Every figure with a baseline is measured in
// the same run as that baseline.
//
// Scenarios (-scenario):
//
//	pending   N pending messages (default 10 M) due over 30 days, unique keys,
//	          16 B bodies, SendBatch of 1000, sync flush: send rate, RAM and
//	          disk bytes per pending message, by component
//	restart   reopen a directory left by pending (-dir ... -keep): time until
//	          Open returns and until a due message is visible
//	lateness  1 M pending plus 20,000 messages/s falling due for 30 s:
//	          visible minus due, from the queue index (ms) and from a
//	          consumer's clock (ns), against Go runtime timers
//	herd      1 M messages due at the same millisecond, with the default
//	          dispatch rate and unbounded
//	produce   64 producers calling Send with 1 KiB bodies for 10 s, against a
//	          raw append+fdatasync loop with the engine's average batch
//
// Usage:
//
//	go run ./benchmarks/enginebench -scenario pending -n 10000000 -dir /some/dir -keep
//	go run ./benchmarks/enginebench -scenario restart -dir /some/dir
//
// Without -dir a temporary directory is used and removed afterwards.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
)

// config holds the flags of all scenarios.
type config struct {
	scenario   string
	dir        string
	keep       bool
	cpuprofile string
	mutexprof  string
	tracefile  string

	n       int           // pending: messages
	batch   int           // messages per SendBatch
	senders int           // concurrent SendBatch callers
	horizon time.Duration // pending and preload: due times spread over this
	offset  time.Duration // pending and preload: earliest due time from now

	preload int           // lateness: pending messages sent first
	rate    int           // lateness: messages falling due per second
	window  time.Duration // lateness: how long they fall due
	lead    time.Duration // lateness: how long before its due time a batch is sent
	presend bool          // lateness: send the whole window before it starts
	settle  bool          // lateness: wait for a checkpoint after the preload
	bgRate  int           // lateness: far-future sends per second during the window

	herd     int           // herd: messages due at one instant
	herdLead time.Duration // herd: the instant is this long after sending starts
	probe    int           // herd: probe messages per second in another topic

	producers int           // produce: concurrent Send callers
	duration  time.Duration // produce: how long they send
	body      int           // produce: body bytes
	delay     time.Duration // produce: delay of each message

	marker   time.Duration // restart: the reopen starts this long after the markers are sent
	crashFor time.Duration // restart: the kill -9 child is killed this long after its first ack
}

func main() {
	var c config
	flag.StringVar(&c.scenario, "scenario", "", "pending, restart, lateness, herd or produce")
	flag.StringVar(&c.dir, "dir", "", "data directory (default: a temporary one, removed afterwards)")
	flag.BoolVar(&c.keep, "keep", false, "keep the data directory (for a later -scenario restart)")
	flag.StringVar(&c.cpuprofile, "cpuprofile", "", "write a CPU profile of the scenario to this file")
	flag.StringVar(&c.mutexprof, "mutexprofile", "", "write a mutex contention profile (who held the locks others waited for) to this file")
	flag.StringVar(&c.tracefile, "trace", "", "write a runtime execution trace of the scenario to this file (large)")
	flag.IntVar(&c.n, "n", 10_000_000, "pending: messages")
	flag.IntVar(&c.batch, "batch", 1000, "messages per SendBatch (pending, lateness, herd)")
	flag.IntVar(&c.senders, "senders", 1, "concurrent SendBatch callers (pending, lateness preload, herd)")
	flag.DurationVar(&c.horizon, "horizon", 30*24*time.Hour, "due times of pending messages are spread over this")
	flag.DurationVar(&c.offset, "offset", time.Hour, "pending messages are due no earlier than this from now")
	flag.IntVar(&c.preload, "preload", 1_000_000, "lateness: pending messages sent before the window")
	flag.IntVar(&c.rate, "rate", 20_000, "lateness: messages falling due per second")
	flag.DurationVar(&c.window, "window", 30*time.Second, "lateness: how long messages fall due at -rate")
	flag.DurationVar(&c.lead, "lead", time.Second, "lateness: a batch is sent this long before its first due time")
	flag.BoolVar(&c.presend, "presend", false, "lateness: send the whole window before it starts instead of overlapping")
	flag.BoolVar(&c.settle, "settle", true, "lateness: start the window only after a checkpoint that began after the preload has finished")
	flag.IntVar(&c.bgRate, "bg-rate", 0, "lateness: far-future messages per second sent during the window (spread like the preload)")
	flag.IntVar(&c.herd, "herd", 1_000_000, "herd: messages due at one instant")
	flag.DurationVar(&c.herdLead, "herd-lead", 15*time.Second, "herd: the instant is this long after sending starts")
	flag.IntVar(&c.probe, "probe-rate", 100, "herd: probe messages per second in another topic, due from the end of sending to 15 s after the herd instant (0: none)")
	flag.IntVar(&c.producers, "producers", 64, "produce: concurrent Send callers")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "produce: how long to send")
	flag.IntVar(&c.body, "body", 1024, "produce: body bytes")
	flag.DurationVar(&c.delay, "delay", time.Hour, "produce: delay of each message")
	flag.DurationVar(&c.marker, "marker", 30*time.Second, "restart: the reopen starts this long after the markers are sent")
	flag.DurationVar(&c.crashFor, "crash-for", 4*time.Second, "restart: kill -9 the sending child this long after its first acknowledged batch (0: skip the kill -9 phase)")
	flag.Parse()

	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "enginebench:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	scenarios := map[string]func(config, string) (*report, error){
		"pending":  runPending,
		"restart":  runRestart,
		"lateness": runLateness,
		"herd":     runHerd,
		"produce":  runProduce,
		// The child process of restart's kill -9 phase; not for direct use.
		"crashchild": runCrashChild,
	}
	fn := scenarios[c.scenario]
	if fn == nil {
		return fmt.Errorf("unknown -scenario %q; want pending, restart, lateness, herd or produce", c.scenario)
	}
	dir, cleanup, err := dataDir(c)
	if err != nil {
		return err
	}
	defer cleanup()
	if c.cpuprofile != "" {
		f, err := os.Create(c.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if c.mutexprof != "" {
		runtime.SetMutexProfileFraction(1)
		defer func() {
			if f, err := os.Create(c.mutexprof); err == nil {
				pprof.Lookup("mutex").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	if c.tracefile != "" {
		f, err := os.Create(c.tracefile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return err
		}
		defer trace.Stop()
	}
	r, err := fn(c, dir)
	if r != nil {
		r.print(os.Stdout)
	}
	return err
}

// dataDir returns the scenario's data directory. restart needs an existing
// one; the others need a new or empty one.
func dataDir(c config) (string, func(), error) {
	if c.dir == "" {
		if c.scenario == "restart" || c.scenario == "crashchild" {
			return "", nil, errors.New("restart needs -dir: the directory a pending run left with -keep")
		}
		d, err := os.MkdirTemp("", "enginebench-")
		if err != nil {
			return "", nil, err
		}
		if c.keep {
			fmt.Fprintln(os.Stderr, "data directory kept at", d)
			return d, func() {}, nil
		}
		return d, func() { os.RemoveAll(d) }, nil
	}
	names, err := os.ReadDir(c.dir)
	reuse := c.scenario == "restart" || c.scenario == "crashchild"
	switch {
	case reuse && err != nil:
		return "", nil, fmt.Errorf("%s: %w", c.scenario, err)
	case !reuse && err == nil && len(names) > 0:
		return "", nil, fmt.Errorf("-dir %s is not empty; scenario %s needs a new directory", c.dir, c.scenario)
	case !reuse && err != nil && !errors.Is(err, os.ErrNotExist):
		return "", nil, err
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return "", nil, err
	}
	if c.keep || reuse {
		return c.dir, func() {}, nil
	}
	return c.dir, func() { os.RemoveAll(c.dir) }, nil
}

// engineOptions are the defaults on dir (vfs.OS, sync flush, real clock)
// with logs at warning level and above.
func engineOptions(dir string) engine.Options {
	return engine.Options{
		Dir:    dir,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

// progress prints a line to stderr at most every 10 s.
type progress struct {
	last time.Time
}

func (p *progress) print(format string, args ...any) {
	if time.Since(p.last) < 10*time.Second {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{p.last.Format("15:04:05")}, args...)...)
}

var bg = context.Background()
