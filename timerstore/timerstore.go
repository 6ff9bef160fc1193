// Package timerstore keeps far-future timers on disk in time-bucket files,
// so that memory does not grow with the number of pending messages: only
// the buckets of the near window are loaded into the in-memory timing wheel.
//
// A bucket covers [start, start+width) in Unix milliseconds and is one file
// named by its start, "<start>.tb", holding fixed-size entries (little
// endian):
//
//	offset size field
//	0      8    pos    u64 commit-log position of the message
//	8      4    topic  u32 topic id
//	12     2    queue  u16
//	14     1    kind   u8  what the timer is for (the engine's choice)
//	15     5    due    u40 due time minus the bucket's start, ms (< width)
//	20     4    check  u32 CRC-32C (Castagnoli) of bytes 0..19, with the
//	                       register started at checkSeed, not at zero
//
// The due time is stored relative to the file's bucket so that a 4-byte
// checksum fits in the 24 bytes an entry has always taken; the width is
// therefore at most MaxWidth. The seed makes an all-zero entry (a file
// extended but never written, as a power loss can leave) fail its check,
// and a relative due time of width or more is rejected too, which catches
// an entry read against the wrong bucket. The layout is part of the on-disk
// format; files written before it (1-byte XOR check, absolute due time) fail
// verification, and the engine rebuilds them from the log (Reset).
//
// The files are a cache derived from the commit log: the engine's checkpoint
// records the synced length of every bucket file, recovery cuts each file
// back to that length (Trim) and re-adds from the log what came after, and a
// bucket may therefore hold the same entry twice; Load removes duplicates.
//
// Trust: the bytes below a recorded length were synced before the
// checkpoint vouched for them, so an entry there that fails its check, or a
// file that is missing or shorter than recorded, is damage, never a torn
// write: Trim, Verify and Load report it as ErrCorrupt naming the file and
// offset, and the engine either rebuilds the timers from the log (Reset) or
// refuses to start. Only bytes beyond a recorded length may be torn, and
// Trim cuts them. I/O errors are returned as they are, never read as an
// empty bucket.
package timerstore

import (
	"container/heap"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/hourglass-mq/hourglass/vfs"
)

// "timr"

// Store is a set of bucket files in one directory. It is not safe for
// concurrent use: the engine calls it under its lock.
type Store struct {
	fs    vfs.FS
	dir   string
	width int64
	// buf holds entries not yet written, by bucket start; Flush writes them.
	buf      map[int64][]byte
	bufBytes int
	// ManualFlush stops Add from writing when the buffer passes
	// FlushThreshold: the owner then writes the buffer itself, through a
	// sync job outside its locks (Add is called under the engine's lock,
	// which must never wait for file I/O).
	ManualFlush bool
	// sizes is the written length of each non-empty bucket file.
	sizes map[int64]int64
	// dirty lists buckets written since the last Sync.
	dirty map[int64]bool
	// order is a min-heap of the bucket starts in sizes, for NextBucket.
	order bucketHeap
	// inflight holds entries a sync job writes outside the engine's lock;
	// sizes already counts them. Load reads them from here until the job
	// completes, and Flush leaves those buckets alone meanwhile, so only
	// the job writes (and creates) their files.
	inflight map[int64][]pendingWrite
	// removing holds the buckets the last Remove forgot, whose files the
	// next Remove deletes (see Remove). None of them is in sizes.
	removing map[int64]bool
	// low is at most the smallest bucket start in sizes (MaxInt64 when
	// none is), so that Remove, which runs under the engine's lock after
	// every checkpoint, scans sizes only when some bucket has ended.
	low int64
	// snap is the last SizesSnapshot and changed the buckets whose sizes
	// entry changed since (sizes.go).
	snap         *SizesSnap
	changed      []int64
	changedLimit int // see touch
}

// pendingWrite is data to be written at off in a bucket file.
type pendingWrite struct {
	off  int64
	data []byte
}

// FlushThreshold is how many buffered bytes make Add write them out. It is
// large because far-future timers spread over thousands of bucket files: a
// small buffer would cost an open, a write and a close per entry.
const FlushThreshold = 8 << 20

// Open opens (creating if needed) the bucket directory. width is the bucket
// width in milliseconds; it must stay the same for a directory's lifetime.
func Open(fs vfs.FS, dir string, width int64) (*Store, error) {
	if width <= 0 || width > MaxWidth {
		return nil, fmt.Errorf("timerstore: bucket width %d ms is not in [1, %d]", width, int64(MaxWidth))
	}
	if err := fs.MkdirAll(dir); err != nil {
		return nil, err
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{fs: fs, dir: dir, width: width, buf: map[int64][]byte{}, sizes: map[int64]int64{}, dirty: map[int64]bool{}, inflight: map[int64][]pendingWrite{}, removing: map[int64]bool{}, low: math.MaxInt64}
	for _, n := range names {
		if !strings.HasSuffix(n, ".tb") {
			continue
		}
		start, err := strconv.ParseInt(strings.TrimSuffix(n, ".tb"), 10, 64)
		if err != nil || start%width != 0 {
			return nil, fmt.Errorf("timerstore: unexpected file %q in %s (bucket width %d ms)", n, dir, width)
		}
		f, err := fs.Open(path.Join(dir, n))
		if err != nil {
			return nil, err
		}
		size, err := f.Size()
		f.Close()
		if err != nil {
			return nil, err
		}
		s.sizes[start] = size - size%EntrySize
		s.low = min(s.low, start)
		heap.Push(&s.order, start)
	}
	return s, nil
}

// Width returns the bucket width in milliseconds.
func (s *Store) Width() int64 { return s.width }

// BucketOf returns the start of the bucket holding time t.
func (s *Store) BucketOf(t int64) int64 {
	b := t - t%s.width
	if t < 0 && t%s.width != 0 {
		b -= s.width
	}
	return b
}

// Add buffers an entry for its bucket. It is on disk after Flush and
// durable after Sync.
func (s *Store) Add(e Entry) error {
	b := s.BucketOf(e.Due)
	delete(s.removing, b)
	if _, ok := s.sizes[b]; !ok {
		s.sizes[b] = 0
		s.low = min(s.low, b)
		heap.Push(&s.order, b)
	}
	buf := s.buf[b]
	if len(buf) == cap(buf) {
		buf = grow(buf)
	}
	buf = buf[:len(buf)+EntrySize]
	e.put(buf[len(buf)-EntrySize:], b)
	s.buf[b] = buf
	s.bufBytes += EntrySize
	if s.bufBytes >= FlushThreshold && !s.ManualFlush {
		return s.Flush()
	}
	return nil
}

// grow returns buf with room for more entries: a quarter more, at least
// two. Not append's doubling: far-future timers spread over tens of
// thousands of buckets, a few entries each between two checkpoints, and
// doubling leaves a bucket's buffer half empty as often as not; the
// buffers are most of the store's memory.
func grow(buf []byte) []byte {
	n := len(buf) / EntrySize
	c := make([]byte, len(buf), (n+max(2, n/4))*EntrySize)
	copy(c, buf)
	return c
}

// Buffered returns the bytes of entries Add buffered and no Flush or sync
// job has taken yet.
func (s *Store) Buffered() int { return s.bufBytes }

func (s *Store) name(b int64) string { return bucketPath(s.dir, b) }

// bucketPath is the file of the bucket starting at b in dir.
func bucketPath(dir string, b int64) string {
	return path.Join(dir, strconv.FormatInt(b, 10)+".tb")
}

// Flush writes every buffered entry to its file, except for buckets a sync
// job is writing: those stay buffered until the next one.
func (s *Store) Flush() error {
	for b, data := range s.buf {
		if len(s.inflight[b]) > 0 {
			continue
		}
		if err := s.write(b, data); err != nil {
			return err
		}
		delete(s.buf, b)
		s.bufBytes -= len(data)
	}
	return nil
}

func (s *Store) write(b int64, data []byte) error {
	size := s.sizes[b]
	var f vfs.File
	var err error
	if size == 0 {
		f, err = s.fs.Create(s.name(b))
	} else {
		f, err = s.fs.Open(s.name(b))
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteAt(data, size); err != nil {
		return err
	}
	s.sizes[b] = size + int64(len(data))
	s.touch(b)
	s.dirty[b] = true
	return nil
}

// NextBucket returns the smallest non-empty bucket start >= from.
// Buckets below from are forgotten by the search order (not deleted).
func (s *Store) NextBucket(from int64) (int64, bool) {
	for s.order.Len() > 0 {
		b := s.order[0]
		if _, ok := s.sizes[b]; !ok || b+s.width <= from {
			heap.Pop(&s.order)
			continue
		}
		return b, true
	}
	return 0, false
}

// Remove forgets every bucket that ends at or before t and returns how
// many it forgot. The engine calls it only for buckets its latest durable
// checkpoint no longer needs, after each checkpoint.
//
// The files go in two steps: a bucket Remove forgets is no longer in Sizes,
// and its file is deleted by the next call of Remove, which comes after the
// next durable checkpoint, one that no longer records it. Deleting at once
// would leave the latest checkpoint recording a file that is gone, which
// Trim rightly refuses after a crash. An Add to a forgotten bucket before
// then keeps its file: the bucket starts again from empty.
func (s *Store) Remove(t int64) (int, error) {
	for b := range s.removing {
		if err := s.fs.Remove(s.name(b)); err != nil && !vfs.IsNotExist(err) {
			return 0, err
		}
		delete(s.removing, b)
	}
	if s.low == math.MaxInt64 || s.low+s.width > t {
		return 0, nil // no bucket has ended
	}
	n, low := 0, int64(math.MaxInt64)
	for b := range s.sizes {
		if b+s.width > t {
			low = min(low, b)
			continue
		}
		if _, ok := s.buf[b]; ok {
			s.bufBytes -= len(s.buf[b])
			delete(s.buf, b)
		}
		if s.sizes[b] > 0 || s.dirty[b] || len(s.inflight[b]) > 0 {
			s.removing[b] = true
		}
		delete(s.sizes, b)
		s.touch(b)
		delete(s.dirty, b)
		delete(s.inflight, b)
		n++
	}
	s.low = low
	return n, nil
}

// Buckets returns the number of non-empty buckets and their total bytes
// (written and buffered).
func (s *Store) Buckets() (n int, bytes int64) {
	for _, sz := range s.sizes {
		bytes += sz
	}
	return len(s.sizes), bytes + int64(s.bufBytes)
}

type bucketHeap []int64

func (h bucketHeap) Len() int           { return len(h) }
func (h bucketHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h bucketHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *bucketHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *bucketHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Sizes returns the written length of every bucket file, by bucket start.
// The engine records it in its checkpoint after Sync.
func (s *Store) Sizes() map[int64]int64 {
	out := make(map[int64]int64, len(s.sizes))
	for b, n := range s.sizes {
		if n > 0 {
			out[b] = n
		}
	}
	return out
}
