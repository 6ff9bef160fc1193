package keyindex

import (
	"errors"
	"testing"

	"github.com/hourglass-mq/hourglass/sortedrun/sortedruntest"
	"github.com/hourglass-mq/hourglass/vfs"
)

// threeBlocks returns a Mem holding one run of 600 entries (three blocks,
// the last partly filled) and its state.
func threeBlocks(t *testing.T) (*vfs.Mem, []byte) {
	t.Helper()
	fs := vfs.NewMem()
	x := openAt(t, fs, nil)
	for i := range 600 {
		x.Put(spread(i), uint64(i+1))
	}
	st := checkpoint(t, x)
	x.Close()
	return fs, st
}

// TestOpenRejectsDamage: damage in a run Open reads is an ErrCorrupt of
// this package naming the file and the block (the kinds of damage are
// package sortedrun's tests): a run of a version before tails, read whole,
// and the first and last blocks of one opened from its tail.
func TestOpenRejectsDamage(t *testing.T) {
	for _, c := range []struct {
		name   string
		block  int64
		noTail bool
	}{{"middle block, no tail", 1, true}, {"first block", 0, false}, {"last block", 2, false}} {
		t.Run(c.name, func(t *testing.T) {
			fs, st := threeBlocks(t)
			name := runName(dir, 1)
			if c.noTail {
				sortedruntest.Truncate(t, fs, name, 3*BlockSize)
			}
			sortedruntest.Patch(t, fs, name, c.block*BlockSize+7, 1, func(b []byte) { b[0] ^= 4 })
			_, err := Open(fs, dir, st, 0)
			wantCorrupt(t, err, name, c.block*BlockSize)
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.File != name {
				t.Fatalf("not a CorruptError naming the file: %v", err)
			}
		})
	}
}

// TestGetChecksBlock: damage after Open is found by the Get that reads the
// block, as an error, not a miss; other blocks still answer.
func TestGetChecksBlock(t *testing.T) {
	fs, st := threeBlocks(t)
	x := openAt(t, fs, st)
	sortedruntest.Patch(t, fs, runName(dir, 1), 0, 1, func(b []byte) { b[0] ^= 0x80 })
	bad := 0
	for i := range 600 {
		p, ok, err := x.Get(spread(i))
		switch {
		case errors.Is(err, ErrCorrupt):
			bad++
		case err != nil || !ok || p != uint64(i+1):
			t.Fatalf("key %d: %d %v %v", i, p, ok, err)
		}
	}
	if bad != format.PerBlock() {
		t.Fatalf("%d keys saw the damage, want the %d of the first block", bad, format.PerBlock())
	}
}

// TestOpenRemovesUnlisted: run files no state lists are deleted, other
// files are left alone, and the next run never reuses a deleted one's
// name.
func TestOpenRemovesUnlisted(t *testing.T) {
	fs, st := threeBlocks(t)
	for _, n := range []string{runName(dir, 0xff), dir + "/notes.txt"} {
		f, err := fs.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	x := openAt(t, fs, st)
	if files := runFiles(t, fs); len(files) != 1 || files[0] != runName(dir, 1) {
		t.Fatalf("run files %v", files)
	}
	if _, err := fs.Open(dir + "/notes.txt"); err != nil {
		t.Fatal(err)
	}
	x.Put(1, 1)
	st = checkpoint(t, x)
	if s, _ := format.DecodeState(st); s.Runs[len(s.Runs)-1].Seq != 0x100 {
		t.Fatalf("new run %d, want 0x100", s.Runs[len(s.Runs)-1].Seq)
	}
	openAt(t, fs, nil)
	if files := runFiles(t, fs); len(files) != 0 {
		t.Fatalf("open with no state left %v", files)
	}
}
