package commitlog

import (
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/vfs"
)

// Pos is the global byte offset of a record's first byte. Positions count
// record frames only (segment headers excluded), so the positions of all
// segments form one contiguous range: a segment's End is the next one's
// Base. Positions of acknowledged records are never reused (see the package
// doc for the exceptions under FlushAsync: a power loss, or a failed fsync,
// may drop acknowledged records written since the last sync).
type Pos uint64

// Type is the caller's record type. Zero is reserved: Append rejects it and
// recovery treats it as damage, so that zero-filled space never reads as a
// record.
type Type uint8

// Record is one entry of the log.
type Record struct {
	Type    Type
	Payload []byte
}

// FlushPolicy says when Append returns relative to fdatasync.
type FlushPolicy int

const (
	// FlushSync (the default) acknowledges an Append only after its records
	// are durable: written and fdatasync'ed.
	FlushSync FlushPolicy = iota
	// FlushAsync acknowledges an Append once its records are written to the
	// file (the page cache); a background fdatasync runs every
	// FlushInterval. A power loss can lose acknowledged records of up to one
	// interval (plus the time that sync takes). A process crash alone loses
	// nothing that was acknowledged.
	FlushAsync
)

// String returns "sync" or "async".
func (p FlushPolicy) String() string {
	switch p {
	case FlushSync:
		return "sync"
	case FlushAsync:
		return "async"
	}
	return fmt.Sprintf("FlushPolicy(%d)", int(p))
}

// Default option values.
const (
	DefaultSegmentBytes   = 64 << 20
	DefaultFlushInterval  = 10 * time.Millisecond
	DefaultMaxRecordBytes = 16 << 20
)

// Options configure Open.
type Options struct {
	// FS is the filesystem all files go through. Required.
	FS vfs.FS
	// Dir is the directory of the segment files; it is created if needed.
	// Files in it that are not named like segments are left alone.
	// Required.
	Dir string
	// SegmentBytes is the size, in record bytes, beyond which a new segment
	// is started: an Append whose records would make a non-empty segment
	// exceed it goes to a new segment. An Append larger than SegmentBytes
	// gets a segment of its own. Zero means DefaultSegmentBytes (64 MiB).
	SegmentBytes int64
	// Flush is the acknowledgement policy; the zero value is FlushSync.
	Flush FlushPolicy
	// FlushInterval is the background sync period under FlushAsync; it is
	// ignored under FlushSync. Zero means DefaultFlushInterval (10 ms).
	FlushInterval time.Duration
	// MaxRecordBytes is the largest payload Append accepts, in bytes; a
	// larger one fails with ErrRecordTooLarge. Zero means
	// DefaultMaxRecordBytes (16 MiB); it may not exceed MaxPayloadLimit.
	// Recovery does not use it, so lowering it never cuts old records.
	MaxRecordBytes int
	// OnSync, if not nil, is called after each fdatasync of record data
	// with its duration and the number of records and bytes it made
	// durable. It runs on the writer goroutine, so a slow hook delays every
	// Append; it must not call into the Log.
	OnSync func(d time.Duration, records, bytes int)
	// NoPreallocate turns off preallocation. By default (false) a
	// goroutine writes the next segment in full with zeros and syncs it
	// before the writer needs it (prealloc.go), so that appends overwrite
	// bytes the file already holds and an fdatasync has no file size to
	// commit. It costs disk space: the active segment's file is
	// SegmentBytes long from its start, and one spare file (SpareName) of
	// SegmentBytes waits beside it.
	NoPreallocate bool
	// OnPreallocate, if not nil, is called after each attempt to
	// preallocate a spare segment, or to make a spare the next segment,
	// with its duration and nil or the error (wrapping ErrDiskFull for
	// ENOSPC). A failure fails no Append: the log creates its next
	// segment as without preallocation. It is called from the
	// preallocating goroutine or from the writer's, so it must be safe
	// for concurrent use, quick, and not call into the Log.
	OnPreallocate func(d time.Duration, err error)
}

// Segment describes one segment file.
type Segment struct {
	// Base is the position of the segment's first record.
	Base Pos
	// End is the position after its last record that is visible to
	// readers (the active segment's End is Head).
	End Pos
	// Name is the file name inside Options.Dir.
	Name string
}

// RecoveryInfo reports what Open found and repaired.
type RecoveryInfo struct {
	// Segments is the number of segment files kept.
	Segments int
	// Created is true when no segment existed and a first one was made.
	Created bool
	// RecordsScanned and BytesScanned count the valid records of the
	// scanned tail segment.
	RecordsScanned int
	BytesScanned   int64
	// TruncatedAt is where the valid records of the tail end, which is
	// Head after Open; TruncatedBytes is how many bytes of torn or corrupt
	// tail beyond it were cut (zero for a clean tail).
	TruncatedBytes int64
	TruncatedAt    Pos
	// Reason says why the tail was cut, or is empty if it was clean.
	Reason string
	// PreallocatedBytes counts the zeros after the valid records of the
	// tail segment: space preallocated for records (prealloc.go), kept.
	// Zeros are never a record, so they are neither damage nor cut.
	PreallocatedBytes int64
	// RemovedSegments are trailing segment files that were removed because
	// their creation never completed (no valid header, and nothing but
	// zeros after it).
	RemovedSegments []string
	// RemovedSpare is true when a spare segment (SpareName) was found
	// and removed: a preallocated file that never held a record.
	RemovedSpare bool
	// Duration is how long recovery took.
	Duration time.Duration
	// tailSum is the running sum of the last segment's valid records,
	// where the writer's sum goes on from (sum.go).
	tailSum uint32
}

// Errors returned by the log. Errors carrying a cause wrap both the sentinel
// and the cause, so errors.Is works with either.
var (
	// ErrClosed is returned by every call after Close.
	ErrClosed = errors.New("commitlog: log is closed")
	// ErrRecordTooLarge is returned by Append for a payload beyond
	// Options.MaxRecordBytes; nothing of that call is written.
	ErrRecordTooLarge = errors.New("commitlog: record too large")
	// ErrInvalidRecord is returned by Append for a record of Type 0.
	ErrInvalidRecord = errors.New("commitlog: invalid record type (0 and the skip type are reserved)")
	// ErrCorrupt means bytes on disk failed validation: a bad checksum,
	// length or header in a place recovery does not repair, or a position
	// that is not a record boundary.
	ErrCorrupt = errors.New("commitlog: corrupt data")
	// ErrOutOfRange is returned for a position below Start or at or beyond
	// Head.
	ErrOutOfRange = errors.New("commitlog: position out of range")
	// ErrDiskFull accompanies syscall.ENOSPC from a write or create: the
	// failed Append wrote nothing (its bytes were truncated away), and
	// later Appends are served again once space is freed. ENOSPC from an
	// fdatasync is a failed sync: the error then wraps ErrFsyncFailed too,
	// and the log has stopped.
	ErrDiskFull = errors.New("commitlog: disk full")
	// ErrFailed is wrapped by every error of a log that has stopped
	// accepting writes (fail-stop): every later Append and Sync returns the
	// same error, and only reopening the log (recovery) gets it going
	// again. Callers must treat it as fatal for the whole process state
	// derived from the log, not retry the call.
	ErrFailed = errors.New("commitlog: the log failed and accepts no more writes; it must be reopened")
	// ErrFsyncFailed is wrapped, with ErrFailed and the cause, when the log
	// stopped because an fdatasync of a segment or an fsync of its
	// directory failed. After such a failure the kernel may have marked the
	// unwritten pages clean, so a retried fsync would succeed without
	// writing them: nothing past the last successful sync may be trusted.
	ErrFsyncFailed = errors.New("commitlog: fsync failed; data not yet synced may be lost, and recovery re-reads what is durable")
)

// Log is an append-only log of records in segment files. It is safe for
// concurrent use. One writer goroutine, started by Open and stopped by
// Close, owns all writes.
//
// Lock order: deleteMu before mu. The queue's mutex is never held together
// with either.
type Log struct {
	opts      Options
	recovery  RecoveryInfo
	q         queue
	wake      chan struct{} // capacity 1: "the queue is not empty"
	closeOnce sync.Once
	done      chan struct{} // closed when the writer goroutine exits
	closeErr  error         // set by the writer before done is closed
	w         writer        // owned by the writer goroutine
	pre       *preallocator // nil under NoPreallocate

	// deleteMu serializes DeleteBefore so that files are removed oldest
	// first, which keeps the retained segments contiguous on disk.
	deleteMu sync.Mutex

	// mu guards the segment list and the published head. Readers hold it
	// only to find a segment and take a reference, never during I/O.
	mu struct {
		sync.Mutex
		// segs is ordered by base; the last is the active one. Invariant:
		// segs[i].end() == segs[i+1].base.
		segs []*segment
		// head is the position after the last acknowledged record.
		head   Pos
		closed bool
		// durable is the position up to which every record is known
		// durable (under FlushSync: covered by a successful fdatasync);
		// durableCh is closed and replaced each time it advances, and
		// when the log fails, to wake WaitDurable.
		durable   Pos
		durableCh chan struct{}
	}
}

// segment is one open segment file.
type segment struct {
	base Pos
	name string
	f    vfs.File
	// size is the number of record bytes visible to readers; guarded by
	// Log.mu. The file may be longer while the writer works past it.
	size int64
	// refs counts readers using f; guarded by Log.mu. A removed segment's
	// file is closed when refs drops to zero.
	refs    int
	removed bool
}

func (s *segment) end() Pos { return s.base + Pos(s.size) }

// Open opens the log in opts.Dir, creating it if needed, and recovers it:
// trailing segment files whose creation never completed are removed, and
// the tail segment is checked record by record; the first torn or corrupt
// record and everything after it are cut and the cut made durable before
// Open returns. See the package doc for what is not repaired.
func Open(opts Options) (*Log, error) {
	if opts.FS == nil || opts.Dir == "" {
		return nil, errors.New("commitlog: Options.FS and Options.Dir are required")
	}
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = DefaultSegmentBytes
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	if opts.MaxRecordBytes <= 0 {
		opts.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if opts.MaxRecordBytes > MaxPayloadLimit {
		return nil, fmt.Errorf("commitlog: MaxRecordBytes %d exceeds the format limit %d", opts.MaxRecordBytes, MaxPayloadLimit)
	}
	if opts.Flush != FlushSync && opts.Flush != FlushAsync {
		return nil, fmt.Errorf("commitlog: unknown flush policy %d", opts.Flush)
	}
	l := &Log{
		opts: opts,
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
	segs, info, err := recoverDir(opts.FS, opts.Dir)
	if err != nil {
		return nil, err
	}
	active := segs[len(segs)-1]
	room, err := roomOf(active)
	if err == nil {
		err = removeSpare(opts.FS, opts.Dir, &info)
	}
	if err != nil {
		for _, s := range segs {
			_ = s.f.Close()
		}
		return nil, err
	}
	l.recovery = info
	l.mu.segs = segs
	l.mu.head = active.end()
	l.mu.durable, l.mu.durableCh = l.mu.head, make(chan struct{})
	l.w = writer{log: l, active: active, written: active.size, synced: active.size, room: room, sum: info.tailSum}
	if !opts.NoPreallocate {
		l.pre = newPreallocator(opts)
		l.pre.request()
		l.w.awaitSpare = room == 0
	}
	go l.run()
	return l, nil
}

// readAhead is how much Read fetches in its first read: most records fit,
// so one ReadAt serves them.
const readAhead = 4 << 10

func (l *Log) path(name string) string { return path.Join(l.opts.Dir, name) }

// Head returns the position after the last acknowledged record, which is
// exactly where the next record will go: a segment roll does not skip
// positions.
func (l *Log) Head() Pos {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.head
}

// Start returns the first retained position, the base of the oldest
// segment. Start == Head means the log holds no records.
func (l *Log) Start() Pos {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.segs[0].base
}

// Segments returns the segments, oldest first.
func (l *Log) Segments() []Segment {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Segment, len(l.mu.segs))
	for i, s := range l.mu.segs {
		out[i] = Segment{Base: s.base, End: s.end(), Name: s.name}
	}
	return out
}

// Recovery returns what Open found and repaired.
func (l *Log) Recovery() RecoveryInfo {
	info := l.recovery
	info.RemovedSegments = append([]string(nil), info.RemovedSegments...)
	return info
}

// acquire finds the segment holding pos below limit and takes a reference
// to it; the caller must release it. It returns the segment's visible end.
func (l *Log) acquire(pos Pos) (*segment, Pos, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return nil, 0, ErrClosed
	}
	segs := l.mu.segs
	if pos < segs[0].base || pos >= l.mu.head {
		return nil, 0, fmt.Errorf("%w: %d not in [%d, %d)", ErrOutOfRange, pos, segs[0].base, l.mu.head)
	}
	// Binary search for the last segment with base <= pos. Empty segments
	// share their base with the next one; the search picks the later, which
	// is the one that holds pos.
	lo, hi := 0, len(segs)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if segs[mid].base <= pos {
			lo = mid
		} else {
			hi = mid
		}
	}
	s := segs[lo]
	s.refs++
	return s, s.end(), nil
}

// release drops a reference taken by acquire.
func (l *Log) release(s *segment) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s.refs--
	if s.refs == 0 && (s.removed || l.mu.closed) {
		_ = s.f.Close() // the last reader of a retired file; nothing to lose
	}
}

// Read returns the record at pos, which must be a record boundary, and the
// position of the next record (Head if it was the last). The payload is a
// fresh copy. A pos outside [Start, Head) gives ErrOutOfRange; a pos that
// is not a boundary, or a damaged record, gives an error wrapping
// ErrCorrupt.
func (l *Log) Read(pos Pos) (Record, Pos, error) {
	s, end, err := l.acquire(pos)
	if err != nil {
		return Record{}, 0, err
	}
	defer l.release(s)
	it := frameIter{f: s.f, base: s.base, pos: pos, limit: end, ahead: readAhead}
	rec, _, err := it.next()
	if err != nil {
		return Record{}, 0, fmt.Errorf("commitlog: read %s at %d: %w", s.name, pos, err)
	}
	return rec, it.pos, nil
}

// Scan calls fn for every record from from (a record boundary, or Start)
// up to the Head at the time of the call, in order. Each rec.Payload is a
// fresh copy that fn may keep. An error from fn stops the scan and is
// returned as is. fn may call other methods of the Log, Append included;
// records appended meanwhile are not visited.
func (l *Log) Scan(from Pos, fn func(pos Pos, rec Record) error) error {
	l.mu.Lock()
	head, start, closed := l.mu.head, l.mu.segs[0].base, l.mu.closed
	l.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case from < start || from > head:
		return fmt.Errorf("%w: scan from %d, log holds [%d, %d)", ErrOutOfRange, from, start, head)
	}
	for pos := from; pos < head; {
		s, end, err := l.acquire(pos)
		if err != nil {
			return err
		}
		it := frameIter{f: s.f, base: s.base, pos: pos, limit: min(end, head)}
		err = it.each(fn)
		l.release(s)
		if err != nil {
			return err
		}
		pos = it.pos
	}
	return nil
}

func (l *Log) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.closed
}

// DeleteBefore removes whole segments whose End <= pos, oldest first, never
// the active one, and returns how many it removed. Positions below the new
// Start then read as ErrOutOfRange; reads already under way finish.
func (l *Log) DeleteBefore(pos Pos) (int, error) {
	l.deleteMu.Lock()
	defer l.deleteMu.Unlock()
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return 0, ErrClosed
	}
	var victims []*segment
	for _, s := range l.mu.segs[:len(l.mu.segs)-1] {
		if s.end() > pos {
			break
		}
		victims = append(victims, s)
	}
	l.mu.Unlock()

	removed := 0
	var err error
	for _, s := range victims {
		// Unlink first, then forget: if the unlink fails the segment stays
		// listed and readable, matching what the next Open would find.
		if err = l.opts.FS.Remove(l.path(s.name)); err != nil && !vfs.IsNotExist(err) {
			err = fmt.Errorf("commitlog: remove %s: %w", s.name, err)
			break
		}
		// Its sum file goes with it, best effort: one left behind names
		// its base, so it never vouches for another segment.
		_ = l.opts.FS.Remove(l.path(SumFileName(s.name)))
		err = nil
		l.mu.Lock()
		l.mu.segs = l.mu.segs[1:]
		s.removed = true
		if s.refs == 0 {
			_ = s.f.Close()
		}
		l.mu.Unlock()
		removed++
	}
	if removed > 0 {
		// The removals need not be durable for correctness (a segment that
		// comes back after a crash is only retained longer), but a failed
		// directory fsync says the filesystem can no longer be trusted to
		// persist the log's directory (the next roll's entry included), so
		// the log stops as for any failed fsync.
		if serr := l.opts.FS.SyncDir(l.opts.Dir); serr != nil {
			ferr := l.fail(fmt.Errorf("%w: sync dir after delete: %w", ErrFsyncFailed, serr))
			if err == nil {
				err = ferr
			}
		}
	}
	return removed, err
}
