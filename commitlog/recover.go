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
// Damage that no crash under this protocol produces (a bad header on a
// segment with records, segments that do not chain) fails with ErrCorrupt
// rather than guessing which acknowledged records to drop.
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
	for _, name := range names {
		base, ok := parseSegmentName(name)
		if !ok {
			continue
		}
		f, err := fsys.Open(path.Join(dir, name))
		if err != nil {
			return segs, info, fmt.Errorf("commitlog: open %s: %w", name, err)
		}
		segs = append(segs, &segment{base: base, name: name, f: f})
	}

	// Drop interrupted creations from the end.
	var nextBase Pos // where a replacement first segment would start
	for len(segs) > 0 {
		last := segs[len(segs)-1]
		size, err := last.f.Size()
		if err != nil {
			return segs, info, fmt.Errorf("commitlog: size of %s: %w", last.name, err)
		}
		if size > HeaderSize {
			break
		}
		h, err := readHeader(last)
		if err != nil {
			return segs, info, err
		}
		if size == HeaderSize && checkHeader(h, last.base) == nil {
			break // an empty but complete segment
		}
		_ = last.f.Close()
		if err := fsys.Remove(path.Join(dir, last.name)); err != nil {
			return segs[:len(segs)-1], info, fmt.Errorf("commitlog: remove incomplete segment %s: %w", last.name, err)
		}
		segs = segs[:len(segs)-1]
		info.RemovedSegments = append(info.RemovedSegments, last.name)
		nextBase = last.base
	}
	if len(info.RemovedSegments) > 0 {
		if err := fsys.SyncDir(dir); err != nil {
			return segs, info, fmt.Errorf("commitlog: sync dir after removing incomplete segments: %w", err)
		}
	}

	// Every remaining segment must have a valid header and continue its
	// predecessor exactly.
	for i, s := range segs {
		size, err := s.f.Size()
		if err != nil {
			return segs, info, fmt.Errorf("commitlog: size of %s: %w", s.name, err)
		}
		h, err := readHeader(s)
		if err != nil {
			return segs, info, err
		}
		if herr := checkHeader(h, s.base); herr != nil {
			return segs, info, fmt.Errorf("%w: segment %s: %v", ErrCorrupt, s.name, herr)
		}
		s.size = size - HeaderSize
		if i > 0 && segs[i-1].end() != s.base {
			return segs, info, fmt.Errorf("%w: segment %s starts at %d but its predecessor ends at %d",
				ErrCorrupt, s.name, s.base, segs[i-1].end())
		}
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

	// Scan the tail record by record; cut at the first bad one.
	last := segs[len(segs)-1]
	it := frameIter{f: last.f, base: last.base, pos: last.base, limit: last.end()}
	for {
		_, _, err := it.next()
		if err == io.EOF {
			break
		}
		var ce *corruptError
		if errors.As(err, &ce) {
			info.Reason = ce.reason
			break
		}
		if err != nil {
			return segs, info, fmt.Errorf("commitlog: scan %s: %w", last.name, err)
		}
		info.RecordsScanned++
	}
	info.BytesScanned = int64(it.pos - last.base)
	info.TruncatedAt = it.pos
	if it.pos < last.end() {
		info.TruncatedBytes = int64(last.end() - it.pos)
		if err := last.f.Truncate(HeaderSize + info.BytesScanned); err != nil {
			return segs, info, fmt.Errorf("commitlog: truncate %s: %w", last.name, err)
		}
		if err := last.f.Sync(); err != nil {
			return segs, info, fmt.Errorf("commitlog: sync %s after truncate: %w", last.name, err)
		}
		last.size = info.BytesScanned
	}
	return segs, info, nil
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
