package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/kafkamode/kafkabench"
)

// The pending benchmark (-pending N) measures a worker's memory per
// pending message far from due: it produces N messages due -due-in ahead
// to a delay topic once, then, for each run and each binary (-compare,
// then -hourglass, alternating), starts a worker on an empty delay topic
// (its RSS is the empty worker's), and another on the loaded topic, waits
// until it has read all N and written a snapshot of them, lets it settle,
// and reads its RSS (VmRSS) and its Go heap in use (from its metrics).
// The figure per message is (loaded RSS - empty RSS) / N. RSS keeps the
// peak of reading (fetch buffers) and of the last snapshot until the Go
// runtime returns the pages, so the workers also run with
// GODEBUG=gctrace=1 and the live heap per message is (the live heap
// after the first collection at least 15 s after all was read - the empty
// worker's) / N: what the index itself keeps. The floor is a plain Go slice of N (due,
// offset) pairs, measured in this process.

// pendingFigures is one worker's measurement.
type pendingFigures struct {
	load                  string  // /proc/loadavg's first three fields at the start
	emptyMiB, loadedMiB   float64 // VmRSS
	heapMiB               float64 // go_memstats_heap_inuse_bytes when loaded
	perMsgRSS, perMsgHeap float64 // bytes per pending message
	// emptyLive and loadedLive are the live heap after a collection
	// (GODEBUG=gctrace=1, MB): the empty worker's last one, and the
	// loaded worker's first one at least 15 s after it read everything;
	// perMsgLive is their difference per message (NaN: none within 150 s).
	emptyLive, loadedLive, perMsgLive float64
	readIn                            time.Duration
}

func runPending(c config) int {
	ctx := context.Background()
	var rb [3]byte
	_, _ = rand.Read(rb[:])
	prefix := "kp-" + hex.EncodeToString(rb[:])
	cl, err := kgo.NewClient(kafkabench.Seeds(c.brokers), kgo.ProducerLinger(10*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		fatalf("%v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, t := range []string{prefix + ".delay", prefix + ".empty"} {
		if _, err := adm.CreateTopic(ctx, kafkabench.DelayPartitions, int16(c.repl), nil, t); err != nil {
			fatalf("create %s: %v", t, err)
		}
	}
	began := time.Now()
	if err := producePending(ctx, cl, prefix, c); err != nil {
		fatalf("produce: %v", err)
	}
	fmt.Printf("produced %d messages due in %v (body %d B) in %v\n", c.pending, c.dueIn, c.body, time.Since(began).Round(time.Millisecond))
	fmt.Printf("floor: a Go slice of %d (due, offset) int64 pairs: %.1f B per message\n", c.pending, sliceFloor(c.pending))
	bins := []string{c.compare, c.hourglass}
	names := []string{"baseline", "this build"}
	res := map[string][]pendingFigures{}
	for run := 1; run <= c.runs; run++ {
		for i, bin := range bins {
			f, err := pendingRun(c, bin, prefix, fmt.Sprintf("%d-%d", run, i))
			if err != nil {
				fatalf("%s run %d: %v", names[i], run, err)
			}
			fmt.Printf("%s run %d: load %s; empty worker %.1f MiB, loaded %.1f MiB RSS (heap in use %.1f MiB; live after GC %.0f -> %.0f MB), read in %v: %.1f B RSS, %.1f B heap in use, %.1f B live heap per pending message\n",
				names[i], run, f.load, f.emptyMiB, f.loadedMiB, f.heapMiB, f.emptyLive, f.loadedLive, f.readIn.Round(time.Millisecond),
				f.perMsgRSS, f.perMsgHeap, f.perMsgLive)
			res[names[i]] = append(res[names[i]], f)
		}
	}
	var med [2]float64
	for i, n := range names {
		rss := pendingMedian(res[n], func(f pendingFigures) float64 { return f.perMsgRSS })
		heap := pendingMedian(res[n], func(f pendingFigures) float64 { return f.perMsgHeap })
		live := pendingMedian(res[n], func(f pendingFigures) float64 { return f.perMsgLive })
		med[i] = rss[0]
		fmt.Printf("%s: median (range) over %d runs per pending message: %.1f (%.1f-%.1f) B RSS, %.1f (%.1f-%.1f) B heap in use, %.1f (%.1f-%.1f) B live heap\n",
			n, c.runs, rss[0], rss[1], rss[2], heap[0], heap[1], heap[2], live[0], live[1], live[2])
	}
	if med[0] > 0 {
		fmt.Printf("ratio this build / baseline (median RSS per message): %.3f\n", med[1]/med[0])
	}
	return 0
}

// pendingMedian returns the median, min and max of get over fs.
func pendingMedian(fs []pendingFigures, get func(pendingFigures) float64) [3]float64 {
	v := make([]float64, len(fs))
	for i, f := range fs {
		v[i] = get(f)
	}
	sort.Float64s(v)
	return [3]float64{v[len(v)/2], v[0], v[len(v)-1]}
}

// producePending produces c.pending messages due c.dueIn from now.
func producePending(ctx context.Context, cl *kgo.Client, prefix string, c config) error {
	due := strconv.FormatInt(time.Now().Add(c.dueIn).UnixMilli(), 10)
	body := make([]byte, c.body)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range c.pending {
		r := &kgo.Record{Topic: prefix + ".delay", Key: []byte("k" + strconv.Itoa(i)), Value: body,
			Headers: []kgo.RecordHeader{{Key: "_deliverAt", Value: []byte(due)}, {Key: "_bizTopic", Value: []byte(prefix + ".biz")}}}
		wg.Add(1)
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				first = cmp(first, err)
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	return first
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// sliceFloor is the heap a []struct{due, offset int64} of n takes, per
// element (what was allocated for it: HeapAlloc may fall meanwhile, as
// the collector frees earlier garbage).
func sliceFloor(n int) float64 {
	type pair struct{ due, offset int64 }
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := make([]pair, n)
	for i := range s {
		s[i] = pair{int64(i), int64(i)}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(n)
}

// pendingRun measures one binary: the empty worker, then the loaded one.
func pendingRun(c config, bin, prefix, tag string) (pendingFigures, error) {
	var f pendingFigures
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f.load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	empty, err := startPendingWorker(bin, c, prefix+".empty", tag)
	if err != nil {
		return f, err
	}
	if err := empty.waitFor(func(m map[string]float64) bool {
		return m[`hourglass_kafka_rebalance_partitions_total{event="assigned"}`] > 0
	}, 2*time.Minute); err != nil {
		empty.ch.Stop(syscall.SIGKILL)
		return f, fmt.Errorf("empty worker: %w", err)
	}
	time.Sleep(5 * time.Second) // settle: the same wait as the loaded one's after its snapshot
	f.emptyMiB = empty.ch.StatusMiB("VmRSS:")
	if lives := empty.gcLive(0); len(lives) > 0 {
		f.emptyLive = lives[len(lives)-1]
	}
	empty.ch.Stop(syscall.SIGTERM)

	w, err := startPendingWorker(bin, c, prefix+".delay", tag)
	if err != nil {
		return f, err
	}
	defer w.ch.Stop(syscall.SIGTERM)
	start := time.Now()
	n := float64(c.pending)
	if err := w.waitFor(func(m map[string]float64) bool { return m["hourglass_kafka_records_read_total"] >= n }, 10*time.Minute); err != nil {
		return f, fmt.Errorf("loaded worker: %w", err)
	}
	f.readIn = time.Since(start)
	// Two snapshot intervals (5 s each) and more: every partition has
	// written a snapshot of all it read, so both builds are measured
	// after the same work. Then wait for the next collection (the runtime
	// forces one when two minutes passed without): its live heap is the
	// index at rest, and RSS has had that long to shrink.
	time.Sleep(15 * time.Second)
	mark := len(w.gcLive(0))
	deadline := time.Now().Add(150 * time.Second)
	for len(w.gcLive(mark)) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Second)
	}
	m, err := w.metrics()
	if err != nil {
		return f, err
	}
	f.loadedMiB, f.heapMiB = w.ch.StatusMiB("VmRSS:"), m["go_memstats_heap_inuse_bytes"]/(1<<20)
	f.perMsgRSS = (f.loadedMiB - f.emptyMiB) * (1 << 20) / n
	f.perMsgHeap = m["go_memstats_heap_inuse_bytes"] / n
	f.loadedLive, f.perMsgLive = math.NaN(), math.NaN()
	if lives := w.gcLive(mark); len(lives) > 0 {
		f.loadedLive = lives[len(lives)-1]
		f.perMsgLive = (f.loadedLive - f.emptyLive) * 1e6 / n
	}
	return f, nil
}

// pendingWorker is a worker child with its metrics address and its
// output (the collector's trace among it).
type pendingWorker struct {
	ch   *kafkabench.Child
	addr string
	mu   sync.Mutex
	out  bytes.Buffer
}

func (w *pendingWorker) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.Write(p)
}

// gcLive returns the live heap (MB) after each collection the worker
// traced, from the skip-th on: the third figure of "A->B->C MB".
func (w *pendingWorker) gcLive(skip int) []float64 {
	w.mu.Lock()
	text := w.out.String()
	w.mu.Unlock()
	var out []float64
	n := 0
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "gc ") {
			continue
		}
		if n++; n <= skip {
			continue
		}
		for _, f := range strings.Split(line, ", ") {
			if mb, ok := strings.CutSuffix(f, " MB"); ok && strings.Count(mb, "->") == 2 {
				v, err := strconv.ParseFloat(mb[strings.LastIndex(mb, "->")+2:], 64)
				if err == nil {
					out = append(out, v)
				}
			}
		}
	}
	return out
}

func startPendingWorker(bin string, c config, delay, tag string) (*pendingWorker, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	g := delay + "-" + tag
	w := &pendingWorker{addr: addr}
	cmd := exec.Command(bin, "kafka", "--brokers", c.brokers, "--delay-topic", delay, "--state-topic", g+".state",
		"--dlq-topic", g+".dlq", "--group", g, "--worker-id", "w", "--snapshot-interval", "5s",
		"--metrics-listen", addr, "--log-level", "warn")
	cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1")
	cmd.Stdout, cmd.Stderr = w, w
	if w.ch, err = kafkabench.StartCmd(cmd); err != nil {
		return nil, err
	}
	return w, nil
}

// metrics reads the worker's Prometheus text: series (with labels) to value.
func (w *pendingWorker) metrics() (map[string]float64, error) {
	resp, err := http.Get("http://" + w.addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// waitFor polls the worker's metrics every 200 ms until ok holds.
func (w *pendingWorker) waitFor(ok func(map[string]float64) bool, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		select {
		case <-w.ch.Done():
			return fmt.Errorf("the worker exited")
		default:
		}
		if m, err := w.metrics(); err == nil && ok(m) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("not reached within %v", within)
}
