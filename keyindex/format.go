package keyindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// BlockSize is the size of one block of a run file.
const BlockSize = 4096

const (
	slotSize     = 16                                   // hash u64, pos u64
	blockEntries = (BlockSize - trailerSize) / slotSize // 255
	trailerSize  = 16                                   // count, reserved, check
	countOff     = blockEntries * slotSize              // 4080
	checkOff     = BlockSize - 4                        // 4092
)

// Errors. Errors that concern a file wrap one of these with the file's
// name and the offset.
var (
	// ErrCorrupt means a run file or the state disagrees with what was
	// written: a check fails, a file is missing, of the wrong size or out
	// of order.
	ErrCorrupt = errors.New("keyindex: corrupt key index")
	// ErrSyncFailed is wrapped by every Prepare and Complete after an fsync
	// failed; see the package doc.
	ErrSyncFailed = errors.New("keyindex: an fsync failed; the index can no longer be vouched for")
	// ErrBusy is returned by Prepare and Reset while a Job is outstanding.
	ErrBusy = errors.New("keyindex: a job is outstanding")
	// ErrClosed is returned by the methods of a closed Index.
	ErrClosed = errors.New("keyindex: closed")
)

// checkSeed starts every CRC register, so that the check of zeros is not
// zero.
const checkSeed = 0x6b657973 // "keys"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// corrupt returns an ErrCorrupt naming the file and offset.
func corrupt(name string, off int64, format string, args ...any) error {
	return &CorruptError{File: name, Offset: off, What: fmt.Sprintf(format, args...)}
}

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

// blockSeed is the register a block's check starts from: it binds the
// block to its run and its place.
func blockSeed(seq uint64, block int64) uint32 {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[0:], seq)
	binary.LittleEndian.PutUint64(b[8:], uint64(block))
	return crc32.Update(checkSeed, castagnoli, b[:])
}

// sealBlock writes count and the check into the trailer of b (the slots
// and the zero reserved field are the caller's) and returns the check.
func sealBlock(b []byte, seq uint64, block int64, count int) uint32 {
	binary.LittleEndian.PutUint32(b[countOff:], uint32(count))
	clear(b[countOff+4 : checkOff])
	c := crc32.Update(blockSeed(seq, block), castagnoli, b[:checkOff])
	binary.LittleEndian.PutUint32(b[checkOff:], c)
	return c
}

// checkBlock verifies block b (BlockSize bytes) of run seq and returns its
// entry count and check. It does not check the order of the entries.
func checkBlock(b []byte, name string, seq uint64, block int64) (int, uint32, error) {
	off := block * BlockSize
	c := binary.LittleEndian.Uint32(b[checkOff:])
	if c != crc32.Update(blockSeed(seq, block), castagnoli, b[:checkOff]) {
		return 0, 0, corrupt(name, off, "block fails its check")
	}
	n := binary.LittleEndian.Uint32(b[countOff:])
	if n == 0 || n > blockEntries || binary.LittleEndian.Uint64(b[countOff+4:]) != 0 {
		return 0, 0, corrupt(name, off, "block trailer is invalid (count %d)", n)
	}
	return int(n), c, nil
}

// slot returns the entry in slot i of block b.
func slot(b []byte, i int) (h, pos uint64) {
	return binary.LittleEndian.Uint64(b[i*slotSize:]), binary.LittleEndian.Uint64(b[i*slotSize+8:])
}

// sumUpdate folds a block's check into a run's sum.
func sumUpdate(sum, check uint32) uint32 {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], check)
	return crc32.Update(sum, castagnoli, b[:])
}

// runMeta is what the state records of a run.
type runMeta struct {
	seq, entries uint64
	sum          uint32
}

// blocks returns the number of blocks of a run of m.entries entries.
func (m runMeta) blocks() int64 {
	return int64((m.entries + blockEntries - 1) / blockEntries)
}

// state is the decoded form of the state layout in the package doc.
type state struct {
	nextSeq uint64
	runs    []runMeta
}

const (
	stateMagic   = "kixs"
	stateVersion = 1
	stateHeader  = 20
	stateRun     = 24
)

// stateName is how errors name a state.
const stateName = "state"

func encodeState(s state) []byte {
	le := binary.LittleEndian
	b := make([]byte, stateHeader, stateHeader+stateRun*len(s.runs)+4)
	copy(b, stateMagic)
	le.PutUint16(b[4:], stateVersion)
	le.PutUint64(b[8:], s.nextSeq)
	le.PutUint32(b[16:], uint32(len(s.runs)))
	for _, r := range s.runs {
		b = le.AppendUint64(b, r.seq)
		b = le.AppendUint64(b, r.entries)
		b = le.AppendUint32(b, r.sum)
		b = le.AppendUint32(b, 0)
	}
	return le.AppendUint32(b, crc32.Update(checkSeed, castagnoli, b))
}

// decodeState parses and checks b; nil is the empty state.
func decodeState(b []byte) (state, error) {
	le := binary.LittleEndian
	if b == nil {
		return state{nextSeq: 1}, nil
	}
	if len(b) < stateHeader+4 || string(b[:4]) != stateMagic {
		return state{}, corrupt(stateName, 0, "not a key index state")
	}
	if v := le.Uint16(b[4:]); v != stateVersion {
		return state{}, corrupt(stateName, 4, "version %d, this broker reads version %d", v, stateVersion)
	}
	n := le.Uint32(b[16:])
	if uint64(len(b)) != stateHeader+stateRun*uint64(n)+4 {
		return state{}, corrupt(stateName, 16, "%d runs in %d bytes", n, len(b))
	}
	end := len(b) - 4
	if le.Uint32(b[end:]) != crc32.Update(checkSeed, castagnoli, b[:end]) || le.Uint16(b[6:]) != 0 {
		return state{}, corrupt(stateName, int64(end), "state fails its check")
	}
	s := state{nextSeq: le.Uint64(b[8:]), runs: make([]runMeta, n)}
	for i := range s.runs {
		p := b[stateHeader+stateRun*i:]
		s.runs[i] = runMeta{seq: le.Uint64(p), entries: le.Uint64(p[8:]), sum: le.Uint32(p[16:])}
		if s.runs[i].entries == 0 || le.Uint32(p[20:]) != 0 || s.runs[i].seq >= s.nextSeq {
			return state{}, corrupt(stateName, int64(stateHeader+stateRun*i), "run entry is invalid")
		}
	}
	return s, nil
}
