package sortedrun_test

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hourglass-mq/hourglass/sortedrun"
	"github.com/hourglass-mq/hourglass/vfs"
)

// These tests pin the layouts drawn in the package doc, computed here
// independently of the code that writes them.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// seal writes the trailer of block blk of run seq as the doc draws it:
// count, a zero reserved field, and the check seeded with seq and blk.
func seal(f *sortedrun.Format, b []byte, seq uint64, blk int64, count int) uint32 {
	le := binary.LittleEndian
	le.PutUint32(b[4080:], uint32(count))
	clear(b[4084:4092])
	var seed [16]byte
	le.PutUint64(seed[0:], seq)
	le.PutUint64(seed[8:], uint64(blk))
	c := crc32.Update(crc32.Update(f.Seed, castagnoli, seed[:]), castagnoli, b[:4092])
	le.PutUint32(b[4092:], c)
	return c
}

// TestRunLayout: entries at the start of each block, full blocks but the
// last, zero unused slots, the trailer and check as drawn, and the run's
// sum in the state.
func TestRunLayout(t *testing.T) {
	forEach(t, func(t *testing.T, f *sortedrun.Format) {
		full := 4080 / f.EntrySize
		if full != f.PerBlock() {
			t.Fatalf("%d entries a block, the doc says %d", f.PerBlock(), full)
		}
		fs := vfs.NewMem()
		es := randomEntries(rand.New(rand.NewPCG(1, 1)), f, 2*full+3)
		es = es[:full+3]
		r := writeRun(t, fs, f, 7, es)
		b := readFile(t, fs, r.Name)
		if tail := 16 + 2*8 + 8 + 4 + 4; len(b) != 2*4096 && !f.Tail || f.Tail && len(b) != 2*4096+tail {
			t.Fatalf("%d bytes, want two blocks (and a tail of no summary with tails: %v)", len(b), f.Tail)
		}
		le := binary.LittleEndian
		sum := f.Seed
		for blk, count := range []int{full, 3} {
			p := slices.Clone(b[blk*4096 : (blk+1)*4096])
			for i := range count {
				if !slices.Equal(p[i*f.EntrySize:(i+1)*f.EntrySize], es[blk*full+i]) {
					t.Fatalf("block %d: entry %d not at offset %d", blk, i, i*f.EntrySize)
				}
			}
			if slices.ContainsFunc(p[count*f.EntrySize:4080], func(c byte) bool { return c != 0 }) {
				t.Fatalf("block %d: unused bytes not zero", blk)
			}
			check := le.Uint32(p[4092:])
			if c := seal(f, p, 7, int64(blk), count); c != check || !slices.Equal(p, b[blk*4096:(blk+1)*4096]) {
				t.Fatalf("block %d: trailer %x, want count %d and check %08x", blk, b[blk*4096+4080:(blk+1)*4096], count, c)
			}
			sum = crc32.Update(sum, castagnoli, p[4092:])
		}
		if r.Meta != (sortedrun.Meta{Seq: 7, Entries: uint64(full + 3), Sum: sum}) {
			t.Fatalf("meta %+v, want sum %08x", r.Meta, sum)
		}
		if r.First[0] != binary.LittleEndian.Uint64(es[0]) || r.First[1] != binary.LittleEndian.Uint64(es[full]) ||
			r.Last != binary.LittleEndian.Uint64(es[len(es)-1]) {
			t.Fatalf("sparse index %x, last %x", r.First, r.Last)
		}
	})
}

// TestStateLayout: the state's bytes as drawn, with the deadBelow field
// only in a format that records it.
func TestStateLayout(t *testing.T) {
	forEach(t, func(t *testing.T, f *sortedrun.Format) {
		st := sortedrun.State{NextSeq: 9, Runs: []sortedrun.Meta{{Seq: 3, Entries: 7, DeadBelow: -5, Sum: 0xabcd}}}
		b := f.EncodeState(st)
		le := binary.LittleEndian
		rs := 24
		if f.DeadBelow {
			rs = 32
		}
		if len(b) != 20+rs+4 || string(b[:4]) != f.Magic || le.Uint16(b[4:]) != 1 || le.Uint16(b[6:]) != 0 ||
			le.Uint64(b[8:]) != 9 || le.Uint32(b[16:]) != 1 || le.Uint64(b[20:]) != 3 || le.Uint64(b[28:]) != 7 {
			t.Fatalf("state bytes %x", b)
		}
		p := b[36:]
		if f.DeadBelow {
			if int64(le.Uint64(p)) != -5 {
				t.Fatalf("deadBelow %x", p[:8])
			}
			p = p[8:]
		}
		if le.Uint32(p) != 0xabcd || le.Uint32(p[4:]) != 0 {
			t.Fatalf("sum and reserved %x", p[:8])
		}
		if le.Uint32(b[len(b)-4:]) != crc32.Update(f.Seed, castagnoli, b[:len(b)-4]) {
			t.Fatal("state check is not CRC-32C from the seed")
		}
		got, err := f.DecodeState(b)
		if !f.DeadBelow {
			st.Runs[0].DeadBelow = 0
		}
		if err != nil || got.NextSeq != 9 || !slices.Equal(got.Runs, st.Runs) {
			t.Fatalf("decoded %+v %v", got, err)
		}
		if empty, err := f.DecodeState(nil); err != nil || empty.NextSeq != 1 || len(empty.Runs) != 0 {
			t.Fatalf("nil state: %+v %v", empty, err)
		}
	})
}

// TestRunNames: %016x and the suffix, and nothing else parses.
func TestRunNames(t *testing.T) {
	forEach(t, func(t *testing.T, f *sortedrun.Format) {
		name := f.RunName("d", 0xab)
		if name != "d/00000000000000ab"+f.Suffix {
			t.Fatalf("name %s", name)
		}
		if seq, ok := f.ParseRunName(name[2:]); !ok || seq != 0xab {
			t.Fatalf("parse %s: %d %v", name, seq, ok)
		}
		for _, bad := range []string{"ab" + f.Suffix, "00000000000000ab.tmp", "0000000000000zab" + f.Suffix, "x"} {
			if _, ok := f.ParseRunName(bad); ok {
				t.Fatalf("%s parsed as a run name", bad)
			}
		}
	})
}

// readFile returns the bytes of name.
func readFile(t testing.TB, fs vfs.FS, name string) []byte {
	t.Helper()
	file, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	size, err := file.Size()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	if _, err := file.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

func crcUpdate(c uint32, p []byte) uint32 { return crc32.Update(c, castagnoli, p) }
