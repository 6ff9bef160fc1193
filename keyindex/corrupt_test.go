package keyindex

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"

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

// TestOpenRejectsZeroBlock: a block of zeros (a file extended but never
// written) fails its check.
func TestOpenRejectsZeroBlock(t *testing.T) {
	fs, st := threeBlocks(t)
	name := runName(dir, 1)
	patch(t, fs, name, BlockSize, BlockSize, func(b []byte) { clear(b) })
	_, err := Open(fs, dir, st, 0)
	wantCorrupt(t, err, name, BlockSize)
}

// TestOpenRejectsBitFlips: a flipped bit anywhere in a run fails the check
// of its block, and Open names the block.
func TestOpenRejectsBitFlips(t *testing.T) {
	name := runName(dir, 1)
	for off := int64(0); off < 3*BlockSize; off += 61 {
		fs, st := threeBlocks(t)
		patch(t, fs, name, off, 1, func(b []byte) { b[0] ^= 1 << (off % 8) })
		_, err := Open(fs, dir, st, 0)
		wantCorrupt(t, err, name, off/BlockSize*BlockSize)
	}
}

// TestOpenRejectsMisplacedBlock: a valid block of another run, or of
// another place in the same run, fails: the check is seeded with both.
func TestOpenRejectsMisplacedBlock(t *testing.T) {
	fs, st := threeBlocks(t)
	name := runName(dir, 1)
	var first []byte
	patch(t, fs, name, 0, BlockSize, func(b []byte) { first = append(first, b...) })
	patch(t, fs, name, BlockSize, BlockSize, func(b []byte) { copy(b, first) })
	_, err := Open(fs, dir, st, 0)
	wantCorrupt(t, err, name, BlockSize)
}

// TestOpenRejectsWrongSize: a missing, short or long run file is corrupt.
func TestOpenRejectsWrongSize(t *testing.T) {
	name := runName(dir, 1)
	for _, c := range []struct {
		size int64 // -1: removed
		off  int64
	}{{-1, 0}, {0, 0}, {BlockSize + 100, BlockSize + 100}, {3*BlockSize - 1, 3*BlockSize - 1}, {4 * BlockSize, 3 * BlockSize}} {
		fs, st := threeBlocks(t)
		if c.size < 0 {
			if err := fs.Remove(name); err != nil {
				t.Fatal(err)
			}
		} else {
			f, err := fs.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(c.size); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		_, err := Open(fs, dir, st, 0)
		wantCorrupt(t, err, name, c.off)
	}
}

// TestOpenRejectsBadState: a flipped bit anywhere in the state, or a state
// of another version, is refused.
func TestOpenRejectsBadState(t *testing.T) {
	fs, st := threeBlocks(t)
	for i := range len(st) * 8 {
		b := append([]byte(nil), st...)
		b[i/8] ^= 1 << (i % 8)
		if _, err := Open(fs, dir, b, 0); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bit %d flipped: %v", i, err)
		}
	}
	b := append([]byte(nil), st...)
	binary.LittleEndian.PutUint16(b[4:], 2)
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Update(checkSeed, castagnoli, b[:len(b)-4]))
	_, err := Open(fs, dir, b, 0)
	if wantCorrupt(t, err, stateName, 4); !strings.Contains(err.Error(), "version 2") {
		t.Fatalf("version not named: %v", err)
	}
	if _, err := Open(fs, dir, st[:len(st)-1], 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short state: %v", err)
	}
}

// TestGetChecksBlock: damage after Open is found by the Get that reads the
// block, as an error, not a miss; other blocks still answer.
func TestGetChecksBlock(t *testing.T) {
	fs, st := threeBlocks(t)
	x := openAt(t, fs, st)
	patch(t, fs, runName(dir, 1), 0, 1, func(b []byte) { b[0] ^= 0x80 })
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
	if bad != blockEntries {
		t.Fatalf("%d keys saw the damage, want the %d of the first block", bad, blockEntries)
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
	if s, _ := decodeState(st); s.runs[len(s.runs)-1].seq != 0x100 {
		t.Fatalf("new run %d, want 0x100", s.runs[len(s.runs)-1].seq)
	}
	openAt(t, fs, nil)
	if files := runFiles(t, fs); len(files) != 0 {
		t.Fatalf("open with no state left %v", files)
	}
}
