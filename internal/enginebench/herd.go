package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

const (
	herdTopic  = "herd"
	probeTopic = "probe"
)

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
	fireBatch  float64 // messages per fire record, from the fsync count (no probes)

	probes     quantiles // probe lateness, consumer clock, ns
	probeWorst string
	probeLate  int // probe sends issued after their due time
}

// runHerd makes -herd messages fall due at one millisecond, once with the
// default dispatch rate and once unbounded, each in a fresh engine.
func runHerd(c config, dir string) (*report, error) {
	r := newReport("herd", dir)
	r.note("size: %s messages due at the same millisecond, %v after sending starts; 16 B bodies, no keys, topic of 4 queues, SendBatch of %d from %d goroutine(s), sync flush, vfs.OS; a fresh engine per run",
		humanInt(int64(c.herd)), c.herdLead, c.batch, c.senders)
	if c.probe > 0 {
		r.note("other traffic: %d probe messages/s in another topic (1 queue), each sent alone 1 s before its due time, due from 1.5 s after the herd was sent until 15 s after the herd instant; probe lateness is from a consumer's clock like the lateness scenario's", c.probe)
	}
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
		r.fig(p+"due instant until the first / all seen", fmt.Sprintf("%.3f s / %.3f s", float64(res.clk.min)/1e9, res.allVisible.Seconds()))
		r.fig(p+"due instant until the last Visible stamp (index)", fmt.Sprintf("%d ms", res.lastIndex))
		r.fig(p+"lateness p50 / p99 / p99.9 / max, seen", res.clk.nsAsMs())
		r.fig(p+"lateness p50 / p99 / p99.9 / max, index", res.idx.ms())
		r.fig(p+"early", fmt.Sprintf("%d", res.early))
		if c.probe > 0 {
			r.fig(p+"probe lateness p50 / p99 / p99.9 / max", res.probes.nsAsMs())
			r.fig(p+"probe: worst 100 ms of due times, from the herd instant", res.probeWorst)
			if res.probeLate > 0 {
				r.fig(p+"probe sends issued after their due time", fmt.Sprint(res.probeLate))
			}
		} else {
			r.fig(p+"messages per commit-log fsync after the due instant", fmt.Sprintf("%.0f", res.fireBatch))
		}
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
	if err := e.CreateTopic(probeTopic, engine.TopicConfig{Queues: 1}); err != nil {
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
	var probe *consumer
	var pwg sync.WaitGroup
	var probeErr, probeSendErr error
	if c.probe > 0 {
		pStart, pEnd := time.Now().UnixMilli()+1500, due+15000
		count := int((pEnd - pStart) * int64(c.probe) / 1000)
		probe = newConsumer(e, probeTopic, 1, count)
		pwg.Add(2)
		go func() {
			defer pwg.Done()
			probeErr = probe.run(count, time.UnixMilli(pEnd).Add(2*time.Minute))
		}()
		go func() {
			defer pwg.Done()
			for i := 0; i < count; i++ {
				d := pStart + int64(i)*1000/int64(c.probe)
				time.Sleep(time.Until(time.UnixMilli(d - 1000)))
				if time.Now().UnixMilli() >= d {
					res.probeLate++
				}
				if _, err := e.Send(bg, message.Message{Topic: probeTopic, Body: make([]byte, pendingBody)}, message.When{At: d}); err != nil {
					probeSendErr = err
					return
				}
			}
		}()
	}
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
	pwg.Wait()
	if err := errors.Join(probeErr, probeSendErr); err != nil {
		sampler.finish()
		return res, fmt.Errorf("probes: %w", err)
	}
	if probe != nil {
		res.probes = summarize(slices.Clone(probe.clockNs))
		res.probeWorst = worstBins(probe.dueMs, probe.clockNs, due, 3)
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
