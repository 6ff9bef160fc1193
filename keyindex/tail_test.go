package keyindex

import (
	"errors"
	"path"
	"testing"

	"github.com/hourglass-mq/hourglass/sortedrun/sortedruntest"
	"github.com/hourglass-mq/hourglass/vfs"
)

// fromTail returns whether x's only run came from its tail.
func fromTail(x *Index) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.mu.runs) == 1 && x.mu.runs[0].FromTail
}

// getAll fails unless every key of threeBlocks answers its position.
func getAll(t *testing.T, x *Index) {
	t.Helper()
	for i := range 600 {
		if p, ok, err := x.Get(spread(i)); err != nil || !ok || p != uint64(i+1) {
			t.Fatalf("key %d: %d %v %v", i, p, ok, err)
		}
	}
}

// TestOpenFromTail: a run written now opens from its tail, and answers
// every key; one whose tail is missing (a file of the version before
// tails), damaged or from another run opens by a whole read, which
// computes the sparse index again: a tail is checked, never trusted.
func TestOpenFromTail(t *testing.T) {
	fs, st := threeBlocks(t)
	x := openAt(t, fs, st)
	if !fromTail(x) {
		t.Fatal("a run written with a tail was read whole")
	}
	getAll(t, x)
	x.Close()
	name := runName(dir, 1)
	size := fileSize(t, fs, name)
	for _, c := range []struct {
		what   string
		change func(fs vfs.FS)
	}{
		{"missing", func(fs vfs.FS) { sortedruntest.Truncate(t, fs, name, 3*BlockSize) }},
		{"cut short", func(fs vfs.FS) { sortedruntest.Truncate(t, fs, name, size-5) }},
		{"a flipped bit in the sparse index", func(fs vfs.FS) {
			sortedruntest.Patch(t, fs, name, 3*BlockSize+16+9, 1, func(b []byte) { b[0] ^= 1 })
		}},
		{"a flipped bit in the check", func(fs vfs.FS) { sortedruntest.Patch(t, fs, name, size-1, 1, func(b []byte) { b[0] ^= 0x10 }) }},
	} {
		t.Run(c.what, func(t *testing.T) {
			fs, st := threeBlocks(t)
			c.change(fs)
			x := openAt(t, fs, st)
			if fromTail(x) {
				t.Fatal("a run whose tail is " + c.what + " was opened from it")
			}
			getAll(t, x)
			if err := x.Verify(nil); err != nil {
				t.Fatalf("Verify of a run read whole: %v", err)
			}
		})
	}
}

// fileSize returns the size of name.
func fileSize(t *testing.T, fs vfs.FS, name string) int64 {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestVerifyFindsDamage: damage in a block Open did not read (the run came
// from its tail) is found by Verify, which leaves a mark: the next Open of
// the state refuses it as ErrCorrupt, so the caller rebuilds, and a
// rebuild's Open (no state) deletes the mark. The open Index still
// answers the keys of the blocks that are whole.
func TestVerifyFindsDamage(t *testing.T) {
	fs, st := threeBlocks(t)
	name := runName(dir, 1)
	sortedruntest.Patch(t, fs, name, BlockSize+7, 1, func(b []byte) { b[0] ^= 4 })
	x := openAt(t, fs, st)
	if !fromTail(x) {
		t.Fatal("not opened from the tail")
	}
	err := x.Verify(nil)
	wantCorrupt(t, err, name, BlockSize)
	if p, ok, err := x.Get(spread(0)); err != nil || !ok || p != 1 {
		t.Fatalf("a key of a whole block: %d %v %v", p, ok, err)
	}
	if err := x.Verify(nil); err != nil {
		t.Fatalf("a second Verify: %v (it checks each run once)", err)
	}
	x.Close()
	_, err = Open(fs, dir, st, 0)
	wantCorrupt(t, err, path.Join(dir, damageMark), 0)
	openAt(t, fs, nil).Close()
	if _, err := fs.Open(path.Join(dir, damageMark)); !vfs.IsNotExist(err) {
		t.Fatalf("the mark outlived a rebuild's Open: %v", err)
	}
}

// TestVerifyPaces: Verify asks onRead before every read, and stops with
// its error, checking that run again at the next Verify.
func TestVerifyPaces(t *testing.T) {
	fs, st := threeBlocks(t)
	x := openAt(t, fs, st)
	stop := errors.New("stop")
	if err := x.Verify(func(int) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("Verify: %v, want the pace's error", err)
	}
	read := 0
	if err := x.Verify(func(n int) error { read += n; return nil }); err != nil || read != 3*BlockSize {
		t.Fatalf("Verify after a stop: %v, %d bytes read, want the run's %d", err, read, 3*BlockSize)
	}
}
