package timerstore

import (
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// benchEntries is the size of the run the benchmarks write, open and read:
// 200k timers over 200 one-second buckets, about 1,200 blocks.
const benchEntries = 200_000

// benchStore returns a store on the OS in a temporary directory holding
// benchEntries timers in one run, and its state.
func benchStore(b *testing.B) (string, []byte) {
	b.Helper()
	d := b.TempDir()
	s, err := Open(vfs.OS, d, width, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := range benchEntries {
		s.Add(entry(int64(i*7919%benchEntries), uint64(i)))
	}
	return d, checkpoint(b, s)
}

// BenchmarkCheckpoint measures a checkpoint's job: sorting 20k fresh
// timers and merging them with the run before (the merge policy absorbs a
// run while it is small), written and fsynced on the OS.
func BenchmarkCheckpoint(b *testing.B) {
	s, err := Open(vfs.OS, b.TempDir(), width, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	for i := range b.N {
		b.StopTimer()
		for k := range 20_000 {
			s.Add(entry(int64((i*20_000+k)*7919%benchEntries), uint64(i*20_000+k)))
		}
		b.StartTimer()
		checkpoint(b, s)
	}
}

// BenchmarkOpen measures the restart's check of a run of benchEntries:
// every block read, checked and handed to visit.
func BenchmarkOpen(b *testing.B) {
	d, st := benchStore(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		n := 0
		s, err := Open(vfs.OS, d, width, st, func(Entry) { n++ })
		if err != nil || n != benchEntries {
			b.Fatalf("open: %v, %d entries", err, n)
		}
		s.Close()
	}
}

// BenchmarkLoad measures loading one bucket of 1,000 timers from a run:
// the sparse index search, one read of a few blocks, their checks.
func BenchmarkLoad(b *testing.B) {
	d, st := benchStore(b)
	s, err := Open(vfs.OS, d, width, st, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		bk := int64(i%200) * width
		if es := load(b, s, bk); len(es) != 1000 {
			b.Fatalf("bucket %d: %d entries", bk, len(es))
		}
	}
}
