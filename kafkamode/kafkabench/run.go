package kafkabench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

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

// Seeds is the client option of the seed brokers in a host:port,... list
// (a soak names every node, so that a client starts with one down).
func Seeds(list string) kgo.Opt {
	var out []string
	for _, b := range strings.Split(list, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return kgo.SeedBrokers(out...)
}

// delayTopicOf is the topic a run sends its delayed records to: -delay-topic
// when set, else one of the run's own.
func delayTopicOf(c *Config, prefix string) string {
	if c.DelayTopic != "" {
		return c.DelayTopic
	}
	return prefix + ".delay"
}

// runOnce runs one system once on topics of its own and scores it.
func runOnce(ctx context.Context, c *Config, opts Options, sys System, run int, log io.Writer) (res Result, err error) {
	res.LoadStart = loadAvg()
	defer func() { res.LoadEnd = loadAvg() }()
	var rb [3]byte
	_, _ = rand.Read(rb[:])
	prefix := fmt.Sprintf("kb-%s-%d-%s", sys.Name, run, hex.EncodeToString(rb[:]))
	biz := prefix + ".biz"
	cl, err := kgo.NewClient(Seeds(c.Brokers), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return res, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var created []string
	defer func() {
		if err == nil && !c.KeepTopics && len(created) > 0 {
			err = deleteTopics(adm, created)
		}
	}()
	create := func(t string, parts int32, conf map[string]*string) error {
		created = append(created, t)
		resp, err := adm.CreateTopic(ctx, parts, int16(c.Replication), conf, t)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return fmt.Errorf("create topic %s: %w", t, err)
		}
		return nil
	}
	if err := create(biz, bizPartitions, nil); err != nil {
		return res, err
	}
	start, err := sys.Prepare(Env{Config: c, Prefix: prefix, Create: create, Reexec: opts.Reexec})
	if err != nil {
		return res, err
	}
	before, err := logBytes(ctx, adm)
	if err != nil {
		return res, err
	}
	d := &drill{c: c, sys: sys, start: start}
	defer d.stopAll(syscall.SIGTERM, nil)
	if err := d.startAll(ctx, adm, prefix); err != nil {
		return res, err
	}
	col, err := startCollector(c.Brokers, biz)
	if err != nil {
		return res, err
	}
	defer col.close()
	due, err := produce(ctx, cl, c, sys, prefix, delayTopicOf(c, prefix), biz)
	if err != nil {
		return res, err
	}
	killAt, err := d.await(ctx, col)
	if err != nil {
		return res, err
	}
	if log != nil && os.Getenv("KAFKABENCH_VERBOSE") != "" && !killAt.IsZero() {
		fmt.Fprintf(log, "killed at %s\n", killAt.UTC().Format("15:04:05.000"))
	}
	// Duplicates are what arrives until nothing has for 3 s after the
	// last message (or the deadline).
	col.quiet(ctx, 3*time.Second)
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("interrupted: %w", err) // the deferred stopAll stops the workers
	}
	res.RSSMiB = d.stopAll(syscall.SIGTERM, log)
	after, err := logBytes(ctx, adm)
	if err != nil {
		return res, err
	}
	res.BytesPerMsg = float64(after-before) / float64(c.N)
	col.score(due, c.Warmup.Milliseconds(), killAt, &res)
	res.Killed = !killAt.IsZero() && c.Kill && !sys.NoKill
	return res, nil
}

// drill holds one run's worker processes and kills one of them at half.
type drill struct {
	c     *Config
	sys   System
	start Start
	ws    []*Child
}

// startAll starts the workers and waits until their group is stable.
func (d *drill) startAll(ctx context.Context, adm *kadm.Client, group string) error {
	if d.start == nil {
		return nil
	}
	d.ws = make([]*Child, d.c.Workers)
	for i := range d.ws {
		w, err := d.start(i)
		if err != nil {
			return err
		}
		d.ws[i] = w
	}
	if err := waitStable(ctx, adm, group, d.c.Workers); err != nil {
		return fmt.Errorf("%v; first worker's output:\n%s", err, d.ws[0].Output())
	}
	return nil
}

// stopAll stops the workers that still run and returns their largest
// peak RSS (MiB); with KAFKABENCH_VERBOSE set it writes their output to
// log.
func (d *drill) stopAll(sig syscall.Signal, log io.Writer) float64 {
	rss := 0.0
	for i, w := range d.ws {
		if w == nil {
			continue
		}
		rss = max(rss, w.PeakRSS())
		w.Stop(sig)
		if log != nil && os.Getenv("KAFKABENCH_VERBOSE") != "" {
			fmt.Fprintf(log, "worker %d output:\n%s\n", i+1, w.Output())
		}
		d.ws[i] = nil
	}
	return rss
}

// await polls the collector until all messages have arrived or the
// deadline passed. Once half have arrived it kills the first worker (with
// -kill, restarting it unless -no-restart) and runs -kill-broker's
// command, once, and returns when that was (zero: never). It gives up
// with ctx's error when ctx ends (an interrupt: the caller stops the
// workers).
func (d *drill) await(ctx context.Context, col *collector) (killAt time.Time, err error) {
	c := d.c
	acted := !c.Kill && c.KillCmd == ""
	deadline := time.Now().Add(c.Tiers[len(c.Tiers)-1] + c.ProduceIn + 2*time.Minute)
	if c.Kill && c.NoRestart {
		deadline = deadline.Add(c.SessionTimeout)
	}
	for {
		n := col.distinct()
		if !acted && n >= c.N/2 {
			killAt = time.Now()
			if c.Kill && !d.sys.NoKill && len(d.ws) > 0 {
				d.ws[0].Stop(syscall.SIGKILL)
				d.ws[0] = nil
				if !c.NoRestart {
					if d.ws[0], err = d.start(0); err != nil {
						return killAt, err
					}
				}
			}
			if c.KillCmd != "" {
				if out, err := exec.Command("sh", "-c", c.KillCmd).CombinedOutput(); err != nil {
					return killAt, fmt.Errorf("-kill-broker: %v\n%s", err, out)
				}
			}
			acted = true
		}
		if n >= c.N || time.Now().After(deadline) {
			return killAt, nil
		}
		select {
		case <-ctx.Done():
			return killAt, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// deleteTopics deletes the topics a run created, once its workers have
// stopped.
func deleteTopics(adm *kadm.Client, topics []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resps, err := adm.DeleteTopics(ctx, topics...)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return fmt.Errorf("delete the run's topics (%s): %w", strings.Join(topics, ", "), err)
	}
	return nil
}

// waitStable waits until the workers' group is Stable with n members.
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
	return fmt.Errorf("group %s not stable with %d members within 60 s", group, n)
}

// produced is what the benchmark produced: each message's due time (Unix
// ms) and tier, by ID.
type produced struct {
	due  map[string]int64
	tier map[string]time.Duration
}

// produce writes c.N messages evenly over c.ProduceIn. A message's due
// time is its record timestamp plus its tier, for every system.
func produce(ctx context.Context, cl *kgo.Client, c *Config, sys System, prefix, delayTopic, biz string) (produced, error) {
	p := produced{due: make(map[string]int64, c.N), tier: make(map[string]time.Duration, c.N)}
	rng := mrand.New(mrand.NewPCG(1, uint64(time.Now().UnixNano())))
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	// Produce in steps of about 2 ms, so that due times are spread, not
	// bursty.
	step := max(1, int(float64(c.N)*float64(2*time.Millisecond)/float64(c.ProduceIn)))
	for i := 0; i < c.N; i += step {
		if d := time.Until(start.Add(time.Duration(float64(c.ProduceIn) * float64(i) / float64(c.N)))); d > 0 {
			time.Sleep(d)
		}
		if ctx.Err() != nil {
			wg.Wait()
			return p, ctx.Err()
		}
		for j := i; j < i+step && j < c.N; j++ {
			tier := c.Tiers[rng.IntN(len(c.Tiers))]
			id := fmt.Sprintf("m%07d", j)
			// Random bodies: kgo compresses batches, and a body of
			// zeros would make the bytes-written figure meaningless.
			val := make([]byte, c.Body)
			for k := range val {
				val[k] = byte(rng.Uint32())
			}
			copy(val, id)
			ts := time.Now()
			r := &kgo.Record{Key: []byte(id), Value: val, Timestamp: ts,
				Headers: []kgo.RecordHeader{{Key: "_bizTopic", Value: []byte(biz)}}}
			if sys.Route != nil {
				r.Topic = sys.Route(prefix, tier)
			} else {
				r.Topic = delayTopic
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: "_delayMs", Value: []byte(strconv.FormatInt(tier.Milliseconds(), 10))})
			}
			p.due[id] = ts.UnixMilli() + tier.Milliseconds()
			p.tier[id] = tier
			wg.Add(1)
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if firstErr != nil {
		return p, fmt.Errorf("produce: %w", firstErr)
	}
	return p, nil
}

// cmpErr keeps the first error.
func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// loadAvg is the 1-minute load average (/proc/loadavg); -1 when it
// cannot be read.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}
