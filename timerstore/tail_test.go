package timerstore

import (
	"encoding/binary"
	"errors"
	"path"
	"slices"
	"testing"

	"github.com/hourglass-mq/hourglass/sortedrun/sortedruntest"
	"github.com/hourglass-mq/hourglass/vfs"
)

// tailStore returns a Mem holding one run of 400 timers over 4 buckets
// (three blocks) and its state, and the entries.
func tailStore(t *testing.T) (*vfs.Mem, []byte, []Entry) {
	t.Helper()
	mem := vfs.NewMem()
	s := open(t, mem, nil)
	var es []Entry
	for i := range uint64(400) {
		e := entry(int64(i)*10, i+1)
		es = append(es, e)
		s.Add(e)
	}
	st := checkpoint(t, s)
	s.Close()
	return mem, st, es
}

// fromTail reports whether every run of s came from its tail.
func fromTail(s *Store) bool {
	for _, r := range s.runs {
		if !r.FromTail {
			return false
		}
	}
	return len(s.runs) > 0
}

// wantBuckets fails unless s counts the buckets of es, each with its
// entries, and loads them.
func wantBuckets(t *testing.T, s *Store, es []Entry) {
	t.Helper()
	want := map[int64]int64{}
	for _, e := range es {
		want[s.BucketOf(e.Due)]++
	}
	if len(s.count) != len(want) {
		t.Fatalf("%d buckets counted, want %d", len(s.count), len(want))
	}
	for b, n := range want {
		if s.count[b] != n || int64(len(load(t, s, b))) != n {
			t.Fatalf("bucket %d: counted %d, loads %d, want %d", b, s.count[b], len(load(t, s, b)), n)
		}
	}
}

// TestOpenCountsFromTheTail: without a visit, Open takes a run's sparse
// index and its buckets from the run's tail, and counts the same buckets
// as a whole read; a summary that is missing (a run of the version before
// tails), fails the tail's check, or disagrees with the run (a forged
// count: the tail's check made good again) is not used: the run is read
// whole and counted again.
func TestOpenCountsFromTheTail(t *testing.T) {
	mem, st, es := tailStore(t)
	s := open(t, mem, st)
	if !fromTail(s) {
		t.Fatal("a run with a tail was read whole")
	}
	wantBuckets(t, s, es)
	name := path.Join(dir, runFiles(t, mem)[0])
	for _, c := range []struct {
		what   string
		change func(mem *vfs.Mem, st []byte)
	}{
		{"missing", func(mem *vfs.Mem, st []byte) { sortedruntest.Truncate(t, mem, name, 3*BlockSize) }},
		{"damaged", func(mem *vfs.Mem, st []byte) {
			sortedruntest.Patch(t, mem, name, 3*BlockSize+50, 1, func(b []byte) { b[0] ^= 8 })
		}},
		{"forged", func(mem *vfs.Mem, st []byte) { forgeCount(t, mem, name, st) }},
	} {
		t.Run(c.what, func(t *testing.T) {
			mem, st, es := tailStore(t)
			c.change(mem, st)
			s := open(t, mem, st)
			if fromTail(s) {
				t.Fatalf("a run whose tail is %s was counted from it", c.what)
			}
			wantBuckets(t, s, es)
		})
	}
}

// forgeCount raises the count of the run's first bucket in its tail's
// summary by one and seals the tail again with a good check, as a bug
// writing it would: the counts then disagree with the run's entries.
func forgeCount(t *testing.T, mem *vfs.Mem, name string, st []byte) {
	t.Helper()
	s := open(t, mem, st)
	r := s.runs[0]
	if !r.FromTail {
		t.Fatal("the run did not open from its tail")
	}
	aux := slices.Clone(r.Aux)
	binary.LittleEndian.PutUint64(aux[16+8:], binary.LittleEndian.Uint64(aux[16+8:])+1)
	tail := format.EncodeTailForTest(r.Meta, r.First, r.Last, aux)
	s.Close()
	sortedruntest.Truncate(t, mem, name, 3*BlockSize)
	f, err := mem.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(tail, 3*BlockSize); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestEachFindsDamage: Open from tails reads two blocks of a run; damage
// in another is found by a RunsPlan's Each (which the engine runs in the
// background), which leaves a mark: the next Open of the state refuses it
// as ErrCorrupt, and a nil state (the rebuild) deletes it.
func TestEachFindsDamage(t *testing.T) {
	mem, st, es := tailStore(t)
	name := path.Join(dir, runFiles(t, mem)[0])
	sortedruntest.Patch(t, mem, name, BlockSize+100, 1, func(b []byte) { b[0] ^= 0x10 })
	s := open(t, mem, st)
	if !fromTail(s) {
		t.Fatal("not opened from the tail")
	}
	n := 0
	err := s.RunsPlan().Each(func(Entry) { n++ }, nil)
	var ce *CorruptError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.File != name || ce.Offset != BlockSize {
		t.Fatalf("Each: %v, want the damage of block 1", err)
	}
	s.Close()
	_, err = Open(mem, dir, width, st, nil)
	if !errors.As(err, &ce) || ce.File != path.Join(dir, damageMark) {
		t.Fatalf("Open after the damage was found: %v, want the mark's ErrCorrupt", err)
	}
	open(t, mem, nil)
	if files := runFiles(t, mem); len(files) != 0 {
		t.Fatalf("after a nil state: files %v", files)
	}
	// A whole run: Each hands every live entry once, and leaves no mark.
	mem, st, es = tailStore(t)
	s = open(t, mem, st)
	var got []Entry
	if err := s.RunsPlan().Each(func(e Entry) { got = append(got, e) }, nil); err != nil || !slices.Equal(got, es) {
		t.Fatalf("Each: %v, %d entries, want %d", err, len(got), len(es))
	}
	open(t, mem, st)
}

// TestOpenWithAnotherWidth: a summary counts buckets of the width the run
// was written with; a store opened with another width reads the run whole
// and counts its own buckets.
func TestOpenWithAnotherWidth(t *testing.T) {
	mem, st, es := tailStore(t)
	s, err := Open(mem, dir, 3*width, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if fromTail(s) {
		t.Fatal("counted from a summary of another width")
	}
	wantBuckets(t, s, es)
}
