package keyindex

import (
	"runtime"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// heapAfterGC is the live heap, in bytes, after a collection.
func heapAfterGC() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestIdleDropsPresizedMemtable: a checkpoint after busy traffic presizes
// the next memtable for as much again; once a checkpoint sees no Put, that
// table goes, so an idle index holds no memtable memory (about 8 MiB at
// maxPresize). Not parallel: it reads the process's heap.
func TestIdleDropsPresizedMemtable(t *testing.T) {
	x := openAt(t, vfs.NewMem(), nil)
	const mul = 0x9e3779b97f4a7c15 // spreads the hashes
	for i := uint64(1); i <= maxPresize; i++ {
		x.Put(i*mul, i)
	}
	checkpoint(t, x) // the next memtable is presized for maxPresize entries
	busy := heapAfterGC()
	checkpoint(t, x) // no Put since: idle
	idle := heapAfterGC()
	five := uint64(5)
	if freed := busy - idle; freed < 4<<20 {
		t.Fatalf("an idle checkpoint freed %d B of the presized memtable, want at least 4 MiB", freed)
	}
	if pos, ok, err := x.Get(five * mul); err != nil || !ok || pos != 5 {
		t.Fatalf("Get after the idle checkpoint: %d %v %v, want 5", pos, ok, err)
	}
}
