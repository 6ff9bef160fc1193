package keyindex

import (
	"errors"
	"syscall"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// faulty returns a Faulty over a fresh Mem and an index in it holding
// keys 0..n-1 in one run.
func faulty(t *testing.T, n int) (*vfs.Mem, *vfs.Faulty, *Index) {
	t.Helper()
	mem := vfs.NewMem()
	ffs := vfs.NewFaulty(mem)
	x := openAt(t, ffs, nil)
	for i := range n {
		x.Put(spread(i), uint64(i+1))
	}
	checkpoint(t, x)
	return mem, ffs, x
}

// TestGetReadError: a failed read is an error, never a miss.
func TestGetReadError(t *testing.T) {
	_, ffs, x := faulty(t, 10)
	ffs.Inject(func(op vfs.Op, _ string) error {
		if op == vfs.OpRead {
			return syscall.EIO
		}
		return nil
	})
	if _, _, err := x.Get(spread(3)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("get: %v, want EIO", err)
	}
	ffs.Inject(nil)
	wantGet(t, x, spread(3), 4)
}

// TestWriteErrorRetried: a job that cannot write (disk full) fails without
// failing the index; its memtable stays readable and the next job writes
// it with the newer Puts.
func TestWriteErrorRetried(t *testing.T) {
	mem, ffs, x := faulty(t, 10)
	x.Put(100, 1000)
	ffs.SetLimit(1)
	j, err := x.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	err = j.Run()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("run: %v, want ENOSPC", err)
	}
	if _, err := x.Complete(j, err); !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrSyncFailed) {
		t.Fatalf("complete: %v", err)
	}
	wantGet(t, x, 100, 1000)
	ffs.SetLimit(-1)
	x.Put(101, 1010)
	st := checkpoint(t, x)
	y := openAt(t, mem, st)
	wantGet(t, y, 100, 1000)
	wantGet(t, y, 101, 1010)
	wantGet(t, y, spread(9), 10)
}

// TestSyncFailureSticky: a failed fsync of a run or of the directory
// fails the index for good, even when the next fsync would succeed.
func TestSyncFailureSticky(t *testing.T) {
	for _, op := range []vfs.Op{vfs.OpSync, vfs.OpSyncDir} {
		_, ffs, x := faulty(t, 10)
		x.Put(100, 1000)
		ffs.FailAfter(op, 0, syscall.EIO)
		j, err := x.Prepare()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := x.Complete(j, j.Run()); !errors.Is(err, ErrSyncFailed) || !errors.Is(err, syscall.EIO) {
			t.Fatalf("%v: complete: %v", op, err)
		}
		ffs.Inject(nil)
		if _, err := x.Prepare(); !errors.Is(err, ErrSyncFailed) {
			t.Fatalf("%v: prepare after the failure: %v", op, err)
		}
		wantGet(t, x, 100, 1000) // reads still answer from RAM
	}
}

// TestCrashBeforeComplete: a power loss after a job ran but before its
// state was stored leaves the previous state valid; Open removes the new
// file.
func TestCrashBeforeComplete(t *testing.T) {
	mem, x, st := oneKey(t)
	x.Put(1, 20)
	x.Put(2, 30)
	j, err := x.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Run(); err != nil {
		t.Fatal(err)
	}
	img := mem.Crash(nil)
	if len(runFiles(t, img)) != 2 {
		t.Fatalf("crash image holds %v, want the old and the new run", runFiles(t, img))
	}
	y := openAt(t, img, st)
	wantGet(t, y, 1, 10)
	wantGet(t, y, 2, 0)
	if files := runFiles(t, img); len(files) != 1 {
		t.Fatalf("after open: %v", files)
	}
}

// TestReleaseDefersDeletion: the runs a merge replaced stay until Release,
// so a power loss before the caller stored the new state opens the old
// one.
func TestReleaseDefersDeletion(t *testing.T) {
	mem, x, old := oneKey(t)
	x.Put(2, 20)
	st, j := complete(t, x) // merges run 1 into run 2
	if s := x.Stats(); s.Runs != 1 {
		t.Fatalf("no merge: %+v", s)
	}
	y := openAt(t, mem.Crash(nil), old)
	wantGet(t, y, 1, 10)
	if err := x.Release(j); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(mem.Clone(), dir, old, 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("old state after release: %v", err)
	}
	z := openAt(t, mem.Crash(nil), st)
	wantGet(t, z, 1, 10)
	wantGet(t, z, 2, 20)
}
