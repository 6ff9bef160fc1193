package main

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

const produceTopic = "produce"

// runProduce measures durable produce with many concurrent producers:
// first Send (one message per call and per producer in flight, the
// headline), then SendBatch at each batch size of -engine-batches, and
// compares the rates with raw append+fdatasync loops at the same
// concurrency over a sweep of batch sizes, taking the raw loop's best.
func runProduce(c config, dir string) (*report, error) {
	r := newReport("produce", dir)
	e, err := engine.Open(engineOptions(dir))
	if err != nil {
		return nil, err
	}
	defer e.Close()
	if err := e.CreateTopic(produceTopic, engine.TopicConfig{}); err != nil {
		return nil, err
	}
	body := make([]byte, c.body)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	st := e.Stats()
	_, fsync0, fsyncSum0 := st.FsyncSeconds.Snapshot()
	head0 := logBytes(dir)
	one, err := engineProduce(e, c, body, 1, c.duration)
	if err != nil {
		return r, err
	}
	_, fsync1, fsyncSum1 := st.FsyncSeconds.Snapshot()
	fsyncs := int(fsync1 - fsync0)
	avgBatch := float64(one.records) / float64(max(fsyncs, 1))
	written := logBytes(dir) - head0
	engSweep := []rawResult{one}
	for _, b := range c.engineBatches {
		res, err := engineProduce(e, c, body, b, c.rawDuration)
		if err != nil {
			return r, err
		}
		engSweep = append(engSweep, res)
	}
	if err := e.Close(); err != nil {
		return r, err
	}
	lat := summarize(one.lat)

	sweep, err := rawSweep(dir, c.body, c.producers, rawBatches, c.rawDuration)
	if err != nil {
		return r, err
	}
	best, engBest := bestOf(sweep), bestOf(engSweep)
	engRate := one.rate()
	r.note("size: %d producers each calling Send in a loop for %v (then SendBatch of %v for %v each); %d B bodies, no key, delay %v; sync flush, vfs.OS, engine defaults", c.producers, c.duration, c.engineBatches, c.rawDuration, c.body, c.delay)
	r.note("baseline: %d goroutines (the same concurrency) appending %d B records to one plain os.File, each reserving its range with an atomic add, writing it with one pwrite and calling syscall.Fdatasync before its next batch, for %v per batch size, on the same filesystem, after the engine runs; batch sizes %v records per write; the best of the sweep is the baseline", c.producers, c.body, c.rawDuration, rawBatches)
	r.cmp("Send (1 message per call) vs the best raw rate of the sweep", fmt.Sprintf("%s msgs/s (%s in %s)", humanInt(int64(engRate)), humanInt(int64(one.records)), secs(one.took)),
		fmt.Sprintf("%s records/s (batch %d)", humanInt(int64(best.rate())), best.batch), engRate/best.rate(), ">= 0.70")
	r.cmp("the engine's best (Send or SendBatch) vs the best raw rate", fmt.Sprintf("%s msgs/s (batch %d)", humanInt(int64(engBest.rate())), engBest.batch),
		fmt.Sprintf("%s records/s (batch %d)", humanInt(int64(best.rate())), best.batch), engBest.rate()/best.rate(), ">= 0.70")
	for _, s := range sweep {
		r.fig(fmt.Sprintf("raw sweep: batch %d records, %d goroutines", s.batch, c.producers),
			fmt.Sprintf("%s records/s, %s fdatasyncs", humanInt(int64(s.rate())), humanInt(int64(s.syncs))))
	}
	for _, s := range engSweep {
		name := "Send"
		if s.batch > 1 {
			name = fmt.Sprintf("SendBatch of %d", s.batch)
		}
		ratio := ""
		for _, raw := range sweep {
			if raw.batch == s.batch {
				ratio = fmt.Sprintf(", engine / raw at the same batch = %.2f", s.rate()/raw.rate())
			}
		}
		r.fig(fmt.Sprintf("engine: %s, %d producers", name, c.producers), fmt.Sprintf("%s msgs/s%s", humanInt(int64(s.rate())), ratio))
	}
	r.fig("Send latency p50 / p99 / p99.9 / max", lat.nsAsMs())
	r.fig("Send run: commit-log fdatasyncs, messages per fdatasync", fmt.Sprintf("%s, %.1f", humanInt(int64(fsyncs)), avgBatch))
	r.fig("Send run: mean engine fdatasync time", fmt.Sprintf("%.3f ms", (fsyncSum1-fsyncSum0)/float64(max(fsyncs, 1))*1000))
	r.fig("Send run: commit-log bytes per message", fmt.Sprintf("%.0f B", float64(written)/float64(max(one.records, 1))))
	return r, nil
}

// bestOf returns the result with the highest rate.
func bestOf(rs []rawResult) rawResult {
	best := rs[0]
	for _, s := range rs[1:] {
		if s.rate() > best.rate() {
			best = s
		}
	}
	return best
}

// engineProduce runs c.producers goroutines for d, each calling Send
// (batch 1) or SendBatch of batch messages in a loop, and returns the
// messages acknowledged and, for Send, every call's latency.
func engineProduce(e *engine.Engine, c config, body []byte, batch int, d time.Duration) (rawResult, error) {
	lats := make([][]int64, c.producers)
	counts := make([]int, c.producers)
	var wg sync.WaitGroup
	errc := make(chan error, c.producers)
	start := time.Now()
	end := start.Add(d)
	for p := 0; p < c.producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			lat := make([]int64, 0, 4096)
			reqs := make([]engine.SendRequest, batch)
			for i := range reqs {
				reqs[i] = engine.SendRequest{Message: message.Message{Topic: produceTopic, Body: body}, When: message.When{Delay: c.delay}}
			}
			for time.Now().Before(end) {
				t := time.Now()
				var err error
				if batch == 1 {
					_, err = e.Send(bg, reqs[0].Message, reqs[0].When)
				} else {
					_, err = e.SendBatch(bg, reqs)
				}
				if err != nil {
					errc <- err
					break
				}
				lat = append(lat, int64(time.Since(t)))
				counts[p] += batch
			}
			lats[p] = lat
		}(p)
	}
	wg.Wait()
	res := rawResult{batch: batch, took: time.Since(start)}
	select {
	case err := <-errc:
		return res, err
	default:
	}
	for p := range lats {
		res.records += counts[p]
		if batch == 1 {
			res.lat = append(res.lat, lats[p]...)
		}
	}
	return res, nil
}

// logBytes sums the commit-log segment files of a data directory.
func logBytes(dir string) int64 {
	u, err := walkDisk(dir)
	if err != nil {
		return 0
	}
	return u.apparent["commit log"]
}

// rawBatches are the batch sizes of the raw baseline's sweep, in records
// per write+fdatasync.
var rawBatches = []int{1, 8, 64, 512, 4096}

// rawResult is one batch size of a sweep, raw or engine.
type rawResult struct {
	batch, records, syncs int
	took                  time.Duration
	lat                   []int64 // engine Send only: ns per call
}

func (s rawResult) rate() float64 { return float64(s.records) / s.took.Seconds() }

// rawSweep runs rawAppend once per batch size.
func rawSweep(dir string, size, writers int, batches []int, d time.Duration) ([]rawResult, error) {
	var out []rawResult
	for _, b := range batches {
		res, err := rawAppend(dir, size, writers, b, d)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

// rawAppend is the plain-Go ceiling for durable appends: writers
// goroutines share one new file under dir for d; each reserves the next
// batch*size bytes with an atomic add, writes them with one pwrite and
// calls fdatasync before its next batch, as a producer waits for its ack.
// Concurrent fdatasyncs on one file let the kernel and the device share
// work, the same chance the engine's group commit has.
func rawAppend(dir string, size, writers, batch int, d time.Duration) (rawResult, error) {
	f, err := os.CreateTemp(dir, "raw-*.log")
	if err != nil {
		return rawResult{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, batch*size)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	var off, records, syncs atomic.Int64
	errc := make(chan error, writers)
	var wg sync.WaitGroup
	start := time.Now()
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < d {
				at := off.Add(int64(len(buf))) - int64(len(buf))
				if _, err := f.WriteAt(buf, at); err != nil {
					errc <- err
					return
				}
				if err := syscall.Fdatasync(int(f.Fd())); err != nil {
					errc <- err
					return
				}
				records.Add(int64(batch))
				syncs.Add(1)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	select {
	case err := <-errc:
		return rawResult{}, err
	default:
	}
	return rawResult{batch: batch, records: int(records.Load()), syncs: int(syncs.Load()), took: took}, nil
}
