package keyindex

import (
	"bufio"
	"flag"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/vfs"
)

var (
	benchKeys  = flag.Int("keyindex.keys", 10_000_000, "keys BenchmarkGetLarge builds")
	benchBatch = flag.Int("keyindex.batch", 100_000, "keys per checkpoint while BenchmarkGetLarge builds")
	benchCold  = flag.Bool("keyindex.cold", false, "BenchmarkGetLarge also measures with the page cache dropped (needs root; drops the whole machine's cache)")
)

// BenchmarkPut measures the send path's cost: one Put into the memtable,
// with a checkpoint every 100k.
func BenchmarkPut(b *testing.B) {
	x := openTemp(b)
	b.ReportAllocs()
	for i := range b.N {
		x.Put(spread(i), uint64(i))
		if i%100_000 == 99_999 {
			b.StopTimer()
			checkpoint(b, x)
			b.StartTimer()
		}
	}
}

// BenchmarkGetLarge builds -keyindex.keys keys through Put and checkpoint
// cycles of -keyindex.batch, then measures Get (half hits, half misses,
// warm page cache) and reports p50/p99, the runs and the RSS the index
// adds per key: VmRSS with the keys minus VmRSS before, both after a GC
// that returns free memory to the OS.
func BenchmarkGetLarge(b *testing.B) {
	n, batch := *benchKeys, *benchBatch
	before := rss(b)
	x := openTemp(b)
	start := time.Now()
	for i := range n {
		x.Put(spread(i), uint64(i+1))
		if i%batch == batch-1 || i == n-1 {
			checkpoint(b, x)
		}
	}
	build := time.Since(start)
	s := x.Stats()
	after := rss(b)
	b.ReportMetric(float64(after-before)/float64(n), "rss-B/key")
	b.ReportMetric(float64(s.IndexBytes)/float64(n), "index-B/key")
	b.ReportMetric(float64(s.Runs), "runs")
	b.ReportMetric(build.Seconds(), "build-s")
	rng := rand.New(rand.NewPCG(1, 2))
	lat := measure(b, x, rng, max(b.N, 200_000))
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	if *benchCold {
		os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0) // sync is done: runs are fsynced
		lat = measure(b, x, rng, 5_000)
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "cold-p50-ns")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "cold-p99-ns")
	}
}

// measure times k Gets, half of keys put, half of keys never put, and
// returns the latencies sorted.
func measure(b *testing.B, x *Index, rng *rand.Rand, k int) []time.Duration {
	lat := make([]time.Duration, k)
	for i := range lat {
		key := rng.IntN(*benchKeys)
		h := spread(key)
		if i%2 == 1 {
			h = spread(*benchKeys + key) // a miss
		}
		t0 := time.Now()
		p, ok, err := x.Get(h)
		lat[i] = time.Since(t0)
		if err != nil || ok != (i%2 == 0) || ok && p != uint64(key+1) {
			b.Fatalf("get %d: %d %v %v", key, p, ok, err)
		}
	}
	slices.Sort(lat)
	return lat
}

// rss returns the process's resident set in bytes after returning free
// heap to the OS.
func rss(b *testing.B) int64 {
	runtime.GC()
	debug.FreeOSMemory()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// openTemp opens an empty index on the OS in a temporary directory.
func openTemp(b *testing.B) *Index {
	x, err := Open(vfs.OS, b.TempDir(), nil, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { x.Close() })
	return x
}
