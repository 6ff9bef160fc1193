package keyindex

import (
	"errors"
	"syscall"
	"testing"
)

// TestJobDropsFrozenMaps: once a job has sorted the frozen memtables the
// maps are gone and the sorted entries answer Gets (greatest position per
// hash, against the memtable too); a failed job leaves them sorted, and the
// next job merges them with the memtables frozen since, without losing a
// key or letting a smaller position win.
func TestJobDropsFrozenMaps(t *testing.T) {
	mem, ffs, x := faulty(t, 0)
	x.Put(1, 50)
	x.Put(2, 10)
	x.Put(1, 30) // an older position arriving late: 50 stays
	ffs.SetLimit(1)
	j, err := x.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	x.Put(2, 60) // newer, in the memtable: wins over the sorted 10
	err = j.Run()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("run: %v, want ENOSPC", err)
	}
	x.mu.Lock()
	frozen, sorted := len(x.mu.frozen), len(x.mu.sorted)
	x.mu.Unlock()
	if frozen != 0 || sorted != 2 {
		t.Fatalf("after the job sorted: %d frozen maps, %d sorted entries; want 0 and 2", frozen, sorted)
	}
	wantGet(t, x, 1, 50)
	wantGet(t, x, 2, 60)
	if _, err := x.Complete(j, err); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("complete: %v", err)
	}
	wantGet(t, x, 1, 50)
	if s := x.Stats(); s.Memtable != 3 {
		t.Fatalf("memtable entries %d, want 3 (2 sorted, 1 in the map)", s.Memtable)
	}
	ffs.SetLimit(-1)
	x.Put(1, 40) // older than the sorted 50
	x.Put(3, 70)
	st := checkpoint(t, x)
	if s := x.Stats(); s.Memtable != 0 || s.RunEntries != 3 {
		t.Fatalf("after the retried checkpoint: %+v", s)
	}
	y := openAt(t, mem, st)
	wantGet(t, y, 1, 50)
	wantGet(t, y, 2, 60)
	wantGet(t, y, 3, 70)
}
