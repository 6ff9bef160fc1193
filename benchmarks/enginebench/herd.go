package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
)

const herdTopic = "herd"

// herdResult is one herd run.
type herdResult struct {
	send       time.Duration
	allVisible time.Duration // from the due instant until the last message was seen
	lastIndex  int64         // max(entry.Visible) - due, ms
	idx        quantiles     // entry.Visible - entry.Due, ms
	clk        quantiles     // time seen - due instant, ns
	early      int
	rssBefore  int64
	rssPeak    int64
	fireBatch  float64 // messages per fire record, from the fsync count
}

// runHerd makes -herd messages fall due at one millisecond, once with the
// default dispatch rate and once unbounded, each in a fresh engine.
func runHerd(c config, dir string) (*report, error) {
	r := newReport("herd", dir)
	r.note("size: %s messages due at the same millisecond, %v after sending starts; 16 B bodies, no keys, topic of 4 queues, SendBatch of %d from %d goroutine(s), sync flush, vfs.OS; a fresh engine per run",
		humanInt(int64(c.herd)), c.herdLead, c.batch, c.senders)
	r.note("\"seen\" times come from a reader waiting on VisibleSignal that counts queue lengths (Topics()) and stamps time.Now(); index lateness is entry.Visible - entry.Due read back afterwards")
	for _, run := range []struct {
		name string
		rate int
	}{{"DispatchRate default (200,000/s)", 0}, {"DispatchRate -1 (unbounded)", -1}} {
		res, err := herdOnce(c, filepath.Join(dir, fmt.Sprintf("rate%d", run.rate)), run.rate)
		if err != nil {
			return r, fmt.Errorf("%s: %w", run.name, err)
		}
		p := run.name + ": "
		r.fig(p+"send time", fmt.Sprintf("%s (%s)", secs(res.send), rate(c.herd, res.send)))
		r.fig(p+"due instant until all seen", secs(res.allVisible))
		r.fig(p+"due instant until the last Visible stamp (index)", fmt.Sprintf("%d ms", res.lastIndex))
		r.fig(p+"lateness p50 / p99 / p99.9 / max, seen", res.clk.nsAsMs())
		r.fig(p+"lateness p50 / p99 / p99.9 / max, index", res.idx.ms())
		r.fig(p+"early", fmt.Sprintf("%d", res.early))
		r.fig(p+"messages per commit-log fsync after the due instant", fmt.Sprintf("%.0f", res.fireBatch))
		r.fig(p+"RSS before sending, peak (sampled every 5 ms)", mib(res.rssBefore)+", "+mib(res.rssPeak))
	}
	r.fig("process VmHWM (both runs)", mib(hwmBytes()))
	return r, nil
}

func herdOnce(c config, dir string, dispatchRate int) (herdResult, error) {
	var res herdResult
	opts := engineOptions(dir)
	opts.DispatchRate = dispatchRate
	e, err := engine.Open(opts)
	if err != nil {
		return res, err
	}
	defer e.Close()
	if err := e.CreateTopic(herdTopic, engine.TopicConfig{Queues: 4}); err != nil {
		return res, err
	}
	clk := make([]int64, 0, c.herd)
	settle()
	res.rssBefore = rssBytes()
	sampler := startRSSSampler(5 * time.Millisecond)
	due := e.Now() + c.herdLead.Milliseconds()
	pre, err := preload(e, preloadSpec{topic: herdTopic, n: c.herd, batch: c.batch, senders: c.senders,
		body: make([]byte, pendingBody), due: func(int, *rand.Rand) int64 { return due }})
	res.send = pre.took
	if err != nil {
		sampler.finish()
		return res, err
	}
	if time.Now().UnixMilli() >= due {
		sampler.finish()
		return res, fmt.Errorf("sending took %s, longer than -herd-lead %v", secs(pre.took), c.herdLead)
	}
	_, fsyncsBefore, _ := e.Stats().FsyncSeconds.Snapshot()
	deadline := time.NewTimer(time.Until(time.UnixMilli(due)) + 2*time.Minute)
	defer deadline.Stop()
	dueNs := due * int64(time.Millisecond)
	for n := 0; n < c.herd; {
		ch := e.VisibleSignal()
		m := int(queueLen(e, herdTopic))
		stamp := time.Now().UnixNano() - dueNs
		for ; n < m; n++ {
			clk = append(clk, stamp)
		}
		if n >= c.herd {
			break
		}
		select {
		case <-ch:
		case <-deadline.C:
			sampler.finish()
			return res, errors.New("not all visible within 2 minutes of the due instant")
		}
	}
	res.rssPeak = sampler.finish()
	_, fsyncsAfter, _ := e.Stats().FsyncSeconds.Snapshot()
	res.fireBatch = float64(c.herd) / float64(max(fsyncsAfter-fsyncsBefore, 1))
	res.allVisible = time.Duration(clk[len(clk)-1])
	res.early = countBelow(clk, 0)
	idx, err := readIndexLateness(e, herdTopic, 4, c.herd)
	if err != nil {
		return res, err
	}
	res.early += countBelow(idx, 0)
	res.clk = summarize(clk)
	res.idx = summarize(idx)
	res.lastIndex = res.idx.max
	return res, nil
}

// readIndexLateness reads every entry of a topic's queues and returns
// Visible - Due of each, in ms.
func readIndexLateness(e *engine.Engine, topic string, queues, want int) ([]int64, error) {
	out := make([]int64, 0, want)
	for q := 0; q < queues; q++ {
		for off := uint64(0); ; {
			vs, err := e.ReadQueue(topic, q, off, 4096)
			if err != nil {
				return nil, err
			}
			for _, v := range vs {
				out = append(out, v.Visible-v.Due)
				off = v.Offset + 1
			}
			if len(vs) < 4096 {
				break
			}
		}
	}
	if len(out) != want {
		return out, fmt.Errorf("the queue indexes hold %d entries, want %d", len(out), want)
	}
	return out, nil
}
