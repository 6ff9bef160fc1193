package main

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

const produceTopic = "produce"

// runProduce measures durable produce with many concurrent producers and
// compares it with a raw append+fdatasync loop on the same disk that uses
// the engine's average group-commit batch.
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

	lats := make([][]int64, c.producers)
	var wg sync.WaitGroup
	errc := make(chan error, c.producers)
	start := time.Now()
	end := start.Add(c.duration)
	for p := 0; p < c.producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			lat := make([]int64, 0, 4096)
			for time.Now().Before(end) {
				t := time.Now()
				_, err := e.Send(bg, message.Message{Topic: produceTopic, Body: body}, message.When{Delay: c.delay})
				if err != nil {
					errc <- err
					break
				}
				lat = append(lat, int64(time.Since(t)))
			}
			lats[p] = lat
		}(p)
	}
	wg.Wait()
	took := time.Since(start)
	select {
	case err := <-errc:
		return r, err
	default:
	}
	var all []int64
	for _, l := range lats {
		all = append(all, l...)
	}
	n := len(all)
	_, fsync1, fsyncSum1 := st.FsyncSeconds.Snapshot()
	fsyncs := int(fsync1 - fsync0)
	avgBatch := float64(n) / float64(max(fsyncs, 1))
	written := logBytes(dir) - head0
	if err := e.Close(); err != nil {
		return r, err
	}
	lat := summarize(all)

	rawN, rawTook, rawSyncs, err := rawAppend(dir, c.body, avgBatch, c.duration)
	if err != nil {
		return r, err
	}
	engRate := float64(n) / took.Seconds()
	rawRate := float64(rawN) / rawTook.Seconds()
	r.note("size: %d producers each calling Send in a loop for %v; %d B bodies, no key, delay %v; sync flush, vfs.OS, engine defaults", c.producers, c.duration, c.body, c.delay)
	r.note("baseline: one goroutine appending %d B records to a plain os.File with one write and one syscall.Fdatasync per batch, batch sizes alternating so that their mean equals the engine's messages per fsync, for %v on the same filesystem, after the engine run", c.body, c.duration)
	r.cmp("durable produce rate", fmt.Sprintf("%s msgs/s (%s in %s)", humanInt(int64(engRate)), humanInt(int64(n)), secs(took)),
		fmt.Sprintf("%s records/s (%s in %s)", humanInt(int64(rawRate)), humanInt(int64(rawN)), secs(rawTook)), engRate/rawRate, ">= 0.70")
	r.fig("Send latency p50 / p99 / p99.9 / max", lat.nsAsMs())
	r.fig("commit-log fdatasyncs, messages per fdatasync", fmt.Sprintf("%s, %.1f", humanInt(int64(fsyncs)), avgBatch))
	r.fig("mean fdatasync time: engine / raw loop (raw: whole write+fdatasync round)", fmt.Sprintf("%.3f ms / %.3f ms (%s rounds)",
		(fsyncSum1-fsyncSum0)/float64(max(fsyncs, 1))*1000, float64(rawTook)/1e6/float64(max(rawSyncs, 1)), humanInt(int64(rawSyncs))))
	r.fig("commit-log bytes per message", fmt.Sprintf("%.0f B", float64(written)/float64(max(n, 1))))
	return r, nil
}

// logBytes sums the commit-log segment files of a data directory.
func logBytes(dir string) int64 {
	u, err := walkDisk(dir)
	if err != nil {
		return 0
	}
	return u.apparent["commit log"]
}

// rawAppend appends records of size bytes to a new file under dir for d,
// one write and one fdatasync per batch, batch sizes chosen so their mean is
// avg. It returns the records written, the time taken and the syncs.
func rawAppend(dir string, size int, avg float64, d time.Duration) (int, time.Duration, int, error) {
	f, err := os.CreateTemp(dir, "raw-*.log")
	if err != nil {
		return 0, 0, 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	maxBatch := int(avg) + 1
	buf := make([]byte, maxBatch*size)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	n, syncs := 0, 0
	acc := 0.0
	start := time.Now()
	for time.Since(start) < d {
		acc += avg
		k := int(acc) - n
		if k < 1 {
			k = 1
		}
		if _, err := f.Write(buf[:k*size]); err != nil {
			return 0, 0, 0, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return 0, 0, 0, err
		}
		n += k
		syncs++
	}
	return n, time.Since(start), syncs, nil
}
