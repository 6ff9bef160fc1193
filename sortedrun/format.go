package sortedrun

// The layouts are drawn in the package doc (doc.go); the code that writes
// and checks blocks is here, the state's in state.go.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path"
	"strconv"
	"strings"
)

// BlockSize is the size of one block of a run file.
const BlockSize = 4096

const (
	slotsSize = BlockSize - 16 // 4080: the slots, then the trailer
	countOff  = slotsSize      // count u32, then reserved u64
	checkOff  = BlockSize - 4  // check u32
)

// Format describes one user's files: its entry and order, the names and
// seeds that keep its files apart from another user's, and the errors its
// callers know. Build it with NewFormat; its fields must not change after.
type Format struct {
	// Name prefixes the errors that are not damage ("timerstore").
	Name string
	// Corrupt is wrapped by every CorruptError of the format.
	Corrupt error
	// SyncFailed, when not nil, is wrapped by every error of a failed
	// fsync of a run file or its directory.
	SyncFailed error
	// EntrySize is the size of one entry; at least 8 and at most 4080.
	EntrySize int
	// KeySize is the length of an entry's key, its first bytes: a run
	// holds no two entries with the same key, and a writer keeps the first
	// of them it is given.
	KeySize int
	// Compare orders encoded entries; a run holds them in strictly
	// increasing order. It must order by the lead first (Lead, as an i64
	// when LeadSigned): reads, writes and merges compare the leads inline
	// and call Compare only for equal ones. Entries with the same key must
	// sort together.
	Compare func(a, b []byte) int
	// LeadSigned says whether the lead orders as an i64 (a due time)
	// rather than a u64 (a hash).
	LeadSigned bool
	// Seed starts every CRC register of the format.
	Seed uint32
	// Suffix ends the name of every run file (".tr").
	Suffix string
	// Magic opens the state: 4 bytes.
	Magic string
	// DeadBelow says whether the state records each run's DeadBelow.
	DeadBelow bool
	// Chunk is how many blocks an iterator reads, and a writer writes,
	// at a time: the memory a reader or writer holds.
	Chunk int
	// Tail says whether a run file ends with a tail (its sparse index,
	// after its blocks), so that OpenRun may open it without reading its
	// blocks: see "Tail" in the package doc.
	Tail bool

	full int    // entries in a full block
	flip uint64 // xor that makes the lead order as a u64
}

// NewFormat checks f and returns it ready for use.
func NewFormat(f Format) *Format {
	if f.EntrySize < 8 || f.EntrySize > slotsSize || f.KeySize < 1 || f.KeySize > f.EntrySize ||
		len(f.Magic) != 4 || f.Compare == nil || f.Corrupt == nil || f.Chunk < 1 {
		panic(fmt.Sprintf("sortedrun: invalid format %q", f.Name))
	}
	f.full = slotsSize / f.EntrySize
	if f.LeadSigned {
		f.flip = 1 << 63
	}
	return &f
}

// PerBlock returns the number of entries in a full block.
func (f *Format) PerBlock() int { return f.full }

// Blocks returns the number of blocks of a run of m.Entries entries.
func (f *Format) Blocks(m Meta) int64 {
	return int64((m.Entries + uint64(f.full) - 1) / uint64(f.full))
}

// Entry returns entry i of a block.
func (f *Format) Entry(block []byte, i int) []byte {
	return block[i*f.EntrySize : (i+1)*f.EntrySize : (i+1)*f.EntrySize]
}

// sameKey reports whether a and b have the same key.
func (f *Format) sameKey(a, b []byte) bool {
	return bytes.Equal(a[:f.KeySize], b[:f.KeySize])
}

// step compares e with the entry before it, prev: their order, and
// whether they share a key (which they cannot when their leads differ,
// the lead being the key's start). The callers compare the leads inline
// first and call step only when they do not decide: it is not inlined.
func (f *Format) step(prev, e []byte) (c int, same bool) {
	lp, le := Lead(prev)^f.flip, Lead(e)^f.flip
	switch {
	case lp < le:
		return -1, false
	case lp > le:
		return 1, false
	}
	return f.Compare(prev, e), f.sameKey(prev, e)
}

// lead returns e's lead as a u64 that orders as the format's leads do.
func (f *Format) lead(e []byte) uint64 { return Lead(e) ^ f.flip }

// Lead returns an entry's first 8 bytes as a little-endian u64: what the
// sparse index keeps of the first entry of each block. The users read it
// as their leading sort field (a due time, a hash).
func Lead(e []byte) uint64 { return binary.LittleEndian.Uint64(e) }

// RunName returns the file name of run seq in dir.
func (f *Format) RunName(dir string, seq uint64) string {
	return path.Join(dir, fmt.Sprintf("%016x%s", seq, f.Suffix))
}

// ParseRunName returns the sequence number a run file's base name stands
// for.
func (f *Format) ParseRunName(name string) (uint64, bool) {
	hex, ok := strings.CutSuffix(name, f.Suffix)
	if !ok || len(hex) != 16 {
		return 0, false
	}
	seq, err := strconv.ParseUint(hex, 16, 64)
	return seq, err == nil
}

// CorruptError is the damage behind every Corrupt error of a format: the
// file, the offset in it, and what is wrong, for tools that list damage.
type CorruptError struct {
	// Err is the format's Corrupt error.
	Err    error
	File   string
	Offset int64
	What   string
}

// Error says what is wrong where.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("%v: %s at offset %d: %s", e.Err, e.File, e.Offset, e.What)
}

// Is makes errors.Is(err, format.Corrupt) hold.
func (e *CorruptError) Is(target error) bool { return target == e.Err }

// corrupt returns damage of file name at off.
func (f *Format) corrupt(name string, off int64, format string, args ...any) error {
	return &CorruptError{Err: f.Corrupt, File: name, Offset: off, What: fmt.Sprintf(format, args...)}
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// blockSeed is the register a block's check starts from: it binds the
// block to its run and its place.
func (f *Format) blockSeed(seq uint64, block int64) uint32 {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[0:], seq)
	binary.LittleEndian.PutUint64(b[8:], uint64(block))
	return crc32.Update(f.Seed, castagnoli, b[:])
}

// sealBlock zeroes what follows the count entries of b, writes the
// trailer and returns the check.
func (f *Format) sealBlock(b []byte, seq uint64, block int64, count int) uint32 {
	clear(b[count*f.EntrySize : countOff])
	binary.LittleEndian.PutUint32(b[countOff:], uint32(count))
	clear(b[countOff+4 : checkOff])
	c := crc32.Update(f.blockSeed(seq, block), castagnoli, b[:checkOff])
	binary.LittleEndian.PutUint32(b[checkOff:], c)
	return c
}

// checkBlock verifies block b of run seq (its check and trailer, not the
// order of its entries) and returns its count and check.
func (f *Format) checkBlock(b []byte, name string, seq uint64, block int64) (int, uint32, error) {
	off := block * BlockSize
	c := binary.LittleEndian.Uint32(b[checkOff:])
	if crc32.Update(f.blockSeed(seq, block), castagnoli, b[:checkOff]) != c {
		return 0, 0, f.corrupt(name, off, "block fails its check")
	}
	n := int(binary.LittleEndian.Uint32(b[countOff:]))
	if n < 1 || n > f.full || binary.LittleEndian.Uint64(b[countOff+4:]) != 0 {
		return 0, 0, f.corrupt(name, off+countOff, "block trailer is invalid (count %d of at most %d)", n, f.full)
	}
	return n, c, nil
}

// sumUpdate folds a block's check into a run's sum.
func sumUpdate(sum, check uint32) uint32 {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], check)
	return crc32.Update(sum, castagnoli, b[:])
}
