package keyindex

import (
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// BenchmarkCheckpoint measures a checkpoint's job: sorting 20k fresh keys
// and merging them with the newest runs, written and fsynced on the OS.
func BenchmarkCheckpoint(b *testing.B) {
	x := openTemp(b)
	b.ReportAllocs()
	for i := range b.N {
		b.StopTimer()
		for k := range 20_000 {
			x.Put(spread(i*20_000+k), uint64(i*20_000+k))
		}
		b.StartTimer()
		checkpoint(b, x)
	}
}

// BenchmarkOpen measures the restart's check of 200k keys in one run:
// every block read and checked, the sparse index rebuilt.
func BenchmarkOpen(b *testing.B) {
	d := b.TempDir()
	x, err := Open(vfs.OS, d, nil, 0)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 200_000 {
		x.Put(spread(i), uint64(i))
	}
	st := checkpoint(b, x)
	x.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		y, err := Open(vfs.OS, d, st, 0)
		if err != nil {
			b.Fatal(err)
		}
		y.Close()
	}
}
