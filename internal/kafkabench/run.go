package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	bizPartitions   = 3
	delayPartitions = 6
)

// levelTopic is scheme C's topic for one delay tier.
func levelTopic(prefix string, tier time.Duration) string {
	return prefix + ".level." + strings.ReplaceAll(tier.String(), ".", "_")
}

// child is a worker process.
type child struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
}

func startChild(name string, args ...string) (*child, error) {
	ch := &child{cmd: exec.Command(name, args...), done: make(chan struct{})}
	ch.cmd.Stdout, ch.cmd.Stderr = &ch.out, &ch.out
	if err := ch.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = ch.cmd.Wait(); close(ch.done) }()
	return ch, nil
}

// peakRSS is VmHWM of the process in MiB.
func (ch *child) peakRSS() float64 { return ch.statusMiB("VmHWM:") }

// statusMiB is a kB field of the process's /proc status (such as
// "VmRSS:") in MiB; 0 when it cannot be read.
func (ch *child) statusMiB(field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", ch.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func (ch *child) stop(sig syscall.Signal) {
	_ = ch.cmd.Process.Signal(sig)
	select {
	case <-ch.done:
	case <-time.After(30 * time.Second):
		_ = ch.cmd.Process.Kill()
		<-ch.done
	}
}

// logBytes is the size of every partition in every log directory.
func logBytes(ctx context.Context, adm *kadm.Client) (int64, error) {
	all, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, dirs := range all {
		n += dirs.Size()
	}
	return n, nil
}

func runOnce(c config, system string, run int) (result, error) {
	var res result
	ctx := context.Background()
	var rb [3]byte
	_, _ = rand.Read(rb[:])
	prefix := fmt.Sprintf("kb-%s-%d-%s", system, run, hex.EncodeToString(rb[:]))
	biz := prefix + ".biz"
	cl, err := kgo.NewClient(seeds(c.brokers), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return res, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	create := func(t string, parts int32, conf map[string]*string) error {
		_, err := adm.CreateTopic(ctx, parts, int16(c.repl), conf, t)
		return err
	}
	if err := create(biz, bizPartitions, nil); err != nil {
		return res, err
	}
	start, err := prepareSystem(c, system, prefix, create)
	if err != nil {
		return res, err
	}
	before, err := logBytes(ctx, adm)
	if err != nil {
		return res, err
	}
	nw := c.workers
	if start == nil {
		nw = 0
	}
	ws := make([]*child, nw)
	defer func() {
		for _, w := range ws {
			if w != nil {
				w.stop(syscall.SIGTERM)
			}
		}
	}()
	for i := range ws {
		if ws[i], err = start(i); err != nil {
			return res, err
		}
	}
	var w *child
	if nw > 0 {
		w = ws[0]
		if err := waitStable(ctx, adm, prefix, c.workers); err != nil {
			return res, fmt.Errorf("%v; worker output:\n%s", err, w.out.String())
		}
	}
	col, err := startCollector(c.brokers, biz)
	if err != nil {
		return res, err
	}
	defer col.close()

	due := produce(ctx, cl, c, system, prefix, biz)
	if err := awaitDelivery(c, col, ws, start); err != nil {
		return res, err
	}
	// A bench, not a test: duplicates are what arrives in a quiet period
	// of 3 s after the last message.
	col.quiet(3 * time.Second)
	for _, w := range ws {
		res.rssMiB = max(res.rssMiB, w.peakRSS())
		w.stop(syscall.SIGTERM)
		if os.Getenv("KAFKABENCH_VERBOSE") != "" {
			fmt.Fprintf(os.Stderr, "worker output:\n%s\n", w.out.String())
		}
	}
	after, err := logBytes(ctx, adm)
	if err != nil {
		return res, err
	}
	res.bytesPerMsg = float64(after-before) / float64(c.n)
	col.score(due, c.warmup.Milliseconds(), &res)
	return res, nil
}

// waitStable waits until the worker's group is Stable with n members.
func waitStable(ctx context.Context, adm *kadm.Client, group string, n int) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		gs, err := adm.DescribeGroups(ctx, group)
		if err == nil {
			if g, ok := gs[group]; ok && g.State == "Stable" && len(g.Members) >= n {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("group %s not stable within 60 s", group)
}

// produce writes c.n messages evenly over c.produceIn and returns each
// message's due time (Unix ms) by ID. A message's due time is its record
// timestamp plus its tier, for both systems.
func produce(ctx context.Context, cl *kgo.Client, c config, system, prefix, biz string) map[string]int64 {
	due := make(map[string]int64, c.n)
	tierOf = make(map[string]time.Duration, c.n)
	rng := mrand.New(mrand.NewPCG(1, uint64(time.Now().UnixNano())))
	start := time.Now()
	var wg sync.WaitGroup
	// Produce in steps of about 2 ms, so due times are spread, not bursty.
	step := max(1, int(float64(c.n)*float64(2*time.Millisecond)/float64(c.produceIn)))
	for i := 0; i < c.n; i += step {
		if d := time.Until(start.Add(time.Duration(float64(c.produceIn) * float64(i) / float64(c.n)))); d > 0 {
			time.Sleep(d)
		}
		for j := i; j < i+step && j < c.n; j++ {
			tier := c.tiers[rng.IntN(len(c.tiers))]
			id := fmt.Sprintf("m%07d", j)
			// Random bodies: kgo compresses batches, and a body of
			// zeros would make the bytes-written figure meaningless.
			val := make([]byte, c.body)
			for k := range val {
				val[k] = byte(rng.Uint32())
			}
			copy(val, id+":")
			ts := time.Now()
			r := &kgo.Record{Key: []byte(id), Value: val, Timestamp: ts,
				Headers: []kgo.RecordHeader{{Key: "_bizTopic", Value: []byte(biz)}}}
			if system != "schemec" {
				r.Topic = prefix + ".delay"
				if c.external != "" {
					r.Topic = c.external
				}
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: "_delayMs", Value: []byte(strconv.FormatInt(tier.Milliseconds(), 10))})
			} else {
				r.Topic = levelTopic(prefix, tier)
			}
			due[id] = ts.UnixMilli() + tier.Milliseconds()
			tierOf[id] = tier
			wg.Add(1)
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					fatalf("produce: %v", err)
				}
			})
		}
	}
	wg.Wait()
	return due
}

// tierOf is each message's tier, for the per-tier figures of
// KAFKABENCH_VERBOSE.
var tierOf map[string]time.Duration

// collector reads the business topic (read_committed) and notes when
// each record arrived. Its fetch long-poll is short (collectorFetchWait)
// for both systems alike: a broker answers a parked read_committed fetch
// when the last stable offset moves, but a record that lands just after a
// response was sent waits for the next request, and the lateness measured
// should be the system's, not the measuring consumer's.
type collector struct {
	cl   *kgo.Client
	mu   sync.Mutex
	arr  map[string][]int64 // ID -> arrival times
	last time.Time
	stop context.CancelFunc
	done chan struct{}
}

// collectorFetchWait is the measuring consumer's fetch long-poll.
const collectorFetchWait = 10 * time.Millisecond

func startCollector(brokers, topic string) (*collector, error) {
	cl, err := kgo.NewClient(seeds(brokers), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(collectorFetchWait))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &collector{cl: cl, arr: map[string][]int64{}, stop: cancel, done: make(chan struct{}), last: time.Now()}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			at := time.Now()
			c.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				id := string(r.Key)
				c.arr[id] = append(c.arr[id], at.UnixMilli())
				c.last = at
			})
			c.mu.Unlock()
		}
	}()
	return c, nil
}

func (c *collector) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.arr)
}

// quiet waits until nothing arrived for d.
func (c *collector) quiet(d time.Duration) {
	for {
		c.mu.Lock()
		idle := time.Since(c.last)
		c.mu.Unlock()
		if idle >= d {
			return
		}
		time.Sleep(d - idle)
	}
}

func (c *collector) close() {
	c.stop()
	<-c.done
	c.cl.Close()
}

// score fills the lateness, early, lost and duplicate figures.
func (c *collector) score(due map[string]int64, warmup int64, r *result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var late []int64
	for id, d := range due {
		a := c.arr[id]
		if len(a) == 0 {
			r.lost++
			continue
		}
		r.dup += len(a) - 1
		if a[0] < d {
			r.early++
		}
		late = append(late, a[0]-d)
	}
	if len(late) == 0 {
		return
	}
	if os.Getenv("KAFKABENCH_VERBOSE") != "" {
		byTier := map[time.Duration][]int64{}
		for id, d := range due {
			if a := c.arr[id]; len(a) > 0 {
				byTier[tierOf[id]] = append(byTier[tierOf[id]], a[0]-d)
			}
		}
		for t, l := range byTier {
			sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
			fmt.Fprintf(os.Stderr, "tier %v: p50 %d p99 %d max %d ms\n", t, l[len(l)/2], l[len(l)*99/100], l[len(l)-1])
		}
	}
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	r.p50 = late[len(late)/2]
	r.p99 = late[len(late)*99/100]
	r.max = late[len(late)-1]
	// The warm p99 leaves out the messages due in the first c.warmup of
	// due times: there both systems produce to the business topic for the
	// first time (a metadata lookup) and work off what fell due meanwhile.
	first := int64(-1)
	for _, d := range due {
		if first < 0 || d < first {
			first = d
		}
	}
	var warm []int64
	for id, d := range due {
		if a := c.arr[id]; len(a) > 0 && d >= first+warmup {
			warm = append(warm, a[0]-d)
		}
	}
	if len(warm) > 0 {
		sort.Slice(warm, func(i, j int) bool { return warm[i] < warm[j] })
		r.p99warm = warm[len(warm)*99/100]
	}
}

// logLevel is the worker's: debug with KAFKABENCH_VERBOSE=2.
func logLevel() string {
	if os.Getenv("KAFKABENCH_VERBOSE") == "2" {
		return "debug"
	}
	return "info"
}

// seeds is the client option of the seed brokers in a host:port,...
// list (a soak names every node, so a client starts with one down).
func seeds(list string) kgo.Opt { return kgo.SeedBrokers(strings.Split(list, ",")...) }

// prepareSystem creates the topics the system under test needs beside the
// business topic and returns how to start its i-th worker process; start is
// nil when no worker is to be started (hourglass with external workers).
func prepareSystem(c config, system, prefix string, create func(t string, parts int32, conf map[string]*string) error) (start func(i int) (*child, error), err error) {
	switch system {
	case "floor":
		if err := create(prefix+".delay", delayPartitions, nil); err != nil {
			return nil, err
		}
		start = func(int) (*child, error) {
			args := append(append([]string{}, c.reexec[1:]...), "-role", "floor", "-prefix", prefix, "-brokers", c.brokers)
			return startChild(c.reexec[0], args...)
		}
	case "hourglass", "hourglass-alo":
		if c.external != "" {
			break // workers already run
		}
		compact := "compact"
		for _, t := range []struct {
			name string
			conf map[string]*string
		}{{prefix + ".delay", nil}, {prefix + ".delay.state", map[string]*string{"cleanup.policy": &compact}}, {prefix + ".delay.dlq", nil}} {
			if err := create(t.name, delayPartitions, t.conf); err != nil {
				return nil, err
			}
		}
		delivery := "exactly-once"
		if system == "hourglass-alo" {
			delivery = "at-least-once"
		}
		start = func(i int) (*child, error) {
			return startChild(c.hourglass, "kafka", "--brokers", c.brokers, "--delay-topic", prefix+".delay",
				"--group", prefix, "--worker-id", fmt.Sprintf("w%d", i+1), "--session-timeout", "6s", "--log-level", logLevel(),
				"--delivery", delivery)
		}
	case "schemec":
		for _, tier := range c.tiers {
			if err := create(levelTopic(prefix, tier), delayPartitions, nil); err != nil {
				return nil, err
			}
		}
		tiers := make([]string, len(c.tiers))
		for i, t := range c.tiers {
			tiers[i] = t.String()
		}
		start = func(int) (*child, error) {
			args := append(append([]string{}, c.reexec[1:]...), "-role", "forwarder", "-prefix", prefix, "-brokers", c.brokers, "-tiers", strings.Join(tiers, ","))
			return startChild(c.reexec[0], args...)
		}
	}
	return start, nil
}

// awaitDelivery polls the collector until all c.n messages have arrived or
// the deadline passed. Once half have arrived it kills the first worker
// (-kill, restarting it in ws[0]) and runs -kill-broker's command, once.
func awaitDelivery(c config, col *collector, ws []*child, start func(i int) (*child, error)) error {
	var w *child
	if len(ws) > 0 {
		w = ws[0]
	}
	var err error
	killed := !c.kill && c.killCmd == ""
	deadline := time.Now().Add(c.tiers[len(c.tiers)-1] + c.produceIn + 2*time.Minute)
	for {
		n := col.distinct()
		if !killed && n >= c.n/2 {
			if c.kill {
				w.stop(syscall.SIGKILL)
				if w, err = start(0); err != nil {
					return err
				}
				ws[0] = w
			}
			if c.killCmd != "" {
				if out, err := exec.Command("sh", "-c", c.killCmd).CombinedOutput(); err != nil {
					return fmt.Errorf("-kill-broker: %v\n%s", err, out)
				}
			}
			killed = true
		}
		if n >= c.n || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
