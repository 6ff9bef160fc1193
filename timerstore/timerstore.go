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
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hourglass-mq/hourglass/vfs"
)

// EntrySize is the size of one entry on disk.
const EntrySize = 24

// Entry is one timer.
type Entry struct {
	Due   int64
	Pos   uint64
	Topic uint32
	Queue uint16
	Kind  uint8
}

// MaxWidth is the largest bucket width in milliseconds (about 34 years):
// an entry stores its due time relative to its bucket in 40 bits.
const MaxWidth = 1 << 40

// ErrCorrupt means a bucket file disagrees with what was written and synced
// into it: an entry fails its check, or the file is missing or shorter than
// the checkpoint recorded. Errors wrap it with the file and offset.
var ErrCorrupt = errors.New("timerstore: corrupt timer bucket")

// checkSeed starts the CRC register, so that the check of twenty zero bytes
// is not zero and an all-zero entry fails (TestZeroEntryFails).
const checkSeed = 0x74696d72 // "timr"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func entryCheck(b []byte) uint32 { return crc32.Update(checkSeed, castagnoli, b[:20]) }

// put encodes e, which belongs to the bucket starting at start, into b.
func (e Entry) put(b []byte, start int64) {
	binary.LittleEndian.PutUint64(b[0:], e.Pos)
	binary.LittleEndian.PutUint32(b[8:], e.Topic)
	binary.LittleEndian.PutUint16(b[12:], e.Queue)
	b[14] = e.Kind
	rel := uint64(e.Due - start)
	binary.LittleEndian.PutUint32(b[15:], uint32(rel))
	b[19] = byte(rel >> 32)
	binary.LittleEndian.PutUint32(b[20:], entryCheck(b))
}

// decode reads the entry at b of the bucket [start, start+width), and
// reports whether it passes its check.
func decode(b []byte, start, width int64) (Entry, bool) {
	if binary.LittleEndian.Uint32(b[20:]) != entryCheck(b) {
		return Entry{}, false
	}
	rel := int64(binary.LittleEndian.Uint32(b[15:])) | int64(b[19])<<32
	if rel >= width {
		return Entry{}, false
	}
	return Entry{
		Due:   start + rel,
		Pos:   binary.LittleEndian.Uint64(b[0:]),
		Topic: binary.LittleEndian.Uint32(b[8:]),
		Queue: binary.LittleEndian.Uint16(b[12:]),
		Kind:  b[14],
	}, true
}

// corrupt returns an ErrCorrupt naming the file and offset.
func corrupt(name string, off int64, what string) error {
	return fmt.Errorf("%w: %s at offset %d: %s", ErrCorrupt, name, off, what)
}

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
	s := &Store{fs: fs, dir: dir, width: width, buf: map[int64][]byte{}, sizes: map[int64]int64{}, dirty: map[int64]bool{}, inflight: map[int64][]pendingWrite{}, removing: map[int64]bool{}}
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
		heap.Push(&s.order, b)
	}
	var tmp [EntrySize]byte
	e.put(tmp[:], b)
	s.buf[b] = append(s.buf[b], tmp[:]...)
	s.bufBytes += EntrySize
	if s.bufBytes >= FlushThreshold && !s.ManualFlush {
		return s.Flush()
	}
	return nil
}

// Buffered returns the bytes of entries Add buffered and no Flush or sync
// job has taken yet.
func (s *Store) Buffered() int { return s.bufBytes }

func (s *Store) name(b int64) string { return path.Join(s.dir, strconv.FormatInt(b, 10)+".tb") }

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
	s.dirty[b] = true
	return nil
}

// Sync writes and makes every bucket durable, including new directory
// entries.
func (s *Store) Sync() error {
	j := s.PrepareSync()
	err := j.Run(1)
	s.Complete(j, err)
	return err
}

// PrepareSync hands every buffered entry to a job that writes it and then
// makes the buckets written since the last job durable. The job touches only
// files, so the engine runs it without holding its lock: with one-minute
// buckets a checkpoint may have thousands of files to write and sync. The
// caller must call Complete with the job's result, under its lock, before
// the next PrepareSync.
func (s *Store) PrepareSync() *SyncJob {
	for b, data := range s.buf {
		s.inflight[b] = append(s.inflight[b], pendingWrite{off: s.sizes[b], data: data})
		s.sizes[b] += int64(len(data))
		s.dirty[b] = true
		delete(s.buf, b)
		s.bufBytes -= len(data)
	}
	j := &SyncJob{fs: s.fs, dir: s.dir, writes: map[string][]pendingWrite{}, counts: map[int64]int{}}
	for b, ws := range s.inflight {
		j.writes[s.name(b)] = append([]pendingWrite(nil), ws...)
		j.counts[b] = len(ws)
	}
	for b := range s.dirty {
		j.buckets = append(j.buckets, b)
		j.names = append(j.names, s.name(b))
	}
	clear(s.dirty)
	return j
}

// Complete ends a job: on success its writes leave inflight; on failure its
// buckets are marked dirty again and its writes stay for the next job.
func (s *Store) Complete(j *SyncJob, err error) {
	if err != nil {
		for _, b := range j.buckets {
			if _, ok := s.sizes[b]; ok {
				s.dirty[b] = true
			}
		}
		return
	}
	for b, n := range j.counts {
		if n > len(s.inflight[b]) { // removed meanwhile
			n = len(s.inflight[b])
		}
		rest := s.inflight[b][n:]
		if len(rest) == 0 {
			delete(s.inflight, b)
		} else {
			s.inflight[b] = rest
		}
	}
}

// SyncJob writes entries and syncs bucket files; see PrepareSync.
type SyncJob struct {
	fs      vfs.FS
	dir     string
	writes  map[string][]pendingWrite
	counts  map[int64]int
	buckets []int64
	names   []string
}

// Len returns the number of files the job syncs.
func (j *SyncJob) Len() int { return len(j.names) }

// Run writes the job's entries, then fsyncs its files with the given
// number of concurrent workers, then the directory.
func (j *SyncJob) Run(workers int) error {
	for name, ws := range j.writes {
		if err := writeAll(j.fs, name, ws); err != nil {
			return err
		}
	}
	if len(j.names) == 0 {
		return nil
	}
	workers = max(1, min(workers, len(j.names)))
	next := make(chan string)
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			var first error
			for name := range next {
				if first != nil {
					continue
				}
				f, err := j.fs.Open(name)
				if err != nil {
					first = err
					continue
				}
				if err := f.Sync(); err != nil {
					first = err
				}
				f.Close()
			}
			errc <- first
		}()
	}
	for _, n := range j.names {
		next <- n
	}
	close(next)
	var err error
	for w := 0; w < workers; w++ {
		if e := <-errc; e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		return err
	}
	return j.fs.SyncDir(j.dir)
}

// writeAll writes ws to the file name, creating it when the first write is
// at offset 0 (the file is new).
func writeAll(fs vfs.FS, name string, ws []pendingWrite) error {
	var f vfs.File
	var err error
	if ws[0].off == 0 {
		f, err = fs.Create(name)
	} else {
		f, err = fs.Open(name)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	for _, w := range ws {
		if _, err := f.WriteAt(w.data, w.off); err != nil {
			return err
		}
	}
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

// Load returns the entries of the bucket starting at b, without duplicate
// (due, pos) pairs, in due order. An entry that fails its check, or a file
// missing or shorter than what was written to it, is an ErrCorrupt: after
// Trim every byte of a file was either vouched for by the checkpoint or
// written by this process, so nothing in it may be torn.
func (s *Store) Load(b int64) ([]Entry, error) {
	return s.LoadPlan(b).Read()
}

// LoadPlan captures, cheaply and without I/O, what Read needs to return
// the entries of bucket b: its length, and the bytes that are still in
// memory (buffered, or in a sync job's hands). The owner takes the plan
// under its lock and calls Read without it, so that reading a bucket of a
// million entries does not stall its other work. Entries added after the
// plan was taken are not in it: the owner must schedule those itself.
func (s *Store) LoadPlan(b int64) *LoadPlan {
	p := &LoadPlan{fs: s.fs, name: s.name(b), bucket: b, width: s.width}
	size, ok := s.sizes[b]
	if !ok {
		return p
	}
	p.size = size
	// From lo on, the bytes may still be in a sync job's hands: the file
	// may be shorter there, or not exist yet when lo is 0. The job's writes
	// are contiguous up to size, so inflight supplies all of them.
	p.lo = size
	for _, w := range s.inflight[b] {
		p.lo = min(p.lo, w.off)
	}
	p.inflight = append(p.inflight, s.inflight[b]...)
	p.buf = append([]byte(nil), s.buf[b]...)
	return p
}

// LoadPlan is what LoadPlan captured; Read may run without the owner's
// lock: it reads only bytes of the file below lo, which no one rewrites
// while the bucket is not removed, and the in-memory bytes it copied.
type LoadPlan struct {
	fs       vfs.FS
	name     string
	bucket   int64
	width    int64
	size, lo int64
	inflight []pendingWrite
	buf      []byte
}

// Read returns the plan's entries without duplicates, in due order. A bad
// entry, or a file missing or shorter than recorded, is ErrCorrupt.
func (p *LoadPlan) Read() ([]Entry, error) {
	if p.size == 0 && len(p.buf) == 0 {
		return nil, nil
	}
	data := make([]byte, p.size)
	if p.lo > 0 {
		if err := readFile(p.fs, p.name, p.lo, data[:p.lo], func(int64, []byte) error { return nil }); err != nil {
			return nil, err
		}
	}
	for _, w := range p.inflight {
		copy(data[w.off:], w.data)
	}
	data = append(data, p.buf...)
	type key struct {
		due int64
		pos uint64
	}
	seen := make(map[key]bool, len(data)/EntrySize)
	out := make([]Entry, 0, len(data)/EntrySize)
	for off := 0; off+EntrySize <= len(data); off += EntrySize {
		e, ok := decode(data[off:off+EntrySize], p.bucket, p.width)
		if !ok {
			return nil, corrupt(p.name, int64(off), "entry fails its check")
		}
		k := key{e.Due, e.Pos}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Due < out[j].Due })
	return out, nil
}

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
func (s *Store) Verify(keep map[int64]int64) error {
	buf := make([]byte, verifyChunk)
	for _, b := range sortedStarts(keep) {
		name, k := s.name(b), keep[b]
		if err := s.checkRecorded(b, k); err != nil {
			return err
		}
		err := readFile(s.fs, name, k, buf, func(off int64, p []byte) error {
			for i := 0; i < len(p); i += EntrySize {
				if _, ok := decode(p[i:i+EntrySize], b, s.width); !ok {
					return corrupt(name, off+int64(i), "entry fails its check")
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
	n := 0
	for b := range s.sizes {
		if b+s.width > t {
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
		delete(s.dirty, b)
		delete(s.inflight, b)
		n++
	}
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
		// Not synced here (after a kill -9 that is thousands of files): the
		// next checkpoint's sync job makes the cut durable before it records
		// these sizes, and until then a recovery cuts again to the same
		// checkpoint.
		s.dirty[b] = true
	}
	return s.fs.SyncDir(s.dir)
}
