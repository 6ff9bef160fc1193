package kafkamode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// A spill file is one time bucket of one delay partition's pending index,
// written by the worker to its local spill directory (see the package doc,
// "Spill"). It is a cache derived from Kafka, never read by another
// process nor after a restart, so it carries no fsync and no recovery: a
// file that does not read back whole and valid makes the worker rebuild
// its index from Kafka.
//
//	header   8 bytes   "HGSPILL" 0x02 (magic and format version)
//	entry   44 bytes   offset          uint64, big-endian
//	                   due (Unix ms)   int64, big-endian
//	                   timestamp (ms)  int64, big-endian
//	                   key hash        uint64, big-endian (FNV-1a)
//	                   back            uint64, big-endian (entry.back: offset minus
//	                                   the offset the message was first sent at)
//	                   CRC-32C         uint32, big-endian, of the 40 bytes before it
//
// Entries follow the header in the order they were written; the file's
// valid length is kept in memory (spillBucket.size), so bytes a failed
// write left past it are never read and the next write overwrites them.

// spillMagic opens every spill file; its last byte is the format version.
const spillMagic = "HGSPILL\x02"

// spillEntrySize is the size of one spill entry.
const spillEntrySize = 44

var spillCRC = crc32.MakeTable(crc32.Castagnoli)

// errSpillCorrupt is wrapped by decodeSpill's errors.
var errSpillCorrupt = errors.New("corrupt spill file")

// appendSpillEntry appends the 44-byte encoding of e to b.
func appendSpillEntry(b []byte, e snapEntry) []byte {
	start := len(b)
	b = binary.BigEndian.AppendUint64(b, uint64(e.offset))
	b = binary.BigEndian.AppendUint64(b, uint64(e.due))
	b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
	b = binary.BigEndian.AppendUint64(b, e.keyHash)
	b = binary.BigEndian.AppendUint64(b, uint64(e.back))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], spillCRC))
}

// decodeSpill decodes a whole spill file (header and entries).
func decodeSpill(b []byte) ([]snapEntry, error) {
	if len(b) < len(spillMagic) || string(b[:len(spillMagic)]) != spillMagic {
		return nil, fmt.Errorf("%w: bad header", errSpillCorrupt)
	}
	b = b[len(spillMagic):]
	if len(b)%spillEntrySize != 0 {
		return nil, fmt.Errorf("%w: %d bytes of entries is not a multiple of %d", errSpillCorrupt, len(b), spillEntrySize)
	}
	out := make([]snapEntry, 0, len(b)/spillEntrySize)
	for ; len(b) > 0; b = b[spillEntrySize:] {
		if crc32.Checksum(b[:40], spillCRC) != binary.BigEndian.Uint32(b[40:44]) {
			return nil, fmt.Errorf("%w: checksum mismatch at entry %d", errSpillCorrupt, len(out))
		}
		e := snapEntry{
			offset:  int64(binary.BigEndian.Uint64(b[0:])),
			due:     int64(binary.BigEndian.Uint64(b[8:])),
			ts:      int64(binary.BigEndian.Uint64(b[16:])),
			keyHash: binary.BigEndian.Uint64(b[24:]),
			back:    int64(binary.BigEndian.Uint64(b[32:])),
		}
		if e.offset < 0 || e.back < 0 || e.back > e.offset {
			return nil, fmt.Errorf("%w: entry %d: offset %d, back %d", errSpillCorrupt, len(out), e.offset, e.back)
		}
		out = append(out, e)
	}
	return out, nil
}
