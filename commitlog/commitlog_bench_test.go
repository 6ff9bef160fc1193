package commitlog

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/vfs"
)

const (
	benchProducers = 64
	benchPayload   = 1024
)

// measuredBatch is the average records per fdatasync of the last
// BenchmarkAppendSync run, so that BenchmarkRawFdatasync writes the same
// batches; zero until that benchmark has run.
var measuredBatch atomic.Int64

// runLog appends n records of benchPayload bytes from benchProducers
// goroutines to a FlushSync log on the real disk under dir, and returns
// every Append's latency and the average batch per fdatasync.
func runLog(tb testing.TB, dir string, n int) (lat []time.Duration, batch float64) {
	var syncs, records atomic.Int64
	// Not preallocated, as runRaw's file is not: the two differ by the
	// log's machinery alone (BenchmarkAppendPrealloc measures that).
	l, err := Open(Options{FS: vfs.OS, Dir: dir, NoPreallocate: true, OnSync: func(_ time.Duration, r, _ int) {
		syncs.Add(1)
		records.Add(int64(r))
	}})
	if err != nil {
		tb.Fatal(err)
	}
	payload := make([]byte, benchPayload)
	var next atomic.Int64
	lats := make([][]time.Duration, benchProducers)
	var wg sync.WaitGroup
	for p := range benchProducers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, n/benchProducers+1)
			for next.Add(1) <= int64(n) {
				began := time.Now()
				if _, err := l.Append(Record{Type: 1, Payload: payload}); err != nil {
					tb.Error(err)
					return
				}
				mine = append(mine, time.Since(began))
			}
			lats[p] = mine
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	for _, m := range lats {
		lat = append(lat, m...)
	}
	if s := syncs.Load(); s > 0 {
		batch = float64(records.Load()) / float64(s)
	}
	return lat, batch
}

// runRaw is the baseline: n framed records of benchPayload bytes written to
// a plain os.File under dir, batch records per WriteAt, one fdatasync per
// batch, from a single goroutine. It returns the elapsed time.
func runRaw(tb testing.TB, dir string, n, batch int) time.Duration {
	f, err := os.Create(filepath.Join(dir, "raw"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	rec := appendFrame(nil, Record{Type: 1, Payload: make([]byte, benchPayload)}, 0)
	buf := slices.Repeat(rec, batch)
	began := time.Now()
	var off int64
	for done := 0; done < n; done += batch {
		k := min(batch, n-done)
		if _, err := f.WriteAt(buf[:k*len(rec)], off); err != nil {
			tb.Fatal(err)
		}
		off += int64(k * len(rec))
		if err := fdatasync(f); err != nil {
			tb.Fatal(err)
		}
	}
	return time.Since(began)
}

// BenchmarkAppendSync: 64 producers, 1 KiB records, FlushSync, real disk.
// One op is one acknowledged (durable) record. Besides msgs/s and the p99
// Append latency it reports the average records per fdatasync and, because
// a shared machine's load drifts between benchmarks, a paired baseline run
// right after the log's (timer stopped): raw-msgs/s of runRaw with the same
// record count and the log's batch size, and their ratio log/raw.
func BenchmarkAppendSync(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "log")
	b.SetBytes(benchPayload)
	b.ResetTimer()
	began := time.Now()
	lat, batch := runLog(b, dir, b.N)
	elapsed := time.Since(began)
	b.StopTimer()
	os.RemoveAll(dir)
	slices.Sort(lat)
	p99 := lat[min(len(lat)-1, int(math.Ceil(float64(len(lat))*0.99))-1)]
	rate := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(rate, "msgs/s")
	b.ReportMetric(float64(p99)/float64(time.Millisecond), "p99-ms")
	b.ReportMetric(batch, "recs/sync")
	measuredBatch.Store(int64(math.Round(batch)))

	rawDir := b.TempDir()
	raw := float64(b.N) / runRaw(b, rawDir, b.N, max(1, int(math.Round(batch)))).Seconds()
	os.RemoveAll(rawDir)
	b.ReportMetric(raw, "raw-msgs/s")
	b.ReportMetric(rate/raw, "log/raw")
}

// BenchmarkRawFdatasync is the baseline for BenchmarkAppendSync on its own:
// runRaw with the batch size the log achieved (measured by
// BenchmarkAppendSync, or by a short calibration run of the log if that
// benchmark was not run). The log's msgs/s over this one's is the cost of
// the log's machinery at equal batching.
func BenchmarkRawFdatasync(b *testing.B) {
	batch := int(measuredBatch.Load())
	if batch == 0 {
		_, avg := runLog(b, filepath.Join(b.TempDir(), "calibrate"), 20000)
		batch = max(1, int(math.Round(avg)))
		measuredBatch.Store(int64(batch))
	}
	dir := b.TempDir()
	b.SetBytes(benchPayload)
	b.ResetTimer()
	elapsed := runRaw(b, dir, b.N, batch)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(batch), "recs/sync")
}

// appendLatencies appends n records of benchPayload bytes one at a time (so
// each Append is one write and one fdatasync) to a FlushSync log on the
// real disk under dir, and returns each Append's latency. With prealloc it
// first waits for the spare, so that the log runs on a preallocated file
// from its first record; without, every write grows the file.
func appendLatencies(tb testing.TB, dir string, n int, prealloc bool) []time.Duration {
	l, err := Open(Options{FS: vfs.OS, Dir: dir, NoPreallocate: !prealloc})
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	for prealloc && !l.pre.ready() {
		time.Sleep(time.Millisecond)
	}
	payload := make([]byte, benchPayload)
	lat := make([]time.Duration, 0, n)
	for range n {
		began := time.Now()
		if _, err := l.Append(Record{Type: 1, Payload: payload}); err != nil {
			tb.Fatal(err)
		}
		lat = append(lat, time.Since(began))
	}
	return lat
}

// quantileUs returns the q quantile of sorted lat in microseconds.
func quantileUs(lat []time.Duration, q float64) float64 {
	i := min(len(lat)-1, max(0, int(math.Ceil(float64(len(lat))*q))-1))
	return float64(lat[i]) / float64(time.Microsecond)
}

// BenchmarkAppendPrealloc: one producer, 1 KiB records, FlushSync, real
// disk: the latency of an Append, which is one write and one fdatasync,
// on a preallocated segment (the default) and, as the baseline in the
// same run, on a segment that grows with every write (NoPreallocate). The
// two alternate in four rounds of b.N/4 appends, so that the machine's
// drift falls on both. It reports p50/p90/p99 of each, in µs, and the
// ratios prealloc/grow.
func BenchmarkAppendPrealloc(b *testing.B) {
	var pre, grow []time.Duration
	round := max(1, b.N/4)
	for r := range 4 {
		for _, on := range []bool{r%2 == 0, r%2 != 0} {
			dir := filepath.Join(b.TempDir(), "log")
			lat := appendLatencies(b, dir, round, on)
			os.RemoveAll(dir)
			if on {
				pre = append(pre, lat...)
			} else {
				grow = append(grow, lat...)
			}
		}
	}
	slices.Sort(pre)
	slices.Sort(grow)
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}} {
		p, g := quantileUs(pre, q.q), quantileUs(grow, q.q)
		b.ReportMetric(p, q.name+"-us")
		b.ReportMetric(g, "grow-"+q.name+"-us")
		b.ReportMetric(p/g, q.name+"-ratio")
	}
}
