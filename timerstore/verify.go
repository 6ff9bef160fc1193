package timerstore

import (
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/hourglass-mq/hourglass/vfs"
)

// readFile reads the first length bytes of the file name through buf, in
// chunks of len(buf) bytes (a multiple of EntrySize), and hands each to fn
// with its offset. A missing file or one shorter than length is an
// ErrCorrupt; any other error is returned as it is.
func readFile(fs vfs.FS, name string, length int64, buf []byte, fn func(off int64, p []byte) error) error {
	f, err := fs.Open(name)
	if vfs.IsNotExist(err) {
		return corrupt(name, 0, fmt.Sprintf("file is missing, expected %d bytes", length))
	}
	if err != nil {
		return err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return err
	}
	if size < length {
		return corrupt(name, size, fmt.Sprintf("file ends here, expected %d bytes", length))
	}
	for off := int64(0); off < length; {
		p := buf[:min(int64(len(buf)), length-off)]
		if n, err := f.ReadAt(p, off); n < len(p) {
			if err == io.EOF {
				return corrupt(name, off+int64(n), fmt.Sprintf("file ends here, expected %d bytes", length))
			}
			return err
		}
		if err := fn(off, p); err != nil {
			return err
		}
		off += int64(len(p))
	}
	return nil
}

// verifyChunk is how many bytes Verify reads at a time: a whole number of
// entries, large enough that a bucket is a few reads.
const verifyChunk = EntrySize * 43690

// Verify reads every bucket file keep names up to its recorded length and
// checks every entry, so that recovery finds damage before it trusts the
// files rather than when a bucket falls due. It fails with ErrCorrupt, naming
// the file and offset, on the first bad entry, a file missing or shorter
// than recorded, or a recorded length that is not a whole number of entries.
// It only reads; call it after Trim, before Load.
func (s *Store) Verify(keep map[int64]int64) error { return s.VerifyVisit(keep, nil) }

// VerifyVisit is Verify that also hands every entry it checked to visit
// (when not nil), in file order, duplicates included: the engine counts its
// pending messages in the same pass, so that recovery reads the buckets
// once.
func (s *Store) VerifyVisit(keep map[int64]int64, visit func(Entry)) error {
	buf := make([]byte, verifyChunk)
	for _, b := range sortedStarts(keep) {
		name, k := s.name(b), keep[b]
		if err := s.checkRecorded(b, k); err != nil {
			return err
		}
		err := readFile(s.fs, name, k, buf, func(off int64, p []byte) error {
			for i := 0; i < len(p); i += EntrySize {
				e, ok := decode(p[i:i+EntrySize], b, s.width)
				if !ok {
					return corrupt(name, off+int64(i), "entry fails its check")
				}
				if visit != nil {
					visit(e)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// checkRecorded rejects a recorded length that no sequence of writes could
// have produced.
func (s *Store) checkRecorded(b, k int64) error {
	if k < 0 || k%EntrySize != 0 {
		return corrupt(s.name(b), 0, fmt.Sprintf("the checkpoint recorded %d bytes, not a whole number of %d-byte entries", k, EntrySize))
	}
	return nil
}

// sortedStarts returns the bucket starts of m in order, so that errors and
// file operations do not depend on map order.
func sortedStarts(m map[int64]int64) []int64 {
	out := make([]int64, 0, len(m))
	for b := range m {
		out = append(out, b)
	}
	slices.Sort(out)
	return out
}

// Reset removes every bucket file, including ones this Store does not know,
// and forgets every entry, buffered ones too: the engine calls it when
// Trim or Verify finds the cache damaged, and then re-adds every pending
// timer from a scan of the log. No sync job may be outstanding. The memory
// state is cleared first, so that after a failed removal a leftover file is
// one no checkpoint records: a later Add recreates it from empty, and the
// next recovery's Trim removes it.
func (s *Store) Reset() error {
	clear(s.buf)
	s.bufBytes = 0
	clear(s.sizes)
	s.low = math.MaxInt64
	s.snap = nil // the next snapshot is a full copy
	clear(s.dirty)
	clear(s.inflight)
	clear(s.removing)
	s.order = s.order[:0]
	names, err := s.fs.List(s.dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if !strings.HasSuffix(n, ".tb") {
			continue
		}
		if err := s.fs.Remove(path.Join(s.dir, n)); err != nil && !vfs.IsNotExist(err) {
			return err
		}
	}
	return s.fs.SyncDir(s.dir)
}

// Trim cuts every bucket file back to the length a checkpoint recorded and
// removes buckets it did not record, so that what recovery replays from the
// log is the only source of later entries. Without it, an entry written
// after the checkpoint could point at a record that a power loss took away
// under async flush, and whose position a new record reuses.
//
// A bucket keep records whose file is missing or shorter than recorded is
// damage, not a torn write (the checkpoint is written only after the files
// are synced): Trim then fails with ErrCorrupt before it changes anything.
// keep must therefore list only the buckets recovery needs; one the engine
// may have removed after the checkpoint (Remove of buckets wholly before
// its frontier) must be left out of it. Trim checks lengths only; Verify
// checks the entries.
func (s *Store) Trim(keep map[int64]int64) error {
	starts := sortedStarts(keep)
	for _, b := range starts {
		k := keep[b]
		if err := s.checkRecorded(b, k); err != nil {
			return err
		}
		if k == 0 {
			continue
		}
		size, ok := s.sizes[b]
		if !ok {
			return corrupt(s.name(b), 0, fmt.Sprintf("file is missing, the checkpoint recorded %d bytes", k))
		}
		if size < k {
			return corrupt(s.name(b), size, fmt.Sprintf("file ends here, the checkpoint recorded %d bytes", k))
		}
	}
	for b, size := range s.sizes {
		k := keep[b]
		if k >= size {
			continue
		}
		if k == 0 {
			if err := s.fs.Remove(s.name(b)); err != nil && !vfs.IsNotExist(err) {
				return err
			}
			delete(s.sizes, b)
			s.touch(b)
			continue
		}
		f, err := s.fs.Open(s.name(b))
		if err != nil {
			return err
		}
		err = f.Truncate(k)
		f.Close()
		if err != nil {
			return err
		}
		s.sizes[b] = k
		s.touch(b)
		// Not synced here (after a kill -9 that is thousands of files): the
		// next checkpoint's sync job makes the cut durable before it records
		// these sizes, and until then a recovery cuts again to the same
		// checkpoint.
		s.dirty[b] = true
	}
	return s.fs.SyncDir(s.dir)
}
