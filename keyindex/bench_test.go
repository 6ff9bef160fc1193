package keyindex

import (
	"path"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// BenchmarkPut measures the send path's cost: one Put, with a Flush every
// 4096 entries.
func BenchmarkPut(b *testing.B) {
	x, err := Open(vfs.OS, path.Join(b.TempDir(), "keys.idx"), 0, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	b.ReportAllocs()
	for i := range b.N {
		x.Put(uint64(i)*0x9e3779b97f4a7c15, uint64(i))
		if i%4096 == 4095 {
			if err := x.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkOpen1M measures recovery's check and load of one million keys
// (warm page cache).
func BenchmarkOpen1M(b *testing.B) {
	name := path.Join(b.TempDir(), "keys.idx")
	x, err := Open(vfs.OS, name, 0, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	const n = 1_000_000
	for i := range n {
		x.Put(uint64(i)*0x9e3779b97f4a7c15, uint64(i))
	}
	if err := x.Flush(); err != nil {
		b.Fatal(err)
	}
	keep := x.Len()
	x.Close()
	b.SetBytes(keep)
	b.ResetTimer()
	for range b.N {
		y, err := Open(vfs.OS, name, keep, 0, nil)
		if err != nil || y.Keys() != n {
			b.Fatal(err)
		}
		y.Close()
	}
}
