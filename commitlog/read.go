package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/hourglass-mq/hourglass/vfs"
)

// readChunk is how many bytes a sequential scan reads at a time.
const readChunk = 256 << 10

// frameIter walks the frames of one segment file from pos up to limit,
// validating each. Reads are positional, so any number of iterators may run
// beside the writer.
type frameIter struct {
	f     vfs.File
	base  Pos // position of the segment's first record
	pos   Pos // next frame to decode
	limit Pos // end of the valid range; a frame crossing it is damage
	// ahead is how many bytes to read at once; zero means readChunk. Read
	// of a single record uses a small value, Scan the default.
	ahead int64
	// view makes next return a payload that is a slice of buf rather than
	// a copy, valid only until the next call (ReadEach).
	view bool
	// sum, if not nil, accumulates the CRC32C of every frame's bytes that
	// validates, in order (the segment's sum: see sum.go).
	sum *uint32
	// pace, if not nil, is called before each read with its size, and its
	// error stops the walk (Scrub's rate limit).
	pace func(n int64) error
	// onSkip, if not nil, is told of each skip frame walkToDamage passes.
	onSkip func(pos, end Pos)
	// hdr holds a frame's header bytes for sum.
	hdr [FrameHeaderSize]byte

	// buf caches file bytes of positions [bufPos, bufPos+len(buf)).
	buf    []byte
	bufPos Pos
}

// corruptError is damage found while decoding: where and why.
type corruptError struct {
	pos    Pos
	reason string
	// skip is set for a valid skip frame (see TypeSkip): not damage to
	// the reader that walks on (each, recovery), but no record either, so
	// Read of its position fails like Read of the damage it replaced.
	skip bool
}

func (e *corruptError) Error() string {
	return fmt.Sprintf("%v: at position %d: %s", ErrCorrupt, e.pos, e.reason)
}

func (e *corruptError) Is(target error) bool { return target == ErrCorrupt }

// fill makes sure buf covers [it.pos, it.pos+n), reading ahead when it has
// to read at all.
func (it *frameIter) fill(n int64) error {
	if it.pos >= it.bufPos && int64(it.pos-it.bufPos)+n <= int64(len(it.buf)) {
		return nil
	}
	ahead := it.ahead
	if ahead == 0 {
		ahead = readChunk
	}
	want := max(n, min(ahead, int64(it.limit-it.pos)))
	if int64(cap(it.buf)) < want {
		it.buf = make([]byte, want)
	}
	it.buf = it.buf[:want]
	it.bufPos = it.pos
	if it.pace != nil {
		if err := it.pace(want); err != nil {
			return err
		}
	}
	got, err := it.f.ReadAt(it.buf, HeaderSize+int64(it.pos-it.base))
	it.buf = it.buf[:got]
	if int64(got) >= n {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		// The file is shorter than the range the log believes valid: it was
		// cut behind the log's back.
		return &corruptError{pos: it.pos, reason: "file ends inside the record"}
	}
	return err
}

// next decodes and validates the frame at it.pos and advances past it. It
// returns io.EOF at limit, a *corruptError for damage, or an I/O error. The
// second result is the record's position.
func (it *frameIter) next() (Record, Pos, error) {
	at := it.pos
	room := int64(it.limit) - int64(at)
	if room <= 0 {
		return Record{}, at, io.EOF
	}
	if room < FrameHeaderSize {
		return Record{}, at, &corruptError{pos: at, reason: "truncated frame header"}
	}
	if err := it.fill(FrameHeaderSize); err != nil {
		return Record{}, at, err
	}
	off := it.pos - it.bufPos
	h := decodeFrameHeader(it.buf[off : off+FrameHeaderSize])
	if reason := checkFrameHeader(h, room); reason != "" {
		return Record{}, at, &corruptError{pos: at, reason: reason}
	}
	total := int64(FrameHeaderSize) + int64(h.length)
	var payload []byte
	if total <= readChunk {
		if err := it.fill(total); err != nil {
			return Record{}, at, err
		}
		off = it.pos - it.bufPos
		payload = it.buf[off+FrameHeaderSize : int64(off)+total]
		if !it.view {
			payload = append(make([]byte, 0, len(payload)), payload...)
		}
	} else if payload = make([]byte, h.length); h.length > 0 {
		// Too big to cache: read straight into the payload.
		if it.pace != nil {
			if err := it.pace(int64(h.length)); err != nil {
				return Record{}, at, err
			}
		}
		n, err := it.f.ReadAt(payload, HeaderSize+int64(at-it.base)+FrameHeaderSize)
		if n < len(payload) {
			if err == nil || errors.Is(err, io.EOF) {
				return Record{}, at, &corruptError{pos: at, reason: "file ends inside the record"}
			}
			return Record{}, at, err
		}
	}
	if recordCRC(h.typ, payload) != h.crc {
		return Record{}, at, &corruptError{pos: at, reason: "checksum mismatch"}
	}
	if it.sum != nil {
		hdr := it.hdr[:] // in the iterator: a local array escaped, one allocation a frame
		binary.LittleEndian.PutUint32(hdr[0:4], h.length)
		binary.LittleEndian.PutUint32(hdr[4:8], h.crc)
		hdr[8] = byte(h.typ)
		*it.sum = crc32.Update(crc32.Update(*it.sum, castagnoli, hdr), castagnoli, payload)
	}
	it.pos = at + Pos(total)
	if h.typ == TypeSkip {
		return Record{}, at, &corruptError{pos: at, reason: "quarantined damage (a skip frame left by repair)", skip: true}
	}
	return Record{Type: h.typ, Payload: payload}, at, nil
}

// isSkip reports whether err is the skip frame report of next, after which
// the iterator has moved past the frame.
func isSkip(err error) bool {
	if err == nil {
		return false // before ce, which escapes into errors.As: one allocation a record
	}
	var ce *corruptError
	return errors.As(err, &ce) && ce.skip
}

// each calls fn for every record up to limit, passing over skip frames.
func (it *frameIter) each(fn func(Pos, Record) error) error {
	for {
		rec, at, err := it.next()
		if err == io.EOF {
			return nil
		}
		if isSkip(err) {
			continue
		}
		if err != nil {
			return err
		}
		if err := fn(at, rec); err != nil {
			return err
		}
	}
}

// DamagedAt reports whether err is a record failing validation at a
// position the caller asked for (Read, ReadEach, Scan), and that position:
// a bad checksum, length or type, a skip frame left by Repair over damage,
// or a file that ends inside the record. An I/O error (EIO) is not
// damage: it may pass, and the record may read fine later.
func DamagedAt(err error) (Pos, bool) {
	var ce *corruptError
	if errors.As(err, &ce) {
		return ce.pos, true
	}
	return 0, false
}
