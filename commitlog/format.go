package commitlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// These constants are part of the on-disk format (see the package doc).
// Changing any of them makes existing logs unreadable; a change of layout
// must bump formatVersion instead.
const (
	// segmentMagic opens every segment file.
	segmentMagic = "HGCL"
	// formatVersion is the version byte of the segment header.
	formatVersion = 1
	// HeaderSize is the length of the segment header. It does not count in
	// positions: the first record of a segment is at the segment's base.
	HeaderSize = 20
	// FrameHeaderSize is the length of a record's frame before its payload:
	// length, CRC and type.
	FrameHeaderSize = 9
	// MaxPayloadLimit is the largest payload the format admits; recovery
	// treats a larger length field as damage whatever Options say, and
	// Options.MaxRecordBytes may not exceed it.
	MaxPayloadLimit = 1 << 30
	// segmentSuffix and segmentNameDigits make names like
	// 00000000000000004096.log: fixed width so that the sorted directory
	// listing is the position order.
	segmentSuffix     = ".log"
	segmentNameDigits = 20
)

// castagnoli is the CRC32C table; the polynomial is part of the format.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segmentName returns the file name of the segment whose first record is at
// base.
func segmentName(base Pos) string {
	return fmt.Sprintf("%0*d%s", segmentNameDigits, uint64(base), segmentSuffix)
}

// parseSegmentName returns the base of a segment file name, and false for
// any name that is not exactly one this package writes (such files are left
// alone).
func parseSegmentName(name string) (Pos, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(digits) != segmentNameDigits {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return Pos(v), true
}

// encodeHeader returns the header of the segment starting at base.
func encodeHeader(base Pos) []byte {
	h := make([]byte, HeaderSize)
	copy(h[0:4], segmentMagic)
	h[4] = formatVersion
	binary.LittleEndian.PutUint64(h[8:16], uint64(base))
	binary.LittleEndian.PutUint32(h[16:20], crc32.Checksum(h[:16], castagnoli))
	return h
}

// checkHeader validates a segment header read from the file named for base.
// The base is stored redundantly so that a renamed or copied file is caught.
func checkHeader(h []byte, base Pos) error {
	switch {
	case len(h) < HeaderSize:
		return fmt.Errorf("header is %d bytes, want %d", len(h), HeaderSize)
	case string(h[0:4]) != segmentMagic:
		return fmt.Errorf("bad magic %q", h[0:4])
	case binary.LittleEndian.Uint32(h[16:20]) != crc32.Checksum(h[:16], castagnoli):
		return fmt.Errorf("header checksum mismatch")
	case h[4] != formatVersion:
		return fmt.Errorf("unsupported format version %d", h[4])
	case Pos(binary.LittleEndian.Uint64(h[8:16])) != base:
		return fmt.Errorf("header base %d does not match file name base %d",
			binary.LittleEndian.Uint64(h[8:16]), base)
	}
	return nil
}

// frameSize is the number of bytes (and positions) a record of n payload
// bytes occupies.
func frameSize(n int) int { return FrameHeaderSize + n }

// recordCRC is the checksum stored in a frame: CRC32C over type and payload.
func recordCRC(t Type, payload []byte) uint32 {
	// The type byte is folded in by hand (one table step of the reflected
	// CRC) so that no one-byte slice is allocated per record.
	c := ^uint32(0)
	c = castagnoli[byte(c)^byte(t)] ^ c>>8
	return crc32.Update(^c, castagnoli, payload)
}

// appendFrame appends the frame of a record whose checksum is crc to dst.
func appendFrame(dst []byte, r Record, crc uint32) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(r.Payload)))
	dst = binary.LittleEndian.AppendUint32(dst, crc)
	dst = append(dst, byte(r.Type))
	return append(dst, r.Payload...)
}

// frameHeader is a decoded frame header.
type frameHeader struct {
	length uint32
	crc    uint32
	typ    Type
}

func decodeFrameHeader(b []byte) frameHeader {
	return frameHeader{
		length: binary.LittleEndian.Uint32(b[0:4]),
		crc:    binary.LittleEndian.Uint32(b[4:8]),
		typ:    Type(b[8]),
	}
}

// checkFrameHeader validates what can be known before the payload is read:
// a zero type never comes from Append, and the frame must fit below limit
// (the number of record bytes from the frame's start to the end of valid
// data). It returns the reason, or "" if the header is plausible.
//
// Zeros never parse as a record, and preallocation (prealloc.go) relies on
// it: a header of zeros (length 0, CRC 0, type 0) fails here on its type
// before its length or checksum is looked at, and Append refuses type 0.
// The checksum would not save it: CRC32C of a lone zero type byte is not 0
// (0x527D5351), but the type check is what the format promises.
func checkFrameHeader(h frameHeader, room int64) string {
	switch {
	case h.typ == 0:
		return "record type 0"
	case h.length > MaxPayloadLimit:
		return fmt.Sprintf("length %d beyond the format limit", h.length)
	case int64(FrameHeaderSize)+int64(h.length) > room:
		return fmt.Sprintf("length %d runs past the end of the data", h.length)
	}
	return ""
}

// TypeSkip is the record type reserved for skip frames: a skip frame
// covers a range of damaged bytes that Repair quarantined, so that the
// positions of the records after it stay what they were. Its payload is
// zeros. Scan and recovery pass over skip frames; Read of a skip frame's
// position fails with ErrCorrupt, as it would for the damage it replaced.
// Callers must not Append records of this type. (It is not 0xFF, the
// highest type, because callers were already free to use that one.)
const TypeSkip Type = 0xFE

// appendSkipFrame appends a skip frame of exactly n bytes (n >=
// FrameHeaderSize) to dst.
func appendSkipFrame(dst []byte, n int) []byte {
	payload := make([]byte, n-FrameHeaderSize)
	return appendFrame(dst, Record{Type: TypeSkip, Payload: payload}, recordCRC(TypeSkip, payload))
}

// frameAt validates the frame at b[off:] entirely in memory, where b ends
// at the end of valid data, and returns the offset just past it, its type,
// and "" or the reason it is damage. It is the in-memory twin of
// frameIter.next, used where recovery has to look at one range many ways.
func frameAt(b []byte, off int) (end int, typ Type, reason string) {
	room := len(b) - off
	if room < FrameHeaderSize {
		return off, 0, "truncated frame header"
	}
	h := decodeFrameHeader(b[off : off+FrameHeaderSize])
	if reason := checkFrameHeader(h, int64(room)); reason != "" {
		return off, h.typ, reason
	}
	end = off + frameSize(int(h.length))
	if recordCRC(h.typ, b[off+FrameHeaderSize:end]) != h.crc {
		return off, h.typ, "checksum mismatch"
	}
	return end, h.typ, ""
}
