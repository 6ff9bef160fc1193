// Package timerstore keeps far-future timers on disk in time-bucket files,
// so that memory does not grow with the number of pending messages: only
// the buckets of the near window are loaded into the in-memory timing wheel.
//
// A bucket covers [start, start+width) in Unix milliseconds and is one file
// named by its start, "<start>.tb", holding fixed-size entries:
//
//	offset size field
//	0      8    due    i64 Unix ms
//	8      8    pos    u64 commit-log position of the message
//	16     4    topic  u32 topic id
//	20     2    queue  u16
//	22     1    kind   u8  what the timer is for (the engine's choice)
//	23     1    check  u8  xor of bytes 0..22, to drop a torn entry
//
// The layout is part of the on-disk format. The files are a cache derived
// from the commit log: the engine's checkpoint says up to which log position
// they are complete and synced, recovery re-adds what came after, and a
// bucket may therefore hold the same entry twice; Load removes duplicates.
package timerstore

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"io"
	"path"
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

func (e Entry) put(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], uint64(e.Due))
	binary.LittleEndian.PutUint64(b[8:], e.Pos)
	binary.LittleEndian.PutUint32(b[16:], e.Topic)
	binary.LittleEndian.PutUint16(b[20:], e.Queue)
	b[22] = e.Kind
	b[23] = checkByte(b[:23])
}

func checkByte(b []byte) byte {
	c := byte(0x5a)
	for _, x := range b {
		c ^= x
	}
	return c
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
	if width <= 0 {
		return nil, fmt.Errorf("timerstore: bucket width %d must be positive", width)
	}
	if err := fs.MkdirAll(dir); err != nil {
		return nil, err
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{fs: fs, dir: dir, width: width, buf: map[int64][]byte{}, sizes: map[int64]int64{}, dirty: map[int64]bool{}, inflight: map[int64][]pendingWrite{}}
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
	if _, ok := s.sizes[b]; !ok {
		s.sizes[b] = 0
		heap.Push(&s.order, b)
	}
	var tmp [EntrySize]byte
	e.put(tmp[:])
	s.buf[b] = append(s.buf[b], tmp[:]...)
	s.bufBytes += EntrySize
	if s.bufBytes >= FlushThreshold {
		return s.Flush()
	}
	return nil
}

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
// (due, pos) pairs, in due order. Torn trailing entries are ignored.
func (s *Store) Load(b int64) ([]Entry, error) {
	size, ok := s.sizes[b]
	if !ok {
		return nil, nil
	}
	data := make([]byte, size)
	if size > 0 {
		// The file may be shorter than size, or not exist yet, while a sync
		// job writes it: those bytes come from inflight below.
		f, err := s.fs.Open(s.name(b))
		if err != nil && !vfs.IsNotExist(err) {
			return nil, err
		}
		if err == nil {
			n, err := f.ReadAt(data, 0)
			f.Close()
			if err != nil && err != io.EOF && n < len(data) {
				return nil, err
			}
		}
	}
	for _, w := range s.inflight[b] {
		copy(data[w.off:], w.data)
	}
	data = append(data, s.buf[b]...)
	type key struct {
		due int64
		pos uint64
	}
	seen := make(map[key]bool, len(data)/EntrySize)
	out := make([]Entry, 0, len(data)/EntrySize)
	for off := 0; off+EntrySize <= len(data); off += EntrySize {
		r := data[off : off+EntrySize]
		if checkByte(r[:23]) != r[23] {
			continue
		}
		e := Entry{
			Due:   int64(binary.LittleEndian.Uint64(r[0:])),
			Pos:   binary.LittleEndian.Uint64(r[8:]),
			Topic: binary.LittleEndian.Uint32(r[16:]),
			Queue: binary.LittleEndian.Uint16(r[20:]),
			Kind:  r[22],
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

// Remove deletes every bucket that ends at or before t. The engine calls it
// only for buckets its latest durable checkpoint no longer needs.
func (s *Store) Remove(t int64) (int, error) {
	n := 0
	for b := range s.sizes {
		if b+s.width > t {
			continue
		}
		if _, ok := s.buf[b]; ok {
			s.bufBytes -= len(s.buf[b])
			delete(s.buf, b)
		}
		if s.sizes[b] > 0 || s.dirty[b] {
			if err := s.fs.Remove(s.name(b)); err != nil && !vfs.IsNotExist(err) {
				return n, err
			}
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
func (s *Store) Trim(keep map[int64]int64) error {
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
