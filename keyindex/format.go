package keyindex

// The run file and state layouts are drawn in package sortedrun's doc,
// which writes and checks them; this file gives the key index's format:
// the entry's encoding and order, and the names and seed of its files.

import (
	"encoding/binary"
	"errors"

	"github.com/hourglass-mq/hourglass/sortedrun"
)

// BlockSize is the size of one block of a run file.
const BlockSize = sortedrun.BlockSize

// slotSize is the size of one entry on disk: hash u64, pos u64 (little
// endian). A run holds one entry per hash, in strictly increasing hash
// order; in a merge, the greatest position of a hash comes first and is
// the one kept.
const slotSize = 16

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

// CorruptError is the damage behind every ErrCorrupt of this package: the
// file, the offset in it, and what is wrong, for tools that list damage.
type CorruptError = sortedrun.CorruptError

// format is the key index's run format.
var format = sortedrun.NewFormat(sortedrun.Format{
	Name:       "keyindex",
	Corrupt:    ErrCorrupt,
	SyncFailed: ErrSyncFailed,
	EntrySize:  slotSize,
	KeySize:    8,
	Compare:    compareEncoded,
	Seed:       0x6b657973, // "keys"
	Suffix:     ".kix",
	Magic:      "kixs",
	Chunk:      16, // 64 KiB: merging k runs holds (k+1) * 64 KiB
	Tail:       true,
})

// compareEncoded orders encoded entries by hash, and the positions of one
// hash greatest first.
func compareEncoded(a, b []byte) int {
	ah, bh := binary.LittleEndian.Uint64(a), binary.LittleEndian.Uint64(b)
	switch {
	case ah < bh:
		return -1
	case ah > bh:
		return 1
	}
	ap, bp := binary.LittleEndian.Uint64(a[8:]), binary.LittleEndian.Uint64(b[8:])
	switch {
	case ap > bp:
		return -1
	case ap < bp:
		return 1
	}
	return 0
}

// slot returns the entry in slot i of block b.
func slot(b []byte, i int) (h, pos uint64) {
	return binary.LittleEndian.Uint64(b[i*slotSize:]), binary.LittleEndian.Uint64(b[i*slotSize+8:])
}

// RunFormat returns the key index's run format, for the tests of package
// sortedrun (which run over every user's format) and for tools that read
// run files.
func RunFormat() *sortedrun.Format { return format }
