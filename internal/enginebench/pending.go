package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
)

const pendingTopic = "pending"

// pendingBody is the body size of the pending scenario.
const pendingBody = 16

func heapInuse() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

func heapAlloc() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// settle collects garbage and returns freed memory to the OS, so that
// VmRSS reflects live memory.
func settle() {
	runtime.GC()
	debug.FreeOSMemory()
}

// perMsg formats bytes per message.
func perMsg(b int64, n int64) string {
	if n <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f B", float64(b)/float64(n))
}

// runPending fills an engine with far-future pending messages and measures
// the send rate and the RAM and disk each pending message costs.
func runPending(c config, dir string) (*report, error) {
	r := newReport("pending", dir)
	r.note("size: N = %s messages, due uniformly over %v starting %v after the start, unique keys \"order-<n>\", %d B bodies, SendBatch of %d from %d goroutine(s), sync flush, vfs.OS, engine defaults",
		humanInt(int64(c.n)), c.horizon, c.offset, pendingBody, c.batch, c.senders)
	settle()
	e, err := engine.Open(engineOptions(dir))
	if err != nil {
		return nil, err
	}
	if err := e.CreateTopic(pendingTopic, engine.TopicConfig{}); err != nil {
		e.Close()
		return nil, err
	}
	settle()
	rssEmpty, heapEmpty := rssBytes(), heapInuse()

	body := make([]byte, pendingBody)
	for i := range body {
		body[i] = 'b'
	}
	now := e.Now()
	res, err := preload(e, preloadSpec{
		topic: pendingTopic, keyPrefix: "order-", n: c.n, batch: c.batch, senders: c.senders, body: body,
		due: uniformDue(now+c.offset.Milliseconds(), c.horizon.Milliseconds()),
	})
	if err != nil {
		e.Close()
		return nil, err
	}
	st := e.Stats()
	pending := st.Pending.Load()
	rssSent, heapSent := rssBytes(), heapInuse()
	runtime.GC()
	rssGC, heapGC := rssBytes(), heapInuse()
	debug.FreeOSMemory()
	rssFree := rssBytes()
	if err := writeHeapProfile(c.memprofile); err != nil {
		e.Close()
		return nil, err
	}
	ckN := st.Checkpoints.Load()
	_, _, ckSum := st.CheckpointSeconds.Snapshot()

	if err := inspectKeyFigures(r, c, e, dir, c.n); err != nil {
		e.Close()
		return nil, err
	}
	closeStart := time.Now()
	if err := e.Close(); err != nil {
		return nil, fmt.Errorf("close: %w", err)
	}
	closeTook := time.Since(closeStart)
	u, err := walkDisk(dir)
	if err != nil {
		return nil, err
	}

	lat := summarize(res.batchLat)
	r.figT("send rate", rate(c.n, res.took)+fmt.Sprintf(" (%s messages in %s)", humanInt(int64(c.n)), secs(res.took)), "")
	r.fig("SendBatch latency p50 / p99 / p99.9 / max", lat.nsAsMs())
	r.fig("pending after sending (Stats().Pending)", humanInt(pending))
	r.fig("checkpoints during sending, total time", fmt.Sprintf("%d, %.1f s", ckN, ckSum))
	r.fig("RSS of the empty engine", mib(rssEmpty))
	r.fig("RAM per pending message: VmRSS right after sending", perMsg(rssSent-rssEmpty, pending))
	r.figT("RAM per pending message: VmRSS after runtime.GC", perMsg(rssGC-rssEmpty, pending), "< 64 B")
	r.fig("RAM per pending message: VmRSS after debug.FreeOSMemory", perMsg(rssFree-rssEmpty, pending))
	r.fig("RAM per pending message: HeapInuse after sending / after GC",
		perMsg(heapSent-heapEmpty, pending)+" / "+perMsg(heapGC-heapEmpty, pending))
	r.fig("process peak RSS (VmHWM)", mib(hwmBytes()))
	r.fig("Close (final checkpoint)", secs(closeTook))
	diskFigures(r, u, c.n)
	mapPer := keyMapReference(pending)
	r.fig("reference: a Go map[uint64]uint64 (the key index's type) with as many entries, heap per entry", fmt.Sprintf("%.1f B", mapPer))
	return r, nil
}

// keyMapReference measures what a map[uint64]uint64 of n entries, grown
// without a size hint, takes on the heap per entry: the shape of the
// engine's in-memory key index.
func keyMapReference(n int64) float64 {
	if n <= 0 {
		return 0
	}
	runtime.GC()
	before := heapAlloc()
	m := map[uint64]uint64{}
	rng := rand.New(rand.NewPCG(7, 7))
	for i := int64(0); i < n; i++ {
		m[rng.Uint64()] = uint64(i)
	}
	runtime.GC()
	after := heapAlloc()
	runtime.KeepAlive(m)
	return float64(after-before) / float64(n)
}

// writeHeapProfile writes the heap profile to path (nothing if path is
// empty): what the pending messages' RAM is made of.
func writeHeapProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// diskFigures reports the data directory's size per pending message
// beyond the bodies, in all and by component.
func diskFigures(r *report, u diskUsage, n int) {
	app, alloc := u.total()
	bodies := int64(n) * pendingBody
	r.fig("disk per pending message beyond the body (file sizes)", perMsg(app-bodies, int64(n)))
	r.fig("disk per pending message beyond the body (allocated blocks)", perMsg(alloc-bodies, int64(n)))
	for _, comp := range components {
		if u.files[comp] == 0 {
			continue
		}
		r.fig("disk: "+comp, fmt.Sprintf("%s in %s files = %s per message (allocated %s = %s per message)",
			mib(u.apparent[comp]), humanInt(int64(u.files[comp])), perMsg(u.apparent[comp], int64(n)),
			mib(u.allocated[comp]), perMsg(u.allocated[comp], int64(n))))
	}
}
