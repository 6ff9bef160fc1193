package sortedrun_test

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/sortedrun"
	"github.com/hourglass-mq/hourglass/sortedrun/sortedruntest"
	"github.com/hourglass-mq/hourglass/vfs"
)

// threeBlocks returns a Mem holding run 1 of two full blocks and a part
// of a third, its entries and its meta.
func threeBlocks(t *testing.T, f *sortedrun.Format) (*vfs.Mem, [][]byte, sortedrun.Meta) {
	t.Helper()
	fs := vfs.NewMem()
	es := randomEntries(rand.New(rand.NewPCG(3, 3)), f, 3*f.PerBlock())
	es = es[:2*f.PerBlock()+f.PerBlock()/2]
	r := writeRun(t, fs, f, 1, es)
	return fs, es, r.Meta
}

// TestOpenRejectsZeroBlock: a block of zeros (a file extended but never
// written) fails its check.
func TestOpenRejectsZeroBlock(t *testing.T) {
	forEach(t, func(t *testing.T, f *sortedrun.Format) {
		fs, _, m := threeBlocks(t, f)
		name := f.RunName(dir, 1)
		sortedruntest.Patch(t, fs, name, sortedrun.BlockSize, sortedrun.BlockSize, func(b []byte) { clear(b) })
		_, err := readAll(t, fs, f, m)
		wantCorrupt(t, f, err, name, sortedrun.BlockSize)
	})
}

// TestOpenRejectsBitFlips: a flipped bit anywhere in a run fails the check
// of its block, and the error names the block.
func TestOpenRejectsBitFlips(t *testing.T) {
	forEach(t, func(t *testing.T, f *sortedrun.Format) {
		name := f.RunName(dir, 1)
		for off := int64(0); off < 3*sortedrun.BlockSize; off += 61 {
			fs, _, m := threeBlocks(t, f)
			sortedruntest.Patch(t, fs, name, off, 1, func(b []byte) { b[0] ^= 1 << (off % 8) })
			_, err := readAll(t, fs, f, m)
			wantCorrupt(t, f, err, name, off/sortedrun.BlockSize*sortedrun.BlockSize)
		}
	})
}

// TestOpenRejectsMisplacedBlock: a valid block of another place in the
// same run, or of another run at the same place, fails: the check is
// seeded with both.
func TestOpenRejectsMisplacedBlock(t *testing.T) {
	forEach(t, func(t *testing.T, f *sortedrun.Format) {
		fs, es, m := threeBlocks(t, f)
		name := f.RunName(dir, 1)
		var first []byte
		sortedruntest.Patch(t, fs, name, 0, sortedrun.BlockSize, func(b []byte) { first = append(first, b...) })
		sortedruntest.Patch(t, fs, name, sortedrun.BlockSize, sortedrun.BlockSize, func(b []byte) { copy(b, first) })
		_, err := readAll(t, fs, f, m)
		wantCorrupt(t, f, err, name, sortedrun.BlockSize)

		other := writeRun(t, fs, f, 2, es)
		sortedruntest.Patch(t, fs, other.Name, 0, sortedrun.BlockSize, func(b []byte) { copy(b, first) })
		_, err = readAll(t, fs, f, other.Meta)
		wantCorrupt(t, f, err, other.Name, 0)
	})
}

// TestOpenRejectsWrongSize: a missing or short run file is damage, found
// before its blocks are read, and so is a long one of a format without
// tails (with tails, what follows the blocks is a tail, checked before it
// is used), and a state's entry count that does not fit the file.
func TestOpenRejectsWrongSize(t *testing.T) {
	const bs = sortedrun.BlockSize
	forEach(t, func(t *testing.T, f *sortedrun.Format) {
		name := f.RunName(dir, 1)
		cases := []struct {
			size int64 // -1: removed
			off  int64
		}{{-1, 0}, {0, 0}, {bs + 100, bs + 100}, {3*bs - 1, 3*bs - 1}}
		if !f.Tail {
			cases = append(cases, struct{ size, off int64 }{4 * bs, 3 * bs})
		}
		for _, c := range cases {
			fs, _, m := threeBlocks(t, f)
			if c.size < 0 {
				if err := fs.Remove(name); err != nil {
					t.Fatal(err)
				}
			} else {
				sortedruntest.Truncate(t, fs, name, c.size)
			}
			_, err := readAll(t, fs, f, m)
			wantCorrupt(t, f, err, name, c.off)
			_, _, err = f.OpenRunTail(fs, dir, m)
			wantCorrupt(t, f, err, name, c.off)
		}
		// A state that records 2^50 entries: OpenRun must see the file's
		// size before it sizes the sparse index from the count.
		fs, _, m := threeBlocks(t, f)
		size := int64(len(readFile(t, fs, name)))
		m.Entries = 1 << 50
		_, err := readAll(t, fs, f, m)
		wantCorrupt(t, f, err, name, size)
		_, _, err = f.OpenRunTail(fs, dir, m)
		wantCorrupt(t, f, err, name, size)
	})
}

// TestOpenRejectsForgedBlocks: blocks whose check is right but whose
// content no writer makes: entries out of order or repeating a key, a
// count that does not fit the run, a reserved field set, an entry with the
// key of the last one of the block before; and a run whose blocks are all
// right but not the ones the state's sum recorded.
func TestOpenRejectsForgedBlocks(t *testing.T) {
	const bs = sortedrun.BlockSize
	forEach(t, func(t *testing.T, f *sortedrun.Format) {
		name := f.RunName(dir, 1)
		full, es := f.PerBlock(), f.EntrySize
		_, entries, _ := threeBlocks(t, f)
		lastOfFirst := entries[full-1]
		forge := map[string]struct {
			change func(b []byte) int // alters block 1, returns its count
			off    int64
		}{
			"swapped entries": {func(b []byte) int {
				a := append([]byte(nil), b[3*es:4*es]...)
				copy(b[3*es:], b[4*es:5*es])
				copy(b[4*es:], a)
				return full
			}, bs + 4*int64(es)},
			"repeated key": {func(b []byte) int { copy(b[4*es:4*es+f.KeySize], b[3*es:]); return full }, bs + 4*int64(es)},
			"short block":  {func(b []byte) int { return full - 1 }, bs + 4080},
			"zero count":   {func(b []byte) int { return 0 }, bs + 4080},
			"huge count":   {func(b []byte) int { return full + 1 }, bs + 4080},
			"reserved": {func(b []byte) int {
				seal(f, b, 1, 1, full)
				b[4085] = 1
				return -1
			}, bs + 4080},
		}
		forge["key of the block before"] = struct {
			change func(b []byte) int
			off    int64
		}{func(b []byte) int { copy(b, lastOfFirst[:f.KeySize]); return full }, bs}
		for what, c := range forge {
			t.Run(what, func(t *testing.T) {
				fs, _, m := threeBlocks(t, f)
				sortedruntest.Patch(t, fs, name, bs, bs, func(b []byte) {
					if n := c.change(b); n >= 0 {
						seal(f, b, 1, 1, n)
					} else {
						resealKeepingTrailer(f, b, 1, 1)
					}
				})
				_, err := readAll(t, fs, f, m)
				wantCorrupt(t, f, err, name, c.off)
			})
		}
		fs, _, m := threeBlocks(t, f)
		m.Sum ^= 1
		_, err := readAll(t, fs, f, m)
		wantCorrupt(t, f, err, name, 3*bs)
	})
}

// resealKeepingTrailer recomputes block b's check over its trailer as it
// is.
func resealKeepingTrailer(f *sortedrun.Format, b []byte, seq uint64, blk int64) {
	count := int(binary.LittleEndian.Uint32(b[4080:]))
	reserved := append([]byte(nil), b[4084:4092]...)
	seal(f, b, seq, blk, count)
	copy(b[4084:], reserved)
	var seed [16]byte
	binary.LittleEndian.PutUint64(seed[0:], seq)
	binary.LittleEndian.PutUint64(seed[8:], uint64(blk))
	binary.LittleEndian.PutUint32(b[4092:], crcOf(f, seed[:], b[:4092]))
}

// TestReadsCheckBlocks: damage after a run was opened is found by the read
// of the block, as damage: ReadBlock, ReadBlocks and a new iterator.
func TestReadsCheckBlocks(t *testing.T) {
	forEach(t, func(t *testing.T, f *sortedrun.Format) {
		fs, es, m := threeBlocks(t, f)
		r, err := f.OpenRun(fs, dir, m, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Unref()
		sortedruntest.Patch(t, fs, r.Name, sortedrun.BlockSize+9, 1, func(b []byte) { b[0] ^= 2 })
		b := make([]byte, sortedrun.BlockSize)
		if n, err := r.ReadBlock(b, 0); err != nil || n != f.PerBlock() || string(f.Entry(b, 0)) != string(es[0]) {
			t.Fatalf("block 0: %d %v", n, err)
		}
		_, err = r.ReadBlock(b, 1)
		wantCorrupt(t, f, err, r.Name, sortedrun.BlockSize)
		err = r.ReadBlocks(0, 3, func([]byte, int) {})
		wantCorrupt(t, f, err, r.Name, sortedrun.BlockSize)
		it := r.NewIter(m)
		for it.Next() {
		}
		wantCorrupt(t, f, it.Err(), r.Name, sortedrun.BlockSize)
	})
}

// TestStateRefusesDamage: a flipped bit anywhere in the state, a short
// one, another version or magic, and values whose check passes but that
// no writer makes: a next sequence number of 0, a reserved field set, runs
// out of sequence order, a run of no entries or of more than a file can
// hold.
func TestStateRefusesDamage(t *testing.T) {
	forEach(t, func(t *testing.T, f *sortedrun.Format) {
		good := sortedrun.State{NextSeq: 5, Runs: []sortedrun.Meta{{Seq: 2, Entries: 10, Sum: 7}, {Seq: 4, Entries: 1, Sum: 9}}}
		b := f.EncodeState(good)
		for i := range len(b) * 8 {
			c := append([]byte(nil), b...)
			c[i/8] ^= 1 << (i % 8)
			if _, err := f.DecodeState(c); !errors.Is(err, f.Corrupt) {
				t.Fatalf("bit %d flipped: %v", i, err)
			}
		}
		if _, err := f.DecodeState(b[:len(b)-1]); !errors.Is(err, f.Corrupt) {
			t.Fatalf("short state: %v", err)
		}
		v2 := reseal(f, b, 4, 2)
		_, err := f.DecodeState(v2)
		if wantCorrupt(t, f, err, "state", 4); !strings.Contains(err.Error(), "version 2") {
			t.Fatalf("version not named: %v", err)
		}
		rs := 24
		if f.DeadBelow {
			rs = 32
		}
		bad := map[string][]byte{
			"magic":           reseal(f, b, 0, 'x'),
			"next seq 0":      f.EncodeState(sortedrun.State{}),
			"seq not below":   f.EncodeState(sortedrun.State{NextSeq: 4, Runs: good.Runs}),
			"seq order":       f.EncodeState(sortedrun.State{NextSeq: 5, Runs: []sortedrun.Meta{good.Runs[1], good.Runs[0]}}),
			"seq 0":           f.EncodeState(sortedrun.State{NextSeq: 5, Runs: []sortedrun.Meta{{Seq: 0, Entries: 1}}}),
			"no entries":      f.EncodeState(sortedrun.State{NextSeq: 5, Runs: []sortedrun.Meta{{Seq: 1}}}),
			"huge run":        f.EncodeState(sortedrun.State{NextSeq: 5, Runs: []sortedrun.Meta{{Seq: 1, Entries: 1 << 60}}}),
			"reserved header": reseal(f, b, 6, 1),
			"reserved run":    reseal(f, b, 20+rs-4, 1),
		}
		for what, c := range bad {
			if _, err := f.DecodeState(c); !errors.Is(err, f.Corrupt) {
				t.Errorf("%s: %v, want damage", what, err)
			}
		}
		if got, err := f.DecodeState(b); err != nil || len(got.Runs) != 2 {
			t.Fatalf("the good state: %+v %v", got, err)
		}
	})
}

// reseal sets byte i of a state to v and makes its check right again.
func reseal(f *sortedrun.Format, b []byte, i int, v byte) []byte {
	c := append([]byte(nil), b[:len(b)-4]...)
	c[i] = v
	return binary.LittleEndian.AppendUint32(c, crcOf(f, c))
}

// crcOf is CRC-32C from f's seed over the parts.
func crcOf(f *sortedrun.Format, parts ...[]byte) uint32 {
	c := f.Seed
	for _, p := range parts {
		c = crcUpdate(c, p)
	}
	return c
}
