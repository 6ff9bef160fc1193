package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
)

// BenchmarkSendDedup64 is BenchmarkSendSync64's durable produce (64
// goroutines, 1 KiB bodies due in an hour, sync flush on a real directory)
// with and without a dedup ID on every send, in one run, so the cost of
// the claim, the index lookup and the longer record shows as a ratio.
// "retry" sends every message twice; the second is answered from the index.
func BenchmarkSendDedup64(b *testing.B) {
	for _, mode := range []string{"plain", "dedup", "retry"} {
		b.Run(mode, func(b *testing.B) {
			e, err := Open(Options{Dir: b.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			body := make([]byte, 1024)
			var next atomic.Int64
			var failed atomic.Value
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for p := 0; p < 64; p++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						m := message.Message{Topic: "bench", Body: body}
						if mode != "plain" {
							m.DedupID = fmt.Sprint("op-", i)
						}
						sends := 1
						if mode == "retry" {
							sends = 2
						}
						for range sends {
							if _, err := e.Send(context.Background(), m, message.When{Delay: time.Hour}); err != nil {
								failed.Store(err)
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
			if got := e.Stats().Pending.Load(); got != int64(b.N) {
				b.Fatalf("pending %d after %d distinct sends", got, b.N)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
		})
	}
}

// TestDedupMemoryPerKey measures the RAM a live dedup entry costs: the
// heap after N sends with a dedup ID each, minus the heap after N plain
// sends, over N. Both run at a steady pace of checkpoints (one per 10,000
// sends), which move the key index's memtable to run files on disk; what
// stays in RAM is the runs' sparse index and a memtable sized for the
// traffic between two checkpoints (about 40 B per key sent in that time).
// By default it sends 50,000 keys with a checkpoint every 2,500 (the same
// keys per checkpoint against the total as the measurement, so the same
// bound holds); with HOURGLASS_DEDUP_MEM=1 it sends 200,000 with a
// checkpoint every 10,000 and prints the figure docs/benchmarks.md quotes
// (row dedup-ram).
func TestDedupMemoryPerKey(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED in -short: a 50,000-key measurement; `make test-durability` (CI) runs it")
	}
	n, batch := 50_000, 250
	if os.Getenv("HOURGLASS_DEDUP_MEM") == "1" {
		n, batch = 200_000, 1000
	}
	heap := func(dedup bool) (uint64, int) {
		e, err := Open(Options{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), CheckpointInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		reqs := make([]SendRequest, batch)
		for i := 0; i < n; i += len(reqs) {
			for j := range reqs {
				reqs[j] = SendRequest{Message: message.Message{Topic: "m", Body: []byte("x")}, When: message.When{Delay: time.Hour}}
				if dedup {
					reqs[j].Message.DedupID = fmt.Sprintf("op-%09d", i+j)
				}
			}
			if _, err := e.SendBatch(context.Background(), reqs); err != nil {
				t.Fatal(err)
			}
			if (i/len(reqs))%10 == 9 {
				// Steady traffic: a checkpoint every 10 batches, n/20
				// sends (the memtable is presized like the last one's
				// traffic).
				if err := e.checkpoint(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := e.checkpoint(); err != nil {
			t.Fatal(err)
		}
		// Every entry must still answer after the memtable went to disk.
		r, err := e.Send(context.Background(), reqs[0].Message, reqs[0].When)
		if err != nil || dedup && !r.Duplicate {
			t.Fatalf("lookup after checkpoint: %+v %v", r, err)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc, e.keys.Stats().IndexBytes
	}
	plain, _ := heap(false)
	dedup, idx := heap(true)
	per := (float64(dedup) - float64(plain)) / float64(n)
	t.Logf("dedup RAM per live key, %d keys: heap %+.2f B/key (with %d vs without %d B); key index sparse index %.3f B/key",
		n, per, dedup, plain, float64(idx)/float64(n))
	if per > 8 {
		t.Errorf("a dedup key costs %.1f B of heap; it should live on disk", per)
	}
}
