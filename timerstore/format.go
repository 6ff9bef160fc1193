package timerstore

// The run file and state layouts are drawn in package sortedrun's doc,
// which writes and checks them; this file gives the timer format: the
// entry's encoding and order, and the names and seed of its files.

import (
	"encoding/binary"
	"errors"

	"github.com/hourglass-mq/hourglass/sortedrun"
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

// EntrySize is the size of one entry on disk:
//
//	offset size field
//	0      8    due   i64 Unix ms
//	8      8    pos   u64 commit-log position of the message
//	16     4    topic u32 topic id
//	20     2    queue u16
//	22     1    kind  u8 what the timer is for (the engine's choice)
//	23     1    reserved, written as 0
//
// A run holds its entries in strictly increasing (due, pos) order: (due,
// pos) is the key, and of a pair added twice a run keeps one.
const EntrySize = 24

// BlockSize is the size of one block of a run file.
const BlockSize = sortedrun.BlockSize

// MaxWidth is the largest bucket width in milliseconds (about 34 years),
// as in the layout before, so that a width the engine accepted stays valid.
const MaxWidth = 1 << 40

// CorruptError is the damage behind every ErrCorrupt of this package: the
// file, the offset in it, and what is wrong, for tools that list damage.
type CorruptError = sortedrun.CorruptError

// format is the timer index's run format.
var format = sortedrun.NewFormat(sortedrun.Format{
	Name:       "timerstore",
	Corrupt:    ErrCorrupt,
	EntrySize:  EntrySize,
	KeySize:    16,
	Compare:    compareEncoded,
	LeadSigned: true,
	Seed:       0x74696d72, // "timr"
	Suffix:     ".tr",
	Magic:      "tmrs",
	DeadBelow:  true,
	Chunk:      64, // 256 KiB, one vfs.PaceBytes step a write
	Tail:       true,
})

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

// compareEncoded orders encoded entries: by due time, then by position.
func compareEncoded(a, b []byte) int {
	ad, bd := int64(binary.LittleEndian.Uint64(a)), int64(binary.LittleEndian.Uint64(b))
	if ad != bd {
		if ad < bd {
			return -1
		}
		return 1
	}
	ap, bp := binary.LittleEndian.Uint64(a[8:]), binary.LittleEndian.Uint64(b[8:])
	switch {
	case ap < bp:
		return -1
	case ap > bp:
		return 1
	}
	return 0
}

// putEntry encodes e at b (24 bytes).
func putEntry(b []byte, e Entry) {
	binary.LittleEndian.PutUint64(b[0:], uint64(e.Due))
	binary.LittleEndian.PutUint64(b[8:], e.Pos)
	binary.LittleEndian.PutUint32(b[16:], e.Topic)
	binary.LittleEndian.PutUint16(b[20:], e.Queue)
	b[22] = e.Kind
	b[23] = 0
}

// getEntry decodes the entry at p.
func getEntry(p []byte) Entry {
	return Entry{
		Due:   int64(binary.LittleEndian.Uint64(p[0:])),
		Pos:   binary.LittleEndian.Uint64(p[8:]),
		Topic: binary.LittleEndian.Uint32(p[16:]),
		Queue: binary.LittleEndian.Uint16(p[20:]),
		Kind:  p[22],
	}
}

// due returns the due time an entry's Lead (or a sparse index slot) holds.
func due(lead uint64) int64 { return int64(lead) }

// RunFormat returns the timer index's run format, for the tests of
// package sortedrun (which run over every user's format) and for tools
// that read run files.
func RunFormat() *sortedrun.Format { return format }
