package sortedrun_test

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hourglass-mq/hourglass/sortedrun"
	"github.com/hourglass-mq/hourglass/sortedrun/sortedruntest"
	"github.com/hourglass-mq/hourglass/vfs"
)

// forEachTail runs body once per user's format that writes tails.
func forEachTail(t *testing.T, body func(t *testing.T, f *sortedrun.Format)) {
	n := 0
	for _, f := range formats {
		if f.Tail {
			n++
			t.Run(f.Name, func(t *testing.T) { body(t, f) })
		}
	}
	if n == 0 {
		t.Fatal("no format writes tails")
	}
}

// countAux is a TailAux whose summary is the number of entries it saw.
type countAux struct{ n uint64 }

func (a *countAux) Add([]byte)    { a.n++ }
func (a *countAux) Bytes() []byte { return binary.LittleEndian.AppendUint64(nil, a.n) }

// tailRun writes run seq of three blocks with a countAux summary into a
// new Mem and returns the Mem, the entries and the run's meta.
func tailRun(t *testing.T, f *sortedrun.Format, seq uint64) (*vfs.Mem, [][]byte, sortedrun.Meta) {
	t.Helper()
	fs := vfs.NewMem()
	es := randomEntries(rand.New(rand.NewPCG(seq, 5)), f, 3*f.PerBlock())[:2*f.PerBlock()+5]
	if err := fs.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	r, err := f.WriteRunAux(fs, dir, seq, []sortedrun.Source{&slice{es: es}}, nil, &countAux{})
	if err != nil {
		t.Fatal(err)
	}
	r.Unref()
	return fs, es, r.Meta
}

// tailBytes is a tail as the package doc draws it, computed here.
func tailBytes(f *sortedrun.Format, m sortedrun.Meta, first []uint64, last uint64, aux []byte) []byte {
	le := binary.LittleEndian
	b := append([]byte("tail"), 1, 0, 0, 0)
	b = le.AppendUint64(b, uint64(len(first)))
	for _, x := range first {
		b = le.AppendUint64(b, x)
	}
	b = le.AppendUint64(b, last)
	b = le.AppendUint32(b, uint32(len(aux)))
	b = append(b, aux...)
	var seed [20]byte
	le.PutUint64(seed[0:], m.Seq)
	le.PutUint64(seed[8:], m.Entries)
	le.PutUint32(seed[16:], m.Sum)
	c := crc32.Update(crc32.Update(f.Seed^0x7461696c, castagnoli, seed[:]), castagnoli, b)
	return le.AppendUint32(b, c)
}

// TestTailLayout: the tail follows the blocks as drawn, and OpenRunTail
// takes the sparse index, the last lead and the summary from it.
func TestTailLayout(t *testing.T) {
	forEachTail(t, func(t *testing.T, f *sortedrun.Format) {
		fs, es, m := tailRun(t, f, 4)
		le := binary.LittleEndian
		first := []uint64{le.Uint64(es[0]), le.Uint64(es[f.PerBlock()]), le.Uint64(es[2*f.PerBlock()])}
		last := le.Uint64(es[len(es)-1])
		aux := le.AppendUint64(nil, uint64(len(es)))
		b := readFile(t, fs, f.RunName(dir, 4))
		if want := tailBytes(f, m, first, last, aux); !slices.Equal(b[3*sortedrun.BlockSize:], want) {
			t.Fatalf("tail\\n%x\\nwant\\n%x", b[3*sortedrun.BlockSize:], want)
		}
		r, why, err := f.OpenRunTail(fs, dir, m)
		if err != nil || r == nil {
			t.Fatalf("OpenRunTail: %v %s", err, why)
		}
		defer r.Unref()
		if !r.FromTail || !slices.Equal(r.First, first) || r.Last != last || !slices.Equal(r.Aux, aux) {
			t.Fatalf("run from tail: %v %x %x %x", r.FromTail, r.First, r.Last, r.Aux)
		}
		if err := r.Verify(nil, nil); err != nil {
			t.Fatal(err)
		}
	})
}

// TestTailIsChecked: a tail with any byte changed, or bound to another run
// (another sequence number, count or sum), is not used: OpenRunTail says
// why and returns no run, and OpenRun still reads the run whole.
func TestTailIsChecked(t *testing.T) {
	forEachTail(t, func(t *testing.T, f *sortedrun.Format) {
		fs, _, m := tailRun(t, f, 4)
		name := f.RunName(dir, 4)
		size := int64(len(readFile(t, fs, name)))
		for off := int64(3 * sortedrun.BlockSize); off < size; off++ {
			fs, _, m := tailRun(t, f, 4)
			sortedruntest.Patch(t, fs, name, off, 1, func(b []byte) { b[0] ^= 0x21 })
			if r, why, err := f.OpenRunTail(fs, dir, m); r != nil || err != nil || why == "" {
				t.Fatalf("byte %d of the tail changed: run %v, %v, %q", off, r, err, why)
			}
			if _, err := readAll(t, fs, f, m); err != nil {
				t.Fatalf("byte %d of the tail changed: the whole read fails: %v", off, err)
			}
		}
		for _, other := range []sortedrun.Meta{
			{Seq: m.Seq, Entries: m.Entries, Sum: m.Sum + 1},
		} {
			if r, why, err := f.OpenRunTail(fs, dir, other); r != nil || why == "" {
				t.Fatalf("a tail opened for %+v: %v %q", other, err, why)
			}
		}
		// The tail of run 5, the same size, renamed to run 4: its check is
		// bound to run 5 (and its blocks' checks too).
		fs5, _, _ := tailRun(t, f, 5)
		b5 := readFile(t, fs5, f.RunName(dir, 5))
		sortedruntest.Patch(t, fs, name, 3*sortedrun.BlockSize, len(b5)-3*sortedrun.BlockSize, func(b []byte) {
			copy(b, b5[3*sortedrun.BlockSize:])
		})
		if r, why, _ := f.OpenRunTail(fs, dir, m); r != nil || why == "" {
			t.Fatalf("the tail of another run was used: %q", why)
		}
	})
}

// TestForgedTailIsCaught: a tail with a good check but a wrong sparse
// index (a bug, not a disk's damage) is caught by every read of a block
// it misplaces, and by Verify: no lookup is sent to the wrong block
// unnoticed.
func TestForgedTailIsCaught(t *testing.T) {
	forEachTail(t, func(t *testing.T, f *sortedrun.Format) {
		fs, es, m := tailRun(t, f, 4)
		le := binary.LittleEndian
		first := []uint64{le.Uint64(es[0]), le.Uint64(es[f.PerBlock()+1]), le.Uint64(es[2*f.PerBlock()])}
		forged := tailBytes(f, m, first, le.Uint64(es[len(es)-1]), nil)
		name := f.RunName(dir, 4)
		whole := append(readFile(t, fs, name)[:3*sortedrun.BlockSize], forged...)
		file, err := fs.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := file.WriteAt(whole, 0); err != nil {
			t.Fatal(err)
		}
		file.Close()
		r, why, err := f.OpenRunTail(fs, dir, m)
		if err != nil || r == nil {
			t.Fatalf("OpenRunTail: %v %q", err, why)
		}
		defer r.Unref()
		err = r.ReadBlocks(0, 3, func([]byte, int) {})
		wantCorrupt(t, f, err, name, sortedrun.BlockSize)
		b := make([]byte, sortedrun.BlockSize)
		_, err = r.ReadBlock(b, 1)
		wantCorrupt(t, f, err, name, sortedrun.BlockSize)
		if err := r.Verify(nil, nil); !errors.Is(err, f.Corrupt) {
			t.Fatalf("Verify: %v", err)
		}
	})
}

// TestVerifyFindsDamageTheTailHid: a run opened from its tail reads only
// its first and last blocks; damage in another is found by the read that
// meets it and by Verify, naming the block; damage in the first block is
// found by the open.
func TestVerifyFindsDamageTheTailHid(t *testing.T) {
	forEachTail(t, func(t *testing.T, f *sortedrun.Format) {
		fs, _, m := tailRun(t, f, 4)
		name := f.RunName(dir, 4)
		sortedruntest.Patch(t, fs, name, sortedrun.BlockSize+100, 1, func(b []byte) { b[0] ^= 2 })
		r, why, err := f.OpenRunTail(fs, dir, m)
		if err != nil || r == nil {
			t.Fatalf("OpenRunTail: %v %q", err, why)
		}
		defer r.Unref()
		wantCorrupt(t, f, r.Verify(nil, nil), name, sortedrun.BlockSize)
		wantCorrupt(t, f, r.ReadBlocks(1, 2, func([]byte, int) {}), name, sortedrun.BlockSize)
		fs, _, m = tailRun(t, f, 4) // the one above withdrew its tail
		sortedruntest.Patch(t, fs, name, 100, 1, func(b []byte) { b[0] ^= 2 })
		_, _, err = f.OpenRunTail(fs, dir, m)
		wantCorrupt(t, f, err, name, 0)
	})
}
