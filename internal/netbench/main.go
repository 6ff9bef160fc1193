// Command netbench measures what the network costs a producer and a
// consumer: each operation runs in-process on an engine and through a
// broker's network API, in the same run, on the same disk, and the ratio
// of the two is reported (issue 31). Pairs:
//
//	send      Send, one message per call, -producers callers (64), against
//	          HTTP one message per request from as many producers (client)
//	sendstream
//	          the same baseline, against the -producers producers sharing
//	          one HTTP send stream (client.SendStream), one message a Send
//	batch     SendBatch of -batch (100) from -batch-producers (8) callers,
//	          against HTTP batches of the same size from as many producers
//	rmqsend   Send at -rmq-senders (32) callers, against the official
//	          RocketMQ 5 Go client's Producer.Send from as many goroutines
//	          sharing -rmq-producers (4) producers (the adapter's gRPC)
//	recv      Receive of up to -max (32) carrying the previous acks, at
//	          -consumers (8) callers, against HTTP receive requests that
//	          carry their acks (client.Receive)
//	stream    the same baseline, against HTTP streams (client.Stream)
//	rmqrecv   the same baseline, against the official RocketMQ 5 Go
//	          SimpleConsumer: -consumers receivers of -max, acks one
//	          message per call from as many ackers (the client's only way)
//	httpfloor the send pair's network side against the transport alone:
//	          a bare net/http client and server (floor.go) moving the
//	          same request and answer, -producers callers
//	h2cfloor  that bare HTTP/1.1 floor against the same over HTTP/2
//	          cleartext: whether h2c would raise the floor
//	grpcfloor rmqsend's network side against a bare gRPC server that
//	          answers SendMessage at once (floor_grpc.go), called by
//	          -rmq-senders goroutines on -rmq-producers connections
//	ackfloor  rmqrecv's network side against the same server's AckMessage
//	          of one entry, -consumers callers on one connection: the
//	          official client acks one message a call
//
// The floor pairs' baseline is the transport alone, with nothing of
// hourglass on either side; the others' is the engine in process. Every
// side also reports the cores the process used meanwhile: a side well
// under the machine's cores waits on something other than the CPU.
//
// Send pairs run for -duration each; receive pairs drain -n messages
// made visible beforehand (not timed). Every pair runs in-process first
// on odd runs and second on even runs, so that a slow minute on this
// shared machine falls on both sides across runs. Bodies are 256 B; sends
// are delayed -delay (far future), as producers of a delay queue send.
//
// The broker is broker.Run in this process on loopback, with its
// defaults (sync flush: every acknowledgement after fdatasync), its HTTP
// API and its RocketMQ 5 gRPC service (plaintext unless -grpc-tls); the
// in-process engine is opened with the same options on another directory
// of the same filesystem.
//
// Usage:
//
//	go run ./internal/netbench -runs 3
//	go run ./internal/netbench -runs 1 -only send -cpuprofile cpu.out -memprofile mem.out
//	go run ./internal/netbench -runs 1 -only rmqsend -blockprofile block.out
//	go run ./internal/netbench -runs 3 -only rmqrecv -grpc-early-acks
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

// config holds the flags.
type config struct {
	runs           int
	duration       time.Duration
	producers      int
	batch          int
	batchProducers int
	rmqSenders     int
	rmqProducers   int
	consumers      int
	max            int
	n              int
	delay          time.Duration
	body           int
	only           []string
	dir            string
	grpcTLS        bool
	earlyAcks      bool
	cpuprofile     string
	memprofile     string
	blockprofile   string
}

// pairNames are the pairs in the order they run.
var pairNames = []string{"send", "sendstream", "batch", "rmqsend", "recv", "stream", "rmqrecv", "httpfloor", "h2cfloor", "grpcfloor", "ackfloor"}

func parseFlags() config {
	var c config
	flag.IntVar(&c.runs, "runs", 3, "runs of every pair")
	flag.DurationVar(&c.duration, "duration", 5*time.Second, "how long each side of a send pair sends")
	flag.IntVar(&c.producers, "producers", 64, "send: concurrent callers, one message per call")
	flag.IntVar(&c.batch, "batch", 100, "batch: messages per batch")
	flag.IntVar(&c.batchProducers, "batch-producers", 8, "batch: concurrent callers")
	flag.IntVar(&c.rmqSenders, "rmq-senders", 32, "rmqsend: concurrent senders (and in-process callers)")
	flag.IntVar(&c.rmqProducers, "rmq-producers", 4, "rmqsend: RocketMQ producer clients the senders share")
	flag.IntVar(&c.consumers, "consumers", 8, "receive pairs: concurrent consumers")
	flag.IntVar(&c.max, "max", 32, "receive pairs: most messages a receive")
	flag.IntVar(&c.n, "n", 40000, "receive pairs: messages drained by each side")
	flag.DurationVar(&c.delay, "delay", time.Hour, "send pairs: delay of every message")
	flag.IntVar(&c.body, "body", 256, "body bytes")
	only := flag.String("only", "", "comma-separated pairs to run (default all): "+strings.Join(pairNames, ","))
	flag.StringVar(&c.dir, "dir", "", "parent of the data directories (default: the temporary directory)")
	flag.BoolVar(&c.grpcTLS, "grpc-tls", false, "serve and use the RocketMQ gRPC service over TLS (the official client's default)")
	flag.BoolVar(&c.earlyAcks, "grpc-early-acks", false, "the broker answers RocketMQ acks before their fdatasync (serve -grpc-early-acks)")
	flag.StringVar(&c.cpuprofile, "cpuprofile", "", "CPU profile of the network sides only, to this file")
	flag.StringVar(&c.memprofile, "memprofile", "", "allocation profile (all allocations of the process) to this file at the end")
	flag.StringVar(&c.blockprofile, "blockprofile", "", "blocking profile (where goroutines waited, the whole run) to this file at the end: the sides that wait more than they compute")
	flag.Parse()
	c.only = slices.Clone(pairNames)
	if *only != "" {
		c.only = strings.Split(*only, ",")
		for _, p := range c.only {
			if !slices.Contains(pairNames, p) {
				fmt.Fprintf(os.Stderr, "netbench: unknown pair %q (pairs: %s)\n", p, strings.Join(pairNames, ","))
				os.Exit(2)
			}
		}
	}
	if c.runs < 1 || c.producers < 1 || c.batch < 1 || c.batchProducers < 1 || c.rmqSenders < 1 || c.rmqProducers < 1 ||
		c.consumers < 1 || c.max < 1 || c.n < 1 || c.body < 1 || c.duration <= 0 {
		fmt.Fprintln(os.Stderr, "netbench: -runs, -producers, -batch, -batch-producers, -rmq-senders, -rmq-producers, -consumers, -max, -n, -body and -duration must be positive")
		os.Exit(2)
	}
	return c
}

func main() {
	c := parseFlags()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "netbench:", err)
		os.Exit(1)
	}
}

// sample is one run of one pair.
type sample struct {
	base, net           float64 // msgs/s
	baseCores, netCores float64 // cores the process used during each side
	load                string  // 1-minute load average when the pair started
}

func run(c config) error {
	dir, err := os.MkdirTemp(c.dir, "netbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	lab, err := openLab(c, dir, quiet)
	if err != nil {
		return err
	}
	defer lab.close()
	if c.cpuprofile != "" {
		f, err := os.Create(c.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		lab.profile = f
	}
	if c.blockprofile != "" {
		runtime.SetBlockProfileRate(int(10 * time.Microsecond))
	}
	results := map[string][]sample{}
	start := time.Now()
	for r := 1; r <= c.runs; r++ {
		for _, name := range c.only {
			s, err := lab.pair(name, r)
			if err != nil {
				return fmt.Errorf("run %d, %s: %w", r, name, err)
			}
			fmt.Fprintf(os.Stderr, "run %d %-9s baseline %9.0f msgs/s (%.2f cores), network %9.0f msgs/s (%.2f cores), ratio %.2f (load %s)\n",
				r, name, s.base, s.baseCores, s.net, s.netCores, s.net/s.base, s.load)
			results[name] = append(results[name], s)
		}
	}
	if c.memprofile != "" {
		f, err := os.Create(c.memprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		runtime.GC()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			return err
		}
	}
	if c.blockprofile != "" {
		if err := writeProfile("block", c.blockprofile); err != nil {
			return err
		}
	}
	printReport(os.Stdout, c, results, time.Since(start))
	return nil
}

// writeProfile writes the named runtime profile to file.
func writeProfile(name, file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup(name).WriteTo(f, 0)
}

// pair runs one pair once: in-process first on odd runs, second on even.
func (l *lab) pair(name string, run int) (sample, error) {
	s := sample{load: loadAvg()}
	base, netw := l.sides(name)
	runNet := func() (err error) {
		s.net, s.netCores, err = metered(func() (float64, error) { return l.profiled(netw) })
		return err
	}
	runBase := func() (err error) {
		s.base, s.baseCores, err = metered(base)
		return err
	}
	var err error
	if run%2 == 1 {
		if err = runBase(); err == nil {
			err = runNet()
		}
	} else {
		if err = runNet(); err == nil {
			err = runBase()
		}
	}
	return s, err
}

// profiled runs f under the CPU profile, if one is asked for.
func (l *lab) profiled(f func() (float64, error)) (float64, error) {
	if l.profile == nil {
		return f()
	}
	if err := pprof.StartCPUProfile(l.profile); err == nil {
		defer pprof.StopCPUProfile()
		l.profile = nil // one profile per file: the first network side
	}
	return f()
}

// metered runs one side and returns its rate and the cores the whole
// process used meanwhile (user and system time over wall time): a side
// that leaves the machine idle waits on something other than the CPU.
func metered(f func() (float64, error)) (rate, cores float64, err error) {
	c0, t0 := processCPU(), time.Now()
	rate, err = f()
	return rate, (processCPU() - c0).Seconds() / time.Since(t0).Seconds(), err
}

// processCPU is the user and system time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAvg is the 1-minute load average, as text.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	first, _, _ := strings.Cut(string(b), " ")
	return first
}

// withTimeout is a context for one side of a pair.
func withTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
