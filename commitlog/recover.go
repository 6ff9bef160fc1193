package commitlog

import (
	"errors"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/hourglass-mq/hourglass/vfs"
)

// recoverDir opens the segments of dir and repairs the damage a crash can
// leave, returning them oldest first with their sizes set. It relies on the
// write protocol's invariants (see the package doc):
//
//   - a segment is synced before its successor is created, so only the last
//     segment can have a torn tail;
//   - a new segment's header is synced, and its directory entry too, before
//     any record is written to it, so a segment without a valid header that
//     is no longer than a header is an interrupted creation, holding nothing
//     that was acknowledged.
//
// A bad record in the last segment is cut with everything after it only
// if no valid record follows it (a torn tail). If valid records follow, it
// is media damage: recoverDir fails with a *DamageError and changes
// nothing, and Repair is the way on. Damage that no crash under this
// protocol produces (a bad header on a segment with records, segments that
// do not chain) fails with ErrCorrupt rather than guessing which
// acknowledged records to drop.
func recoverDir(fsys vfs.FS, dir string) (segs []*segment, info RecoveryInfo, err error) {
	began := time.Now()
	defer func() {
		info.Duration = time.Since(began)
		if err != nil {
			for _, s := range segs {
				_ = s.f.Close()
			}
			segs = nil
		}
	}()

	names, err := fsys.List(dir)
	if vfs.IsNotExist(err) {
		if err = fsys.MkdirAll(dir); err != nil {
			return nil, info, fmt.Errorf("commitlog: create dir: %w", err)
		}
		// The new directory's own entry must survive a crash before any
		// record in it is acknowledged.
		if err = fsys.SyncDir(path.Dir(path.Clean(dir))); err != nil {
			return nil, info, fmt.Errorf("commitlog: sync parent of new dir: %w", err)
		}
		names, err = nil, nil
	}
	if err != nil {
		return nil, info, fmt.Errorf("commitlog: list dir: %w", err)
	}
	segs, nextBase, err := openSegments(fsys, dir, names, &info)
	if err != nil {
		return segs, info, err
	}

	if len(segs) == 0 {
		s, err := createSegment(fsys, dir, nextBase)
		if err != nil {
			return nil, info, err
		}
		info.Created = true
		info.Segments = 1
		info.TruncatedAt = nextBase
		return []*segment{s}, info, nil
	}
	info.Segments = len(segs)

	// Scan the tail record by record. At the first bad record, tell a torn
	// tail (nothing valid after it: cut it) from media damage (valid
	// records follow: refuse, and leave the file as it is for Repair).
	last := segs[len(segs)-1]
	sc, err := scanSegment(last, true)
	if err != nil {
		return segs, info, err
	}
	info.RecordsScanned = sc.records
	info.BytesScanned = int64(sc.validEnd - last.base)
	info.tailSum = sc.sum
	info.TruncatedAt = sc.validEnd
	if len(sc.ranges) == 0 {
		// A zero tail stays: it is preallocated space (prealloc.go).
		info.PreallocatedBytes = sc.zeroTail
		last.size = int64(sc.validEnd - last.base)
		return segs, info, nil
	}
	if len(sc.ranges) > 1 || !sc.ranges[0].Tail {
		return segs, info, &DamageError{Dir: dir, Segment: last.name, Ranges: sc.ranges}
	}
	torn := sc.ranges[0]
	info.TruncatedBytes = torn.Length
	info.Reason = fmt.Sprintf("torn tail: %s at position %d, and no valid record in the %d bytes from there to the end of %s",
		torn.Reason, torn.Pos, torn.Length, last.name)
	if err := cutSegment(last, sc.validEnd); err != nil {
		return segs, info, err
	}
	return segs, info, nil
}

// openSegments opens the segment files among names, removes trailing ones
// whose creation never completed, and checks that every other one has a
// valid header and continues its predecessor exactly. It returns the
// segments oldest first with their sizes set, and the base a replacement
// first segment would get if none is left.
func openSegments(fsys vfs.FS, dir string, names []string, info *RecoveryInfo) (segs []*segment, nextBase Pos, err error) {
	if segs, err = openNamed(fsys, dir, names); err != nil {
		return segs, nextBase, err
	}

	// Drop interrupted creations from the end.
	for len(segs) > 0 {
		last := segs[len(segs)-1]
		size, err := last.f.Size()
		if err != nil {
			return segs, nextBase, fmt.Errorf("commitlog: size of %s: %w", last.name, err)
		}
		h, err := readHeader(last)
		if err != nil {
			return segs, nextBase, err
		}
		if size >= HeaderSize && checkHeader(h, last.base) == nil {
			break // a complete segment
		}
		if size > HeaderSize {
			// Without a valid header, only zeros are an interrupted
			// creation: no record was ever written to the file.
			zero, err := allZero(last.f, last.name, 0, size)
			if err != nil {
				return segs, nextBase, err
			}
			if !zero {
				break // checked, and refused, below
			}
		}
		_ = last.f.Close()
		if err := fsys.Remove(path.Join(dir, last.name)); err != nil {
			return segs[:len(segs)-1], nextBase, fmt.Errorf("commitlog: remove incomplete segment %s: %w", last.name, err)
		}
		segs = segs[:len(segs)-1]
		info.RemovedSegments = append(info.RemovedSegments, last.name)
		nextBase = last.base
	}
	if len(info.RemovedSegments) > 0 {
		if err := fsys.SyncDir(dir); err != nil {
			return segs, nextBase, fmt.Errorf("commitlog: sync dir after removing incomplete segments: %w", err)
		}
	}

	// Every remaining segment must have a valid header and continue its
	// predecessor exactly.
	for i, s := range segs {
		size, err := s.f.Size()
		if err != nil {
			return segs, nextBase, fmt.Errorf("commitlog: size of %s: %w", s.name, err)
		}
		h, err := readHeader(s)
		if err != nil {
			return segs, nextBase, err
		}
		if herr := checkHeader(h, s.base); herr != nil {
			return segs, nextBase, fmt.Errorf("%w: segment %s: %v", ErrCorrupt, s.name, herr)
		}
		s.size = size - HeaderSize
		if i > 0 {
			if err := chainTo(segs[i-1], s.base); err != nil {
				return segs, nextBase, err
			}
		}
	}

	return segs, nextBase, nil
}

// openNamed opens the segment files among names (others are left alone),
// in the order given; on failure it returns those it opened.
func openNamed(fsys vfs.FS, dir string, names []string) (segs []*segment, err error) {
	for _, name := range names {
		base, ok := parseSegmentName(name)
		if !ok {
			continue
		}
		f, err := fsys.Open(path.Join(dir, name))
		if err != nil {
			return segs, fmt.Errorf("commitlog: open %s: %w", name, err)
		}
		segs = append(segs, &segment{base: base, name: name, f: f})
	}
	return segs, nil
}

// cutSegment truncates s to end the log at validEnd and makes the cut
// durable.
func cutSegment(s *segment, validEnd Pos) error {
	if err := s.f.Truncate(HeaderSize + int64(validEnd-s.base)); err != nil {
		return fmt.Errorf("commitlog: truncate %s: %w", s.name, err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("commitlog: sync %s after truncate: %w", s.name, err)
	}
	s.size = int64(validEnd - s.base)
	return nil
}

// readHeader reads up to HeaderSize bytes from the start of s.
func readHeader(s *segment) ([]byte, error) {
	h := make([]byte, HeaderSize)
	n, err := s.f.ReadAt(h, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("commitlog: read header of %s: %w", s.name, err)
	}
	return h[:n], nil
}

// createSegment makes the segment file for base durable: file, header,
// fdatasync, directory entry. On failure it removes what it made; the
// returned error then wraps errCleanup if that removal failed too, because
// a leftover file with a valid header would break the chain of segments.
func createSegment(fsys vfs.FS, dir string, base Pos) (*segment, error) {
	name := segmentName(base)
	p := path.Join(dir, name)
	f, err := fsys.Create(p)
	if err != nil {
		// A failed create may still have made the entry; make sure it is
		// gone so that no stray file shadows a later attempt.
		if rerr := fsys.Remove(p); rerr != nil && !vfs.IsNotExist(rerr) {
			return nil, fmt.Errorf("commitlog: create %s: %w (and removing it: %w: %w)", name, classify(err), errCleanup, rerr)
		}
		return nil, fmt.Errorf("commitlog: create %s: %w", name, classify(err))
	}
	step := "write header of"
	if _, err = f.WriteAt(encodeHeader(base), 0); err == nil {
		step = "sync"
		if err = f.Sync(); err == nil {
			step = "sync dir for"
			err = fsys.SyncDir(dir)
		}
	}
	if err == nil {
		return &segment{base: base, name: name, f: f}, nil
	}
	_ = f.Close()
	rerr := fsys.Remove(p)
	if rerr == nil {
		rerr = fsys.SyncDir(dir)
	}
	if rerr != nil {
		return nil, fmt.Errorf("commitlog: %s %s: %w (and removing it: %w: %w)", step, name, classify(err), errCleanup, rerr)
	}
	return nil, fmt.Errorf("commitlog: %s %s: %w", step, name, classify(err))
}

// DamagedRange is one range of a segment whose bytes failed validation,
// as recovery and Repair delimit it: it starts at the first bad frame
// (a record boundary, since every frame before it validated) and ends
// where a frame that validates and chains starts again, or at the end of
// the segment's data.
type DamagedRange struct {
	// Segment is the file name of the segment holding the range.
	Segment string `json:"segment"`
	// Pos is the position of the range's first byte; Offset is the same
	// byte's offset in the file.
	Pos    Pos   `json:"pos"`
	Offset int64 `json:"offset"`
	// Length is the number of bytes in the range.
	Length int64 `json:"length"`
	// Reason says why the frame at Pos failed validation.
	Reason string `json:"reason"`
	// Tail is set when no valid frame follows the range in its segment:
	// in the last segment, the torn tail of a crash.
	Tail bool `json:"tail"`
	// RecordsAfter and BytesAfter count the valid records (skip frames
	// excluded from the count, included in the bytes) from the range's end
	// to the next damaged range or the end of the segment.
	RecordsAfter int   `json:"records_after"`
	BytesAfter   int64 `json:"bytes_after"`
}

// End returns the position just past the range.
func (r DamagedRange) End() Pos { return r.Pos + Pos(r.Length) }

// DamageError is Open's refusal of a last segment in which a bad record is
// followed by valid ones: media damage rather than a torn write, so
// cutting the tail would drop acknowledged records. Nothing was changed on
// disk. It matches ErrCorrupt with errors.Is; Repair deals with it.
type DamageError struct {
	// Dir is the log's directory, Segment the damaged file's name in it.
	Dir     string
	Segment string
	// Ranges are the damaged ranges of the segment, in order; at least one
	// is followed by valid records.
	Ranges []DamagedRange
}

// Error names the file, the damage and what follows it, and says what to
// do.
func (e *DamageError) Error() string {
	first := e.Ranges[0]
	var records int
	var after, damaged int64
	for _, r := range e.Ranges {
		records += r.RecordsAfter
		after += r.BytesAfter
		damaged += r.Length
	}
	more := ""
	if len(e.Ranges) > 1 {
		more = fmt.Sprintf(" (%d damaged ranges, %d bytes in all)", len(e.Ranges), damaged)
	}
	return fmt.Sprintf("%v: segment %s: %d damaged bytes at position %d (file offset %d: %s) are followed by %d valid records (%d bytes)%s; "+
		"this is media damage, not a torn write, so nothing was cut: stop the broker and run `hourglass repair --data-dir %s` "+
		"to quarantine the damaged bytes and keep every record after them at its position",
		ErrCorrupt, path.Join(e.Dir, e.Segment), first.Length, first.Pos, first.Offset, first.Reason,
		records, after, more, dataDirHint(e.Dir))
}

// Is makes errors.Is(err, ErrCorrupt) hold.
func (e *DamageError) Is(target error) bool { return target == ErrCorrupt }

// dataDirHint names the data directory to repair: the engine keeps its log
// in DIR/log.
func dataDirHint(dir string) string {
	if path.Base(path.Clean(dir)) == "log" {
		return path.Dir(path.Clean(dir))
	}
	return "DIR (the data directory holding " + dir + ")"
}

// segmentScan is what scanSegment found.
type segmentScan struct {
	validEnd Pos // end of the valid prefix: the first damaged range's start, or the end
	records  int // valid records (skip frames excluded) before validEnd
	skips    int // skip frames before validEnd
	ranges   []DamagedRange
	sum      uint32 // CRC32C of the frames before validEnd (sum.go)
	zeroTail int64  // zero bytes from validEnd to the end (last segment only)
}

// scanSegment validates s frame by frame. Up to the first bad frame it
// streams; from there on (damage is rare) it reads the rest of the segment
// into memory and delimits the damaged ranges with findDamage. In the last
// segment (last set), zeros from a frame boundary to the end of the file
// are its preallocated space, not damage: its records end there.
func scanSegment(s *segment, last bool) (segmentScan, error) {
	var sc segmentScan
	it := frameIter{f: s.f, base: s.base, pos: s.base, limit: s.end(), sum: &sc.sum, view: true} // checked, not kept
	ce, records, skips, err := walkToDamage(&it, s.name, nil)
	sc.records, sc.skips = records, skips
	if err != nil {
		return sc, err
	}
	if ce == nil {
		sc.validEnd = it.pos
		return sc, nil
	}
	sc.validEnd = ce.pos
	if zero, err := zeroTail(s, ce.pos, last); err != nil || zero {
		if zero {
			sc.zeroTail = int64(s.end() - ce.pos)
		}
		return sc, err
	}
	rest, err := readRest(s, ce.pos)
	if err != nil {
		return sc, err
	}
	sc.ranges = findDamage(rest, ce.pos, ce.reason)
	// Valid records after damage, then the preallocated zeros: the zeros
	// are no damage of their own.
	if k := len(sc.ranges) - 1; last && k > 0 && sc.ranges[k].Tail &&
		isZero(rest[sc.ranges[k].Pos-ce.pos:]) {
		sc.zeroTail = sc.ranges[k].Length
		sc.ranges = sc.ranges[:k]
	}
	for i := range sc.ranges {
		sc.ranges[i].Segment = s.name
		sc.ranges[i].Offset = HeaderSize + int64(sc.ranges[i].Pos-s.base)
	}
	return sc, nil
}

// findDamage delimits the damaged ranges of b, the bytes of positions
// [at, end of segment), where the frame at b[0] failed validation for
// reason. After each damaged range it walks the valid frames that follow,
// up to the next bad frame, which starts the next range.
func findDamage(b []byte, at Pos, reason string) []DamagedRange {
	var out []DamagedRange
	cur := 0
	for {
		r := DamagedRange{Pos: at + Pos(cur), Reason: reason}
		next, ok := resync(b, cur)
		if !ok {
			r.Length, r.Tail = int64(len(b)-cur), true
			return append(out, r)
		}
		r.Length = int64(next - cur)
		off := next
		for off < len(b) {
			end, typ, why := frameAt(b, off)
			if why != "" {
				reason = why
				break
			}
			if typ != TypeSkip {
				r.RecordsAfter++
			}
			r.BytesAfter += int64(end - off)
			off = end
		}
		out = append(out, r)
		if off >= len(b) {
			return out
		}
		cur = off
	}
}

// resync finds where valid frames start again after the bad frame at
// b[cur], and reports false if none does. A candidate must validate and
// chain (see chains), and no candidate starts in the bad frame's first
// FrameHeaderSize bytes: the bad frame starts at a record boundary (every
// frame before it validated), and every frame is at least that long. This
// also makes every damaged range at least a frame header long, so that a
// skip frame can always cover one exactly.
//
// The bad frame's own length field is the first witness: if the damage
// spared it, the frame after it is the true next record (hint), and a
// frame embedded in the damaged payload must not be picked instead. An
// earlier candidate wins over the hint only if the bad frame validates
// when cut off at that candidate: then the damage was in the length field
// alone, and the candidate is the true next record. Without a usable hint
// the earliest candidate wins, which keeps the most records. A hint that
// reaches exactly the end of the data means that nothing follows.
func resync(b []byte, cur int) (int, bool) {
	hint := -1 // a chaining frame, or len(b), where the bad frame says it ends
	if len(b)-cur >= FrameHeaderSize {
		h := decodeFrameHeader(b[cur : cur+FrameHeaderSize])
		if h.length <= MaxPayloadLimit {
			end := int64(cur) + int64(frameSize(int(h.length)))
			if end == int64(len(b)) || end < int64(len(b)) && chains(b, int(end)) {
				hint = int(end)
			}
		}
	}
	limit := len(b)
	if hint >= 0 {
		limit = hint
	}
	for off := cur + FrameHeaderSize; off < limit && off+FrameHeaderSize <= len(b); off++ {
		if chains(b, off) && (hint < 0 || lengthOnlyDamage(b, cur, off)) {
			return off, true
		}
	}
	if hint >= 0 && hint < len(b) {
		return hint, true
	}
	return 0, false
}

// lengthOnlyDamage reports whether the frame at b[cur] validates when its
// length is taken to be end-cur-FrameHeaderSize: whether only its length
// field was damaged.
func lengthOnlyDamage(b []byte, cur, end int) bool {
	h := decodeFrameHeader(b[cur : cur+FrameHeaderSize])
	return h.typ != 0 && recordCRC(h.typ, b[cur+FrameHeaderSize:end]) == h.crc
}

// chains reports whether the frame at b[off] validates and is followed
// either by the end of the data or by another frame that validates. A
// lone frame-shaped run of bytes inside a payload almost never has a valid
// frame right after it; the cheap header checks of both frames run before
// either checksum.
func chains(b []byte, off int) bool {
	plausible := func(o int) bool {
		return len(b)-o >= FrameHeaderSize &&
			checkFrameHeader(decodeFrameHeader(b[o:o+FrameHeaderSize]), int64(len(b)-o)) == ""
	}
	if !plausible(off) {
		return false
	}
	end := off + frameSize(int(decodeFrameHeader(b[off:off+FrameHeaderSize]).length))
	if end != len(b) && !plausible(end) {
		return false
	}
	if _, _, why := frameAt(b, off); why != "" {
		return false
	}
	if end == len(b) {
		return true
	}
	_, _, why := frameAt(b, end)
	return why == ""
}
