package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"

	"github.com/hourglass-mq/hourglass/vfs"
)

// Segment checksums.
//
// When the writer seals a segment (a roll: the segment is synced in full
// and its successor is about to be created), it writes a sum file beside
// it, named <segment>.sum, holding the CRC32C of every record byte of the
// segment (all of its frames, skip frames included; the segment header
// excluded):
//
//	sum file (sumFileSize = 32 bytes, little endian)
//	+--------+---------+----------+--------+--------+---------+-----------+
//	| magic  | version | reserved | base   | length | crc32c  | crc32c    |
//	| "HGSS" | 1       | 3 x 0    | uint64 | uint64 | records | bytes 0..28|
//	| 4      | 1       | 3        | 8      | 8      | 4       | 4         |
//	+--------+---------+----------+--------+--------+---------+-----------+
//
// base is the segment's base (a sum file renamed or copied beside another
// segment does not match), length its record bytes. These constants and
// the layout are part of the on-disk format.
//
// The sum is a second witness, not the truth. Each frame's own checksum
// already finds damage inside a record; the segment's sum also catches
// what leaves every frame valid (a segment cut short and re-chained, a
// stale copy of a frame) and lets Scrub say "this segment is exactly what
// was sealed". So the sum file is written without a directory sync, and
// a failure to write it is no failure of the log: a segment without a
// valid sum file (sealed before sum files existed, a crash between the
// segment's sync and the sum's, a sum file damaged itself) is checked by
// its frames alone. Nothing refuses to open for a missing or bad sum file.
//
// Repair rewrites the sum file of a sealed segment it salvages (the skip
// frames change its bytes); retention removes it with its segment; a
// backup links or copies it with its segment.

const (
	sumMagic       = "HGSS"
	sumVersion     = 1
	sumFileSize    = 32
	sumFileSuffix  = ".sum"
	sumStateNone   = "none"
	sumStateOK     = "ok"
	sumStateBad    = "mismatch"
	sumStateBroken = "unreadable"
)

// SumFileName returns the name of the sum file of the segment file named
// segment.
func SumFileName(segment string) string { return segment + sumFileSuffix }

func encodeSum(base Pos, length int64, crc uint32) []byte {
	b := make([]byte, sumFileSize)
	copy(b[0:4], sumMagic)
	b[4] = sumVersion
	binary.LittleEndian.PutUint64(b[8:16], uint64(base))
	binary.LittleEndian.PutUint64(b[16:24], uint64(length))
	binary.LittleEndian.PutUint32(b[24:28], crc)
	binary.LittleEndian.PutUint32(b[28:32], crc32.Checksum(b[:28], castagnoli))
	return b
}

// segmentSum is a decoded sum file.
type segmentSum struct {
	length int64
	crc    uint32
}

func decodeSum(b []byte, base Pos) (segmentSum, error) {
	switch {
	case len(b) != sumFileSize:
		return segmentSum{}, fmt.Errorf("sum file is %d bytes, want %d", len(b), sumFileSize)
	case string(b[0:4]) != sumMagic:
		return segmentSum{}, fmt.Errorf("bad magic %q", b[0:4])
	case binary.LittleEndian.Uint32(b[28:32]) != crc32.Checksum(b[:28], castagnoli):
		return segmentSum{}, errors.New("sum file checksum mismatch")
	case b[4] != sumVersion:
		return segmentSum{}, fmt.Errorf("unsupported sum file version %d", b[4])
	case Pos(binary.LittleEndian.Uint64(b[8:16])) != base:
		return segmentSum{}, fmt.Errorf("sum file is of the segment at %d", binary.LittleEndian.Uint64(b[8:16]))
	}
	return segmentSum{length: int64(binary.LittleEndian.Uint64(b[16:24])), crc: binary.LittleEndian.Uint32(b[24:28])}, nil
}

// writeSum writes the sum file of the segment named name, synced but
// without a directory sync (see above).
func writeSum(fsys vfs.FS, dir, name string, base Pos, length int64, crc uint32) error {
	p := path.Join(dir, SumFileName(name))
	f, err := fsys.Create(p)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(encodeSum(base, length, crc), 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readSum reads the sum file of the segment named name. ok is false when
// there is none; a sum file that does not validate is returned as bad
// with why. err is an I/O error.
func readSum(fsys vfs.FS, dir, name string, base Pos) (sum segmentSum, ok bool, bad string, err error) {
	f, err := fsys.Open(path.Join(dir, SumFileName(name)))
	if vfs.IsNotExist(err) {
		return sum, false, "", nil
	}
	if err != nil {
		return sum, false, "", err
	}
	defer f.Close()
	b := make([]byte, sumFileSize+1)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return sum, false, "", err
	}
	sum, derr := decodeSum(b[:n], base)
	if derr != nil {
		return sum, false, derr.Error(), nil
	}
	return sum, true, "", nil
}

// fileSum computes the sum of s's record bytes [0, size) by reading them.
func fileSum(s *segment) (uint32, error) {
	var crc uint32
	buf := make([]byte, readChunk)
	for off := int64(0); off < s.size; {
		n := min(int64(len(buf)), s.size-off)
		got, err := s.f.ReadAt(buf[:n], HeaderSize+off)
		if int64(got) < n {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, fmt.Errorf("commitlog: read %s for its sum: %w", s.name, err)
		}
		crc = crc32.Update(crc, castagnoli, buf[:n])
		off += n
	}
	return crc, nil
}
