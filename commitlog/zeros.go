package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/hourglass-mq/hourglass/vfs"
)

// Zeros in segment files: the preallocated space after the last segment's
// records (prealloc.go), and what recovery, Verify and Repair make of them.

// zeroTail reports whether, in the last segment (last set), everything
// from position at, where a frame failed validation, to the end of s is
// zeros. Those zeros were never a record: a frame of zeros has type 0,
// which no record has (format.go). A sealed segment's end is vouched for
// by its successor, so zeros inside it are damage, and false is returned.
func zeroTail(s *segment, at Pos, last bool) (bool, error) {
	if !last {
		return false, nil
	}
	return allZero(s.f, s.name, HeaderSize+int64(at-s.base), HeaderSize+s.size)
}

// chainTo checks that the sealed segment prev ends where its successor
// starts, at base. A prev longer than that by zeros only is taken to end
// at base: a preallocated segment sealed before its zero tail was cut
// (the writer cuts it before the successor exists, so only a hand-made
// directory shows one). Anything else fails with ErrCorrupt.
func chainTo(prev *segment, base Pos) error {
	if prev.end() > base && base >= prev.base {
		zero, err := allZero(prev.f, prev.name, HeaderSize+int64(base-prev.base), HeaderSize+prev.size)
		if err != nil {
			return err
		}
		if zero {
			prev.size = int64(base - prev.base)
		}
	}
	if prev.end() != base {
		return fmt.Errorf("%w: segment %s starts at %d but its predecessor ends at %d",
			ErrCorrupt, segmentName(base), base, prev.end())
	}
	return nil
}

// isZero reports whether b is all zeros.
func isZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroPage))
		if !bytes.Equal(b[:n], zeroPage[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// zeroPage is compared against, never written.
var zeroPage [4096]byte

// allZero reports whether bytes [off, end) of f, the file name, are all
// zero, reading them in steps.
func allZero(f vfs.File, name string, off, end int64) (bool, error) {
	buf := make([]byte, max(0, min(end-off, 256<<10)))
	for off < end {
		n := min(int64(len(buf)), end-off)
		got, err := f.ReadAt(buf[:n], off)
		if int64(got) < n {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return false, fmt.Errorf("commitlog: read %s at %d: %w", name, off, err)
		}
		if !isZero(buf[:n]) {
			return false, nil
		}
		off += n
	}
	return true, nil
}
