package commitlog

import (
	"errors"
	"fmt"
	"io"

	"github.com/hourglass-mq/hourglass/vfs"
)

// VerifyReport is what Verify found in a log directory.
type VerifyReport struct {
	// Segments are the segments whose header validated, oldest first; End
	// is the end of each file's data (torn tail included, the last
	// segment's preallocated zeros not).
	Segments []Segment
	// Start is the first segment's base and Head the end of the valid
	// records of the last one: what Open would make of the log.
	Start, Head Pos
	// Records counts the valid records visited (skip frames excluded),
	// Skips the skip frames repair left.
	Records, Skips int
	// Damage lists every damaged range of every segment, oldest first. A
	// range with Tail set in the last segment is a torn tail, which Open
	// cuts; any other range makes Open refuse (last segment) or Scan fail
	// when it reaches it (sealed segment).
	Damage []DamagedRange
	// Broken lists segments Open refuses outright: a bad header on a file
	// holding records, or a segment that does not continue its predecessor.
	Broken []BrokenSegment
	// Incomplete lists trailing files whose creation never completed (no
	// valid header, no records), which Open removes.
	Incomplete []string
	// SumMismatch lists sealed segments whose bytes do not match their
	// sum file although every frame validates (sum.go): something changed
	// them that no record's checksum caught. Sums counts the sealed
	// segments checked against a sum file; a segment without a valid one
	// is checked by its frames alone.
	SumMismatch []BrokenSegment
	Sums        int
	// Quarantined lists the skip frames (Repair's, over damage), oldest
	// first: no record is at a position inside one.
	Quarantined []SkipFrame
}

// SkipFrame is the range of positions [Pos, End) a skip frame covers.
type SkipFrame struct {
	Pos Pos `json:"pos"`
	End Pos `json:"end"`
}

// BrokenSegment is a segment that fails a structural check.
type BrokenSegment struct {
	Segment string `json:"segment"`
	Reason  string `json:"reason"`
}

// Verify reads every segment of the log in dir, never writing (pass a
// vfs.ReadOnly view to make sure of it), and calls fn with every valid
// record in log order, the records after a damaged range included. Unlike
// Open it does not stop at the first damage: it delimits every damaged
// range as Repair would and reports them all. An error from fn stops it
// and is returned; so are I/O errors. Damage is reported, not returned.
func Verify(fsys vfs.FS, dir string, fn func(Pos, Record) error) (VerifyReport, error) {
	var rep VerifyReport
	names, err := fsys.List(dir)
	if err != nil {
		return rep, fmt.Errorf("commitlog: list %s: %w", dir, err)
	}
	var segs []*segment
	defer func() {
		for _, s := range segs {
			s.f.Close()
		}
	}()
	segs, err = openNamed(fsys, dir, names)
	if err != nil {
		return rep, err
	}
	for _, s := range segs {
		size, err := s.f.Size()
		if err != nil {
			return rep, fmt.Errorf("commitlog: size of %s: %w", s.name, err)
		}
		s.size = max(0, size-HeaderSize)
	}
	// Trailing interrupted creations, as Open removes them.
	if segs, err = rep.dropIncomplete(segs); err != nil {
		return rep, err
	}
	// A sealed segment's zero tail beyond its successor's base, as Open
	// takes it (chainTo); a failed check is reported as Broken below.
	for i := 1; i < len(segs); i++ {
		if err := chainTo(segs[i-1], segs[i].base); err != nil && !errors.Is(err, ErrCorrupt) {
			return rep, err
		}
	}
	var prevEnd Pos
	for i, s := range segs {
		h, err := readHeader(s)
		if err != nil {
			return rep, err
		}
		if herr := checkHeader(h, s.base); herr != nil {
			rep.Broken = append(rep.Broken, BrokenSegment{Segment: s.name, Reason: herr.Error()})
			continue
		}
		if i > 0 && prevEnd != s.base {
			rep.Broken = append(rep.Broken, BrokenSegment{Segment: s.name,
				Reason: fmt.Sprintf("starts at %d but its predecessor ends at %d", s.base, prevEnd)})
		}
		prevEnd = s.end()
		rep.Segments = append(rep.Segments, Segment{Base: s.base, End: s.end(), Name: s.name})
		damaged := len(rep.Damage)
		validEnd, sum, err := rep.verifySegment(s, fn, i == len(segs)-1)
		if err != nil {
			return rep, err
		}
		rep.Segments[len(rep.Segments)-1].End = s.end()
		rep.Head = validEnd
		if i < len(segs)-1 && len(rep.Damage) == damaged {
			if err := rep.checkSum(fsys, dir, s, sum); err != nil {
				return rep, err
			}
		}
	}
	if len(rep.Segments) > 0 {
		rep.Start = rep.Segments[0].Base
	}
	return rep, nil
}

// verifySegment walks s, delimiting damage with findDamage and visiting
// the valid records between damaged ranges. It returns the end of the
// segment's valid records (where a torn tail starts), and the sum of its
// frames, which is the segment's sum when it has no damage.
func (rep *VerifyReport) verifySegment(s *segment, fn func(Pos, Record) error, last bool) (Pos, uint32, error) {
	from := s.base
	var sum uint32
	for {
		it := frameIter{f: s.f, base: s.base, pos: from, limit: s.end(), sum: &sum,
			onSkip: func(p, end Pos) { rep.Quarantined = append(rep.Quarantined, SkipFrame{Pos: p, End: end}) }}
		ce, records, skips, err := walkToDamage(&it, s.name, fn)
		rep.Records += records
		rep.Skips += skips
		if err != nil {
			return 0, 0, err
		}
		if ce == nil {
			return s.end(), sum, nil
		}
		if zero, err := zeroTail(s, ce.pos, last); err != nil || zero {
			// The last segment's preallocated zeros, as Open takes them:
			// the segment ends with its records.
			s.size = int64(ce.pos - s.base)
			return ce.pos, sum, err
		}
		rest, err := readRest(s, ce.pos)
		if err != nil {
			return 0, 0, err
		}
		r := findDamage(rest, ce.pos, ce.reason)[0]
		r.Segment, r.Offset = s.name, HeaderSize+int64(r.Pos-s.base)
		rep.Damage = append(rep.Damage, r)
		if r.Tail {
			return r.Pos, 0, nil
		}
		from = r.End()
	}
}

// checkSum compares the sum of sealed segment s's frames with its sum
// file, if it has a valid one.
func (rep *VerifyReport) checkSum(fsys vfs.FS, dir string, s *segment, sum uint32) error {
	want, ok, _, err := readSum(fsys, dir, s.name, s.base)
	if err != nil {
		return fmt.Errorf("commitlog: read the sum file of %s: %w", s.name, err)
	}
	if !ok {
		return nil
	}
	rep.Sums++
	if want.length != s.size || want.crc != sum {
		rep.SumMismatch = append(rep.SumMismatch, BrokenSegment{Segment: s.name, Reason: fmt.Sprintf(
			"its bytes do not match its sum file (%d bytes, crc %08x; sealed as %d bytes, crc %08x), though every record validates",
			s.size, sum, want.length, want.crc)})
	}
	return nil
}

// walkToDamage visits the valid records of it up to its limit (ce nil) or
// to the first damaged frame (returned), counting records and skip frames;
// fn may be nil. I/O errors and fn's errors are returned as err.
func walkToDamage(it *frameIter, name string, fn func(Pos, Record) error) (ce *corruptError, records, skips int, err error) {
	for {
		rec, at, err := it.next()
		if err == io.EOF {
			return nil, records, skips, nil
		}
		if isSkip(err) {
			skips++
			if it.onSkip != nil {
				it.onSkip(at, it.pos)
			}
			continue
		}
		if errors.As(err, &ce) {
			return ce, records, skips, nil
		}
		if err != nil {
			return nil, records, skips, fmt.Errorf("commitlog: scan %s: %w", name, err)
		}
		records++
		if fn != nil {
			if err := fn(at, rec); err != nil {
				return nil, records, skips, err
			}
		}
	}
}

// readRest reads the bytes of s from position pos to its end: the damaged
// part of a segment, which findDamage delimits in memory.
func readRest(s *segment, pos Pos) ([]byte, error) {
	rest := make([]byte, s.end()-pos)
	n, err := s.f.ReadAt(rest, HeaderSize+int64(pos-s.base))
	if n < len(rest) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("commitlog: read damaged tail of %s: %w", s.name, err)
	}
	return rest, nil
}

// dropIncomplete takes the trailing interrupted creations off segs, as
// Open removes them (no valid header, and nothing but zeros after it),
// lists them in Incomplete and closes them.
func (rep *VerifyReport) dropIncomplete(segs []*segment) ([]*segment, error) {
	for len(segs) > 0 {
		last := segs[len(segs)-1]
		h, err := readHeader(last)
		if err != nil {
			return segs, err
		}
		if len(h) == HeaderSize && checkHeader(h, last.base) == nil {
			break
		}
		if last.size > 0 {
			zero, err := allZero(last.f, last.name, 0, HeaderSize+last.size)
			if err != nil {
				return segs, err
			}
			if !zero {
				break
			}
		}
		rep.Incomplete = append(rep.Incomplete, last.name)
		last.f.Close()
		segs = segs[:len(segs)-1]
	}
	return segs, nil
}
