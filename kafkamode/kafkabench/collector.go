package kafkabench

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// collector reads the business topic (read_committed) and notes when
// each record arrived. Its fetch long-poll is short (collectorFetchWait)
// for every system alike: a broker answers a parked read_committed fetch
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
	cl, err := kgo.NewClient(Seeds(brokers), kgo.ConsumeTopics(topic),
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

// quiet waits until nothing arrived for d, or until ctx ends.
func (c *collector) quiet(ctx context.Context, d time.Duration) {
	for ctx.Err() == nil {
		c.mu.Lock()
		idle := time.Since(c.last)
		c.mu.Unlock()
		if idle >= d {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(d - idle):
		}
	}
}

func (c *collector) close() {
	c.stop()
	<-c.done
	c.cl.Close()
}

// score fills the lateness, early, lost and duplicate figures of r. A
// record whose key the benchmark did not produce counts as a duplicate:
// nothing that arrives goes uncounted.
func (c *collector) score(p produced, warmup int64, killAt time.Time, r *Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, a := range c.arr {
		if _, ok := p.due[id]; !ok {
			r.Dup += len(a)
		}
	}
	first := int64(-1)
	for _, d := range p.due {
		if first < 0 || d < first {
			first = d
		}
	}
	var late, warm, afterKill []int64
	byTier := map[time.Duration][]int64{}
	for id, d := range p.due {
		a := c.arr[id]
		if len(a) == 0 {
			r.Lost++
			continue
		}
		r.Dup += len(a) - 1
		if a[0] < d {
			r.Early++
		}
		l := a[0] - d
		late = append(late, l)
		// The warm p99 leaves out the messages due in the first warmup
		// of due times: there a system produces to the business topic
		// for the first time (a metadata lookup) and works off what fell
		// due meanwhile.
		if d >= first+warmup {
			warm = append(warm, l)
		}
		if !killAt.IsZero() && d >= killAt.UnixMilli() {
			afterKill = append(afterKill, l)
		}
		byTier[p.tier[id]] = append(byTier[p.tier[id]], l)
	}
	r.P50, r.P99, r.Max = rank(late, 50), rank(late, 99), rank(late, 100)
	r.P99Warm = rank(warm, 99)
	if !killAt.IsZero() {
		r.AfterKillP99, r.AfterKillMax = rank(afterKill, 99), rank(afterKill, 100)
	}
	if os.Getenv("KAFKABENCH_VERBOSE") != "" {
		printTiers(os.Stderr, byTier)
		printStart(os.Stderr, c.arr, p, first)
	}
}

// rank is the nearest-rank q-th percentile of v (q 100: the maximum), in
// ms; 0 for none. It sorts v.
func rank(v []int64, q int) int64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	i := (len(v)*q + 99) / 100 // ceil(len*q/100), 1-based
	return v[max(i, 1)-1]
}

func printTiers(w io.Writer, byTier map[time.Duration][]int64) {
	tiers := make([]time.Duration, 0, len(byTier))
	for t := range byTier {
		tiers = append(tiers, t)
	}
	sort.Slice(tiers, func(i, j int) bool { return tiers[i] < tiers[j] })
	for _, t := range tiers {
		l := byTier[t]
		fmt.Fprintf(w, "tier %v: p50 %d p99 %d max %d ms\n", t, rank(l, 50), rank(l, 99), rank(l, 100))
	}
}

// printStart writes the lateness of the messages due in each 250 ms of
// due times (KAFKABENCH_VERBOSE): where a transient shows.
func printStart(w io.Writer, arr map[string][]int64, p produced, first int64) {
	buckets := map[int64][]int64{}
	last := int64(0)
	for id, d := range p.due {
		if a := arr[id]; len(a) > 0 {
			b := (d - first) / 250
			buckets[b] = append(buckets[b], a[0]-d)
			last = max(last, b)
		}
	}
	for i := int64(0); i <= last; i++ {
		b := buckets[i]
		fmt.Fprintf(w, "due +%d ms: %d messages, p50 %d p99 %d max %d ms\n", i*250, len(b), rank(b, 50), rank(b, 99), rank(b, 100))
	}
}
