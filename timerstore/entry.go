package timerstore

// The entry layout is drawn in the package doc (timerstore.go); the code
// that writes and checks it is here.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// EntrySize is the size of one entry on disk.
const EntrySize = 24

// Entry is one timer.
type Entry struct {
	Due   int64
	Pos   uint64
	Topic uint32
	Queue uint16
	Kind  uint8
}

// MaxWidth is the largest bucket width in milliseconds (about 34 years):
// an entry stores its due time relative to its bucket in 40 bits.
const MaxWidth = 1 << 40

// ErrCorrupt means a bucket file disagrees with what was written and synced
// into it: an entry fails its check, or the file is missing or shorter than
// the checkpoint recorded. Errors wrap it with the file and offset.
var ErrCorrupt = errors.New("timerstore: corrupt timer bucket")

// checkSeed starts the CRC register, so that the check of twenty zero bytes
// is not zero and an all-zero entry fails (TestZeroEntryFails).
const checkSeed = 0x74696d72

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func entryCheck(b []byte) uint32 { return crc32.Update(checkSeed, castagnoli, b[:20]) }

// put encodes e, which belongs to the bucket starting at start, into b.
func (e Entry) put(b []byte, start int64) {
	binary.LittleEndian.PutUint64(b[0:], e.Pos)
	binary.LittleEndian.PutUint32(b[8:], e.Topic)
	binary.LittleEndian.PutUint16(b[12:], e.Queue)
	b[14] = e.Kind
	rel := uint64(e.Due - start)
	binary.LittleEndian.PutUint32(b[15:], uint32(rel))
	b[19] = byte(rel >> 32)
	binary.LittleEndian.PutUint32(b[20:], entryCheck(b))
}

// decode reads the entry at b of the bucket [start, start+width), and
// reports whether it passes its check.
func decode(b []byte, start, width int64) (Entry, bool) {
	if binary.LittleEndian.Uint32(b[20:]) != entryCheck(b) {
		return Entry{}, false
	}
	rel := int64(binary.LittleEndian.Uint32(b[15:])) | int64(b[19])<<32
	if rel >= width {
		return Entry{}, false
	}
	return Entry{
		Due:   start + rel,
		Pos:   binary.LittleEndian.Uint64(b[0:]),
		Topic: binary.LittleEndian.Uint32(b[8:]),
		Queue: binary.LittleEndian.Uint16(b[12:]),
		Kind:  b[14],
	}, true
}

// corrupt returns an ErrCorrupt naming the file and offset.
func corrupt(name string, off int64, what string) error {
	return fmt.Errorf("%w: %s at offset %d: %s", ErrCorrupt, name, off, what)
}
