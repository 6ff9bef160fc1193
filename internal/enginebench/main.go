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
//	open      open an existing directory once as it is (a copy of one a
//	          kill -9 left): Open's wall and CPU time, the log replayed
//	lateness  1 M pending plus 20,000 messages/s falling due for 30 s:
//	          visible minus due, from the queue index (ms) and from a
//	          consumer's clock (ns), against Go runtime timers
//	grouplateness
//	          like lateness, but the window's messages are far-future when
//	          sent (they go to the timer index on disk and are loaded before and
//	          during the window), and lateness is measured at goroutines
//	          calling Receive and Ack on a consumer group
//	rss       RSS of a real broker process (hourglass serve, -binary)
//	          holding N far-future pending messages sent over HTTP, minus
//	          its RSS empty, per message; -cancel-frac 0.1 cancels 10%
//	drill     SIGKILLs of a real broker (-binary) while producers send and
//	          consumers receive and ack over HTTP without retries: per
//	          kill, the requests in doubt and what became of them
//	herd      1 M messages due at the same millisecond, with the default
//	          dispatch rate and unbounded
//	backup    -n pending messages, then -rounds rounds of a -producers Send
//	          load for -duration (baseline) and the same load while Backup
//	          writes a copy: duration, pause, disk, send latency vs baseline
//	pause     -preload pending, then -rate single Sends a second (each due
//	          -lead later, so -rate a second fall due) for -window, with no
//	          checkpoint in the window and with one every second: Send
//	          latency p99.9 and max against that baseline
//	rawpause  the independent baseline of pause: a plain group-commit
//	          loop (append + fdatasync, no engine) at -rate from
//	          -producers goroutines, alone and while a writer makes
//	          -ckpt-bytes in -ckpt-files files durable every second by
//	          fdatasync per file, by syncfs, or paced by sync_file_range
//	produce   64 producers calling Send with 1 KiB bodies for 10 s, against
//	          the best rate of raw append+fdatasync loops at the same
//	          concurrency over a sweep of batch sizes (1 to 4096 records)
//	browse    -n pending messages (and 100,000 on a second engine, the
//	          baseline): the time and the reads of pages of the pending
//	          listing (engine.Browser), first pages, pages from random due
//	          times, of 50 and 500, and a filter that matches nothing
//
// Usage:
//
//	go run ./internal/enginebench -scenario pending -n 10000000 -dir /some/dir -keep
//	go run ./internal/enginebench -scenario restart -dir /some/dir
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
	"strconv"
	"strings"
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

	sendFor time.Duration // grouplateness: sending must end within this

	binary   string // rss, drill: the hourglass binary to run as the broker
	rssMarks []int  // rss: pending counts at which RSS is read

	kills      int           // drill: SIGKILLs
	upMin      time.Duration // drill: least uptime before a kill (at most twice this)
	downtime   time.Duration // drill: how long the broker stays down
	cancelFrac float64       // rss: share of the messages cancelled at the end
	consumers  int           // grouplateness: Receive+Ack goroutines

	herd     int           // herd: messages due at one instant
	herdLead time.Duration // herd: the instant is this long after sending starts
	probe    int           // herd: probe messages per second in another topic
	rates    []int         // herd: the DispatchRate of each run (0: the default)

	producers     int           // produce: concurrent Send callers
	duration      time.Duration // produce: how long they send
	body          int           // produce: body bytes
	delay         time.Duration // produce: delay of each message
	rawDuration   time.Duration // produce: how long each batch size of the raw and engine sweeps runs
	engineBatches []int         // produce: SendBatch sizes of the engine sweep

	marker     time.Duration // restart: the reopen starts this long after the markers are sent
	crashFor   time.Duration // restart: the kill -9 child is killed this long after its first ack
	dropCaches bool          // restart: empty the page cache before every Open
	childCkpt  int64         // restart: the kill -9 child's Options.CheckpointBytes

	inspectSamples int    // pending: InspectKey calls timed after sending (0: none)
	memprofile     string // pending: heap profile written after sending
	allocprofile   string // grouplateness: allocation profiles at the window's start and end

	rounds int // backup: rounds of baseline load, then load during a backup

	ckptBytes int      // rawpause: bytes the checkpoint-like writer makes durable a second
	ckptModes []string // rawpause: the ways the writer makes its files durable
	ckptFiles int      // rawpause: in this many files
}

// defineFlags binds the flags to c; marks and batches are parsed after.
func defineFlags(c *config) (marks, batches *string) {
	flag.StringVar(&c.scenario, "scenario", "", "pending, restart, lateness, herd or produce")
	flag.StringVar(&c.dir, "dir", "", "data directory (default: a temporary one, removed afterwards)")
	flag.BoolVar(&c.keep, "keep", false, "keep the data directory (for a later -scenario restart)")
	flag.StringVar(&c.cpuprofile, "cpuprofile", "", "write a CPU profile of the scenario to this file")
	flag.StringVar(&c.mutexprof, "mutexprofile", "", "write a mutex contention profile (who held the locks others waited for) to this file")
	flag.StringVar(&c.tracefile, "trace", "", "write a runtime execution trace of the scenario (grouplateness: of its window) to this file (large)")
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
	flag.DurationVar(&c.sendFor, "send-for", time.Minute, "grouplateness: the window is placed so that its messages are far-future if sending ends within this")
	flag.IntVar(&c.consumers, "consumers", 4, "grouplateness: consumer goroutines calling Receive and Ack")
	flag.IntVar(&c.herd, "herd", 1_000_000, "herd: messages due at one instant")
	flag.DurationVar(&c.herdLead, "herd-lead", 15*time.Second, "herd: the instant is this long after sending starts")
	flag.Func("rates", "herd: comma-separated DispatchRate values, one fresh engine each; 0 is the engine's default, -1 unbounded (default 0,-1)", func(v string) error {
		c.rates = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return fmt.Errorf("rate %q: %w", f, err)
			}
			c.rates = append(c.rates, n)
		}
		return nil
	})
	flag.IntVar(&c.probe, "probe-rate", 100, "herd: probe messages per second in another topic, due from the end of sending to 15 s after the herd instant (0: none)")
	flag.IntVar(&c.producers, "producers", 64, "produce: concurrent Send callers")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "produce: how long to send")
	flag.IntVar(&c.body, "body", 1024, "produce: body bytes")
	flag.DurationVar(&c.rawDuration, "raw-duration", 3*time.Second, "produce: how long each batch size of the raw append+fdatasync sweep runs")
	flag.DurationVar(&c.delay, "delay", time.Hour, "produce: delay of each message")
	flag.DurationVar(&c.marker, "marker", 30*time.Second, "restart: the reopen starts this long after the markers are sent")
	flag.DurationVar(&c.crashFor, "crash-for", 4*time.Second, "restart: kill -9 the sending child this long after its first acknowledged batch (0: skip the kill -9 phase)")
	flag.StringVar(&c.binary, "binary", "", "rss, drill: path of a built hourglass binary, run as the broker process")
	flag.IntVar(&c.kills, "kills", 5, "drill: SIGKILLs of the broker")
	flag.DurationVar(&c.upMin, "up-min", 2*time.Second, "drill: the broker runs between this and twice this before each kill")
	flag.DurationVar(&c.downtime, "downtime", time.Second, "drill: how long the broker stays down after a kill")
	flag.Float64Var(&c.cancelFrac, "cancel-frac", 0, "rss: share of the messages cancelled by ID after sending (0.1: every 10th)")
	marks = flag.String("rss-at", "", "rss: comma-separated pending counts at which RSS is also read (e.g. 1000000), besides -n")
	batches = flag.String("engine-batches", "8,64,512", "produce: SendBatch sizes of the engine sweep, comma-separated (the engine's MaxBatch is 1,000)")
	flag.StringVar(&c.allocprofile, "allocprofile", "", "grouplateness: write the allocation profile to FILE.start when the window starts and to FILE.end when it ends; go tool pprof -sample_index=alloc_space -base FILE.start BINARY FILE.end shows what the window allocated")
	flag.StringVar(&c.memprofile, "memprofile", "", "pending: write a heap profile (live objects after a GC) to this file once everything is sent")
	flag.IntVar(&c.inspectSamples, "inspect-samples", 10_000, "pending: InspectKey calls of random keys timed after sending, against as many random 64 B preads of the commit log (with -drop-caches also with the page cache emptied first)")
	flag.Int64Var(&c.childCkpt, "checkpoint-bytes", 0, "restart: Options.CheckpointBytes of the kill -9 child (0: the engine's default, negative: only the interval)")
	flag.BoolVar(&c.dropCaches, "drop-caches", false, "restart: sync and empty the page cache (echo 3 > /proc/sys/vm/drop_caches, needs root) before every Open: a cold start")
	flag.IntVar(&c.rounds, "rounds", 3, "backup: rounds of a baseline load, then the same load while a backup runs")
	flag.IntVar(&c.ckptBytes, "ckpt-bytes", 8<<20, "rawpause: bytes the checkpoint-like writer writes and makes durable every second")
	flag.IntVar(&c.ckptFiles, "ckpt-files", 16, "rawpause: the number of files they are spread over")
	c.ckptModes = []string{ckFsync, ckSyncfs, ckPaced, ckPacedSyncfs}
	flag.Func("ckpt-modes", "rawpause: comma-separated ways the writer makes its files durable: fsync, syncfs, paced, paced+syncfs (default all four)", func(v string) error {
		c.ckptModes = nil
		for _, m := range strings.Split(v, ",") {
			m = strings.TrimSpace(m)
			if m != ckFsync && m != ckSyncfs && m != ckPaced && m != ckPacedSyncfs {
				return fmt.Errorf("unknown mode %q", m)
			}
			c.ckptModes = append(c.ckptModes, m)
		}
		return nil
	})
	return marks, batches
}

func main() {
	var c config
	marks, batches := defineFlags(&c)
	flag.Parse()
	if c.rates == nil {
		c.rates = []int{0, -1}
	}
	for _, f := range strings.Split(*marks, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 && n < c.n {
			c.rssMarks = append(c.rssMarks, n)
		}
	}
	for _, f := range strings.Split(*batches, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		b, err := strconv.Atoi(f)
		if err != nil || b < 2 {
			fmt.Fprintln(os.Stderr, "enginebench: -engine-batches: want sizes of 2 or more, got", f)
			os.Exit(2)
		}
		c.engineBatches = append(c.engineBatches, b)
	}

	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "enginebench:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	scenarios := map[string]func(config, string) (*report, error){
		"pending":       runPending,
		"restart":       runRestart,
		"lateness":      runLateness,
		"herd":          runHerd,
		"produce":       runProduce,
		"grouplateness": runGroupLateness,
		"rss":           runRSS,
		"drill":         runDrill,
		"backup":        runBackup,
		"pause":         runPause,
		"rawpause":      runRawPause,
		"browse":        runBrowse,
		"open":          runOpen,
		// The child process of restart's kill -9 phase; not for direct use.
		"crashchild": runCrashChild,
	}
	fn := scenarios[c.scenario]
	if fn == nil {
		return fmt.Errorf("unknown -scenario %q; want pending, restart, open, lateness, grouplateness, rss, drill, herd, produce or browse", c.scenario)
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
	if c.tracefile != "" && c.scenario != "grouplateness" { // grouplateness traces its window (windowTrace)
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
		if c.scenario == "restart" || c.scenario == "crashchild" || c.scenario == "open" {
			return "", nil, errors.New(c.scenario + " needs -dir: the directory a pending run left with -keep")
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
	reuse := c.scenario == "restart" || c.scenario == "crashchild" || c.scenario == "open"
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
// and logs at warning level and above.
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
