package main

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
)

// runBrowse measures what one page of the pending listing (issue 30)
// costs at c.n pending messages, against the same pages at baseN pending
// in the same run: the time of a page and what it reads (timer index
// blocks, index entries examined, message records read). The claim under
// test is that a page's cost follows the page, not the number pending.
func runBrowse(c config, dir string) (*report, error) {
	const baseN = 100_000
	r := newReport("browse", dir)
	r.note("size: N = %s pending in topic %q, keyed \"order-<n>\", %d B bodies, due uniformly over %v from %v on; baseline: the same pages on a second engine of %s pending filled the same way in the same run; each page kind timed %d times a round, %d rounds, after a checkpoint (the timers in run files)",
		humanInt(int64(c.n)), pendingTopic, pendingBody, c.horizon, c.offset, humanInt(baseN), browsePages, browseRounds)
	big, err := browseEngine(c, filepath.Join(dir, "big"), c.n)
	if err != nil {
		return nil, err
	}
	defer big.Close()
	small, err := browseEngine(c, filepath.Join(dir, "small"), baseN)
	if err != nil {
		return nil, err
	}
	defer small.Close()
	for _, k := range browseKinds(c) {
		var got, base []pageCost
		for range browseRounds {
			got = append(got, timePages(big, k, c)...)
			base = append(base, timePages(small, k, c)...)
		}
		g, b := summarizePages(got), summarizePages(base)
		r.cmp(k.name+" (ms a page)", g.ms, b.ms, g.median/b.median, "")
		r.fig(k.name+": reads a page at N", g.reads)
		r.fig(k.name+": reads a page at the baseline", b.reads)
	}
	return r, nil
}

const (
	browsePages  = 20
	browseRounds = 3
)

// browseEngine fills a fresh engine in dir with n pending messages and
// checkpoints it (Close and Open), so that the timers are in run files as
// after any checkpoint.
func browseEngine(c config, dir string, n int) (*engine.Engine, error) {
	e, err := engine.Open(engineOptions(dir))
	if err != nil {
		return nil, err
	}
	if err := e.CreateTopic(pendingTopic, engine.TopicConfig{}); err != nil {
		e.Close()
		return nil, err
	}
	body := make([]byte, pendingBody)
	_, err = preload(e, preloadSpec{topic: pendingTopic, keyPrefix: "order-", n: n, batch: c.batch, senders: c.senders, body: body,
		due: uniformDue(e.Now()+c.offset.Milliseconds(), c.horizon.Milliseconds())})
	if cerr := e.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return engine.Open(engineOptions(dir))
}

// pageKind is one kind of page: its request, given the engine's now.
type pageKind struct {
	name string
	req  func(now int64, rng *rand.Rand) engine.ListRequest
}

func browseKinds(c config) []pageKind {
	mid := func(now int64, rng *rand.Rand) int64 {
		return now + c.offset.Milliseconds() + rng.Int64N(c.horizon.Milliseconds())
	}
	return []pageKind{
		{"first page of 50", func(int64, *rand.Rand) engine.ListRequest { return engine.ListRequest{} }},
		{"page of 50 from a random due time", func(now int64, rng *rand.Rand) engine.ListRequest {
			return engine.ListRequest{DueFrom: mid(now, rng)}
		}},
		{"page of 500 from a random due time", func(now int64, rng *rand.Rand) engine.ListRequest {
			return engine.ListRequest{DueFrom: mid(now, rng), Limit: 500}
		}},
		{"page of 50, topic filter, random due time", func(now int64, rng *rand.Rand) engine.ListRequest {
			return engine.ListRequest{Topic: pendingTopic, DueFrom: mid(now, rng)}
		}},
		{"key prefix matching nothing (a page stops at its bounds)", func(now int64, rng *rand.Rand) engine.ListRequest {
			return engine.ListRequest{KeyPrefix: "no-such-key", DueFrom: mid(now, rng)}
		}},
	}
}

// pageCost is one page's time and reads.
type pageCost struct {
	took                  time.Duration
	blocks, scanned, read int
}

// timePages times browsePages pages of kind k, each the first page from
// its request and then the page after it (by its cursor).
func timePages(e *engine.Engine, k pageKind, c config) []pageCost {
	b := engine.NewBrowser(e)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	var out []pageCost
	for range browsePages / 2 {
		req := k.req(e.Now(), rng)
		for range 2 {
			start := time.Now()
			p, err := b.Pending(req)
			took := time.Since(start)
			if err != nil {
				panic(fmt.Sprintf("browse %s: %v", k.name, err))
			}
			out = append(out, pageCost{took: took, blocks: p.Blocks, scanned: p.Scanned, read: p.Read})
			if p.Next == "" {
				break
			}
			req.Cursor = p.Next
		}
	}
	return out
}

// costSummary is the median and range of page times and what a median
// page read.
type costSummary struct {
	median float64
	ms     string
	reads  string
}

func summarizePages(cs []pageCost) costSummary {
	ms := make([]float64, len(cs))
	blocks, scanned, read := make([]int, len(cs)), make([]int, len(cs)), make([]int, len(cs))
	for i, c := range cs {
		ms[i] = float64(c.took.Microseconds()) / 1000
		blocks[i], scanned[i], read[i] = c.blocks, c.scanned, c.read
	}
	slices.Sort(ms)
	for _, s := range [][]int{blocks, scanned, read} {
		slices.Sort(s)
	}
	m := median(ms)
	mid := len(cs) / 2
	return costSummary{median: m,
		ms: fmt.Sprintf("%.3f [%.3f–%.3f] (%d pages)", m, ms[0], ms[len(ms)-1], len(ms)),
		reads: fmt.Sprintf("median %d timer-index blocks of 4 KiB [%d–%d], %d index entries examined, %d records read",
			blocks[mid], blocks[0], blocks[len(blocks)-1], scanned[mid], read[mid])}
}
