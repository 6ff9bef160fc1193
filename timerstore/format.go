package timerstore

// The layouts are drawn in the package doc (doc.go); the code that writes
// and checks them is here.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Entry is one timer.
type Entry struct {
	Due   int64
	Pos   uint64
	Topic uint32
	Queue uint16
	Kind  uint8
}

// before reports whether e sorts before o in a run: by due time, then by
// position.
func (e Entry) before(o Entry) bool {
	return e.Due < o.Due || e.Due == o.Due && e.Pos < o.Pos
}

// compareEntries orders entries as a run holds them.
func compareEntries(a, b Entry) int {
	switch {
	case a.before(b):
		return -1
	case b.before(a):
		return 1
	}
	return 0
}

// EntrySize is the size of one entry on disk.
const EntrySize = 24

// BlockSize is the size of one block of a run file.
const BlockSize = 4096

const (
	blockEntries = (BlockSize - 16) / EntrySize // 170
	countOff     = blockEntries * EntrySize     // 4080
	checkOff     = BlockSize - 4                // 4092
)

// MaxWidth is the largest bucket width in milliseconds (about 34 years),
// as in the layout before, so that a width the engine accepted stays valid.
const MaxWidth = 1 << 40

// Errors. Errors that concern a file wrap one of these with the file's name
// and the offset.
var (
	// ErrCorrupt means a run file or the state disagrees with what was
	// written: a check fails, a file is missing, of the wrong size or out
	// of order.
	ErrCorrupt = errors.New("timerstore: corrupt timer index")
	// ErrBusy is returned by Prepare while a Job is outstanding.
	ErrBusy = errors.New("timerstore: a job is outstanding")
	// ErrClosed is returned by Prepare after Close.
	ErrClosed = errors.New("timerstore: closed")
)

// CorruptError is the damage behind every ErrCorrupt of this package: the
// file, the offset in it, and what is wrong, for tools that list damage.
type CorruptError struct {
	File   string
	Offset int64
	What   string
}

// Error says what is wrong where.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("%v: %s at offset %d: %s", ErrCorrupt, e.File, e.Offset, e.What)
}

// Is makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func corrupt(name string, off int64, format string, args ...any) error {
	return &CorruptError{File: name, Offset: off, What: fmt.Sprintf(format, args...)}
}

// checkSeed starts every CRC register, so that the check of zeros is not
// zero.
const checkSeed = 0x74696d72 // "timr"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// putEntry encodes e at b (24 bytes).
func putEntry(b []byte, e Entry) {
	binary.LittleEndian.PutUint64(b[0:], uint64(e.Due))
	binary.LittleEndian.PutUint64(b[8:], e.Pos)
	binary.LittleEndian.PutUint32(b[16:], e.Topic)
	binary.LittleEndian.PutUint16(b[20:], e.Queue)
	b[22] = e.Kind
	b[23] = 0
}

// getEntry decodes the i-th entry of block b.
func getEntry(b []byte, i int) Entry {
	p := b[i*EntrySize:]
	return Entry{
		Due:   int64(binary.LittleEndian.Uint64(p[0:])),
		Pos:   binary.LittleEndian.Uint64(p[8:]),
		Topic: binary.LittleEndian.Uint32(p[16:]),
		Queue: binary.LittleEndian.Uint16(p[20:]),
		Kind:  p[22],
	}
}

// blockSeed is the register a block's check starts from: it binds the
// block to its run and its place.
func blockSeed(seq uint64, block int64) uint32 {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[0:], seq)
	binary.LittleEndian.PutUint64(b[8:], uint64(block))
	return crc32.Update(checkSeed, castagnoli, b[:])
}

// sealBlock zeroes the unused slots of b, writes count and the check into
// its trailer and returns the check.
func sealBlock(b []byte, seq uint64, block int64, count int) uint32 {
	clear(b[count*EntrySize : countOff])
	binary.LittleEndian.PutUint32(b[countOff:], uint32(count))
	clear(b[countOff+4 : checkOff])
	c := crc32.Update(blockSeed(seq, block), castagnoli, b[:checkOff])
	binary.LittleEndian.PutUint32(b[checkOff:], c)
	return c
}

// checkBlock verifies block b of run seq and returns its count and check.
func checkBlock(b []byte, name string, seq uint64, block int64) (int, uint32, error) {
	off := block * BlockSize
	c := binary.LittleEndian.Uint32(b[checkOff:])
	if crc32.Update(blockSeed(seq, block), castagnoli, b[:checkOff]) != c {
		return 0, 0, corrupt(name, off, "block fails its check")
	}
	n := int(binary.LittleEndian.Uint32(b[countOff:]))
	if n < 1 || n > blockEntries {
		return 0, 0, corrupt(name, off+countOff, "block count %d is not in [1, %d]", n, blockEntries)
	}
	return n, c, nil
}

// sumUpdate adds a block's check to a run's sum.
func sumUpdate(sum, check uint32) uint32 {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], check)
	return crc32.Update(sum, castagnoli, b[:])
}

// runMeta is what the state records of one run.
type runMeta struct {
	seq       uint64
	entries   uint64
	deadBelow int64
	sum       uint32
}

// blocks is the number of blocks of the run's file.
func (m runMeta) blocks() int64 {
	return int64((m.entries + blockEntries - 1) / blockEntries)
}

// state is the durable run set.
type state struct {
	nextSeq uint64
	runs    []runMeta
}

const (
	stateMagic   = "tmrs"
	stateVersion = 1
	stateHeader  = 20
	stateRunSize = 32
)

func (st state) encode() []byte {
	b := make([]byte, 0, stateHeader+stateRunSize*len(st.runs)+4)
	b = append(b, stateMagic...)
	b = binary.LittleEndian.AppendUint16(b, stateVersion)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint64(b, st.nextSeq)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(st.runs)))
	for _, r := range st.runs {
		b = binary.LittleEndian.AppendUint64(b, r.seq)
		b = binary.LittleEndian.AppendUint64(b, r.entries)
		b = binary.LittleEndian.AppendUint64(b, uint64(r.deadBelow))
		b = binary.LittleEndian.AppendUint32(b, r.sum)
		b = binary.LittleEndian.AppendUint32(b, 0)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Update(checkSeed, castagnoli, b))
}

// decodeState reads a state; nil is the empty state.
func decodeState(b []byte) (state, error) {
	if b == nil {
		return state{nextSeq: 1}, nil
	}
	bad := func(format string, args ...any) (state, error) {
		return state{}, corrupt("state", 0, format, args...)
	}
	if len(b) < stateHeader+4 {
		return bad("%d bytes, too short", len(b))
	}
	body := b[:len(b)-4]
	if crc32.Update(checkSeed, castagnoli, body) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return bad("fails its check")
	}
	if string(b[:4]) != stateMagic {
		return bad("bad magic %q", b[:4])
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != stateVersion {
		return bad("version %d, this hourglass reads version %d", v, stateVersion)
	}
	if binary.LittleEndian.Uint16(b[6:]) != 0 {
		return bad("reserved field is not zero")
	}
	st := state{nextSeq: binary.LittleEndian.Uint64(b[8:])}
	if st.nextSeq == 0 || st.nextSeq == math.MaxUint64 {
		return bad("next sequence number %d", st.nextSeq)
	}
	n := binary.LittleEndian.Uint32(b[16:])
	if uint64(len(body)) != stateHeader+uint64(n)*stateRunSize {
		return bad("%d bytes for %d runs", len(b), n)
	}
	for i := range int(n) {
		p := body[stateHeader+i*stateRunSize:]
		m := runMeta{seq: binary.LittleEndian.Uint64(p), entries: binary.LittleEndian.Uint64(p[8:]),
			deadBelow: int64(binary.LittleEndian.Uint64(p[16:])), sum: binary.LittleEndian.Uint32(p[24:])}
		if binary.LittleEndian.Uint32(p[28:]) != 0 {
			return bad("run %d: reserved field is not zero", i)
		}
		if m.seq == 0 || m.seq >= st.nextSeq || m.entries == 0 || m.entries > math.MaxInt64/BlockSize ||
			i > 0 && m.seq <= st.runs[i-1].seq {
			return bad("run %d (seq %d, %d entries) does not fit the run set", i, m.seq, m.entries)
		}
		st.runs = append(st.runs, m)
	}
	return st, nil
}
