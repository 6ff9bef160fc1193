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
	probeAfter int64     // lateness of the probe due 1 ms after the herd's instant, ns (-1: not seen)
	probeLate  int       // probe sends issued after their due time
	sendAll    quantiles // probe Send latency, all probes, ns
	sendHerd   quantiles // probe Send latency while the herd was staged or dispatched, ns
}

// herdStaging is how long before its instant the engine starts moving a
// herd out of its timer wheel (engine.stageAhead, 3 s): from then until
// the whole herd is seen, a send competes with the herd for the engine.
const herdStaging = 3 * time.Second

// runHerd makes -herd messages fall due at one millisecond, once per
// DispatchRate of -rates (by default the engine's default and unbounded),
// each in a fresh engine.
func runHerd(c config, dir string) (*report, error) {
	r := newReport("herd", dir)
	r.note("size: %s messages due at the same millisecond, %v after sending starts; 16 B bodies, no keys, topic of 4 queues, SendBatch of %d from %d goroutine(s), sync flush, vfs.OS; a fresh engine per run",
		humanInt(int64(c.herd)), c.herdLead, c.batch, c.senders)
	if c.probe > 0 {
		r.note("other traffic: %d probe messages/s in another topic (1 queue), each sent alone 1 s before its due time, due from 1.5 s after the herd was sent until 15 s after the herd instant, plus one due 1 ms after the herd instant (the issue's probe); probe lateness is from a consumer's clock like the lateness scenario's", c.probe)
	}
	r.note("\"seen\" times come from a reader waiting on VisibleSignal that counts queue lengths (Topics()) and stamps time.Now(); index lateness is entry.Visible - entry.Due read back afterwards")
	for _, dispatchRate := range c.rates {
		name := rateName(dispatchRate)
		res, err := herdOnce(c, filepath.Join(dir, fmt.Sprintf("rate%d", dispatchRate)), dispatchRate)
		if err != nil {
			return r, fmt.Errorf("%s: %w", name, err)
		}
		p := name + ": "
		r.fig(p+"send time", fmt.Sprintf("%s (%s)", secs(res.send), rate(c.herd, res.send)))
		r.fig(p+"due instant until the first / all seen", fmt.Sprintf("%.3f s / %.3f s", float64(res.clk.min)/1e9, res.allVisible.Seconds()))
		r.fig(p+"due instant until the last Visible stamp (index)", fmt.Sprintf("%d ms", res.lastIndex))
		r.fig(p+"lateness p50 / p99 / p99.9 / max, seen", res.clk.nsAsMs())
		r.fig(p+"lateness p50 / p99 / p99.9 / max, index", res.idx.ms())
		r.fig(p+"early", fmt.Sprintf("%d", res.early))
		if c.probe > 0 {
			r.fig(p+"probe lateness p50 / p99 / p99.9 / max", res.probes.nsAsMs())
			r.fig(p+"probe: worst 100 ms of due times, from the herd instant", res.probeWorst)
			r.fig(p+"the probe due 1 ms after the herd's instant: lateness", fmt.Sprintf("%.2f ms", float64(res.probeAfter)/1e6))
			r.fig(p+"probe Send latency p50 / p99 / p99.9 / max, all", res.sendAll.nsAsMs())
			r.fig(p+fmt.Sprintf("probe Send latency p50 / p99 / p99.9 / max, during the herd (%d sends from %v before the instant until all seen)", res.sendHerd.n, herdStaging), res.sendHerd.nsAsMs())
			if res.probeLate > 0 {
				r.fig(p+"probe sends issued after their due time", fmt.Sprint(res.probeLate))
			}
		} else {
			r.fig(p+"messages per commit-log fsync after the due instant", fmt.Sprintf("%.0f", res.fireBatch))
		}
		r.fig(p+"RSS before sending, peak (sampled every 5 ms)", mib(res.rssBefore)+", "+mib(res.rssPeak))
	}
	r.fig("process VmHWM (all runs)", mib(hwmBytes()))
	return r, nil
}

// rateName names a run by its engine.Options.DispatchRate: 0 is the
// engine's default, negative unbounded.
func rateName(dispatchRate int) string {
	switch {
	case dispatchRate == 0:
		return fmt.Sprintf("DispatchRate default (%s/s)", humanInt(int64(engine.NewOptions("").DispatchRate)))
	case dispatchRate < 0:
		return "DispatchRate -1 (unbounded)"
	}
	return fmt.Sprintf("DispatchRate %s/s", humanInt(int64(dispatchRate)))
}

// herdOnce runs one herd on a fresh engine in dir with the given
// DispatchRate: it sends -herd messages due at one instant, with -probe-rate
// starts the probes, watches the herd become visible and measures it.
func herdOnce(c config, dir string, dispatchRate int) (herdResult, error) {
	var res herdResult
	e, err := openHerdEngine(dir, dispatchRate)
	if err != nil {
		return res, err
	}
	defer e.Close()
	// The samples' buffer is allocated before the RSS baseline is read,
	// so the baseline includes it.
	clk := make([]int64, 0, c.herd)
	settle()
	res.rssBefore = rssBytes()
	sampler := startRSSSampler(5 * time.Millisecond)
	due, err := sendHerd(e, c, &res)
	if err != nil {
		sampler.finish()
		return res, err
	}
	_, fsyncsBefore, _ := e.Stats().FsyncSeconds.Snapshot()
	var p *probeRun
	if c.probe > 0 {
		p = startProbes(e, c.probe, due)
	}
	clk, err = watchHerd(e, clk, c.herd, due)
	if err != nil {
		sampler.finish()
		return res, err
	}
	if p != nil {
		if err := p.wait(); err != nil {
			sampler.finish()
			return res, fmt.Errorf("probes: %w", err)
		}
		res.probes = summarize(slices.Clone(p.cons.clockNs))
		res.probeWorst = worstBins(p.cons.dueMs, p.cons.clockNs, due, 3)
		res.probeAfter = -1
		if i := slices.Index(p.cons.dueMs, due+1); i >= 0 {
			res.probeAfter = p.cons.clockNs[i]
		}
		res.probeLate = p.late
		res.sendAll, res.sendHerd = p.sendLatency(due, time.Duration(clk[len(clk)-1]))
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

// openHerdEngine opens a fresh engine on dir with the given DispatchRate
// and the herd (4 queues) and probe (1 queue) topics.
func openHerdEngine(dir string, dispatchRate int) (*engine.Engine, error) {
	opts := engineOptions(dir)
	opts.DispatchRate = dispatchRate
	e, err := engine.Open(opts)
	if err != nil {
		return nil, err
	}
	if err := e.CreateTopic(herdTopic, engine.TopicConfig{Queues: 4}); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.CreateTopic(probeTopic, engine.TopicConfig{Queues: 1}); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// sendHerd sends the herd, all due -herd-lead after sending starts, and
// returns that instant (Unix ms). It records the send time in res and
// fails if sending did not end before the instant.
func sendHerd(e *engine.Engine, c config, res *herdResult) (int64, error) {
	due := e.Now() + c.herdLead.Milliseconds()
	pre, err := preload(e, preloadSpec{topic: herdTopic, n: c.herd, batch: c.batch, senders: c.senders,
		body: make([]byte, pendingBody), due: func(int, *rand.Rand) int64 { return due }})
	res.send = pre.took
	if err != nil {
		return due, err
	}
	if time.Now().UnixMilli() >= due {
		return due, fmt.Errorf("sending took %s, longer than -herd-lead %v", secs(pre.took), c.herdLead)
	}
	return due, nil
}

// probeRun is the probe traffic of a herd run: a sender of single
// messages and a consumer following the probe topic.
type probeRun struct {
	cons    *consumer
	wg      sync.WaitGroup
	late    int     // probe sends issued after their due time
	sentAt  []int64 // per probe send: when it was issued, Unix ns
	took    []int64 // per probe send: how long Send took, ns
	consErr error
	sendErr error
}

// startProbes sends perSec probe messages a second, each alone 1 s before
// its due time, due from 1.5 s from now until 15 s after the herd instant
// due, and consumes them.
func startProbes(e *engine.Engine, perSec int, due int64) *probeRun {
	pStart, pEnd := time.Now().UnixMilli()+1500, due+15000
	n := int((pEnd - pStart) * int64(perSec) / 1000)
	dues := make([]int64, 0, n+1)
	for i := range n {
		dues = append(dues, pStart+int64(i)*1000/int64(perSec))
	}
	// The probe: one message due 1 ms after the herd's instant.
	if i, found := slices.BinarySearch(dues, due+1); !found {
		dues = slices.Insert(dues, i, due+1)
	}
	count := len(dues)
	p := &probeRun{cons: newConsumer(e, probeTopic, 1, count)}
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		p.consErr = p.cons.run(count, time.UnixMilli(pEnd).Add(2*time.Minute))
	}()
	go func() {
		defer p.wg.Done()
		for _, d := range dues {
			time.Sleep(time.Until(time.UnixMilli(d - 1000)))
			if time.Now().UnixMilli() >= d {
				p.late++
			}
			start := time.Now()
			if _, err := e.Send(bg, message.Message{Topic: probeTopic, Body: make([]byte, pendingBody)}, message.When{At: d}); err != nil {
				p.sendErr = err
				return
			}
			p.sentAt = append(p.sentAt, start.UnixNano())
			p.took = append(p.took, time.Since(start).Nanoseconds())
		}
	}()
	return p
}

// sendLatency summarizes the probes' Send latencies: all of them, and
// those issued while the herd due at due (Unix ms) was being staged or
// dispatched, from herdStaging before its instant until all of it was
// seen, allSeen after the instant. Call after wait.
func (p *probeRun) sendLatency(due int64, allSeen time.Duration) (all, during quantiles) {
	from := time.UnixMilli(due).Add(-herdStaging).UnixNano()
	to := time.UnixMilli(due).Add(allSeen).UnixNano()
	var in []int64
	for i, at := range p.sentAt {
		if at >= from && at <= to {
			in = append(in, p.took[i])
		}
	}
	return summarize(slices.Clone(p.took)), summarize(in)
}

// wait waits for the probe sender and consumer and joins their errors.
func (p *probeRun) wait() error {
	p.wg.Wait()
	return errors.Join(p.consErr, p.sendErr)
}

// watchHerd waits on VisibleSignal until all n herd messages are visible
// and appends to clk, per message, when it was seen minus the due instant
// (ns), in the order seen.
func watchHerd(e *engine.Engine, clk []int64, n int, due int64) ([]int64, error) {
	deadline := time.NewTimer(time.Until(time.UnixMilli(due)) + 2*time.Minute)
	defer deadline.Stop()
	dueNs := due * int64(time.Millisecond)
	for seen := 0; seen < n; {
		ch := e.VisibleSignal()
		m := int(queueLen(e, herdTopic))
		stamp := time.Now().UnixNano() - dueNs
		for ; seen < m; seen++ {
			clk = append(clk, stamp)
		}
		if seen >= n {
			break
		}
		select {
		case <-ch:
		case <-deadline.C:
			return clk, errors.New("not all visible within 2 minutes of the due instant")
		}
	}
	return clk, nil
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
