package timerstore

import (
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// BenchmarkPrepareSync43k is the part of a checkpoint's capture that runs
// under the engine's lock for a buffer spread over 43,200 one-minute
// buckets (30 days): PrepareSync and SizesSnapshot. The job itself is not
// run: the buckets are made again for every iteration.
func BenchmarkPrepareSync43k(b *testing.B) {
	const buckets = 43_200
	s, err := Open(vfs.NewMem(), "timers", 60_000)
	if err != nil {
		b.Fatal(err)
	}
	s.ManualFlush = true
	s.SizesSnapshot()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		for k := range buckets {
			if err := s.Add(Entry{Due: int64(k) * 60_000, Pos: uint64(i*buckets + k + 1), Kind: 1}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		j := s.PrepareSync()
		s.SizesSnapshot()
		b.StopTimer()
		s.Complete(j, nil) // as if the job had run
		b.StartTimer()
	}
}
