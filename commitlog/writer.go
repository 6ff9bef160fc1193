package commitlog

import (
	"errors"
	"fmt"
	"hash/crc32"
	"runtime"
	"slices"
	"sync"
	"time"
)

// request is one Append (or Sync) call waiting for the writer. Its frames
// are bytes [start, end) of the queue buffer it was added to.
type request struct {
	start, end int
	records    int
	sync       bool // a Sync call: make everything written durable
	// unsynced asks for the answer once the records are written, before
	// the batch's fdatasync (AppendUnsynced). The writer touches such a
	// request no more once it has answered it: its caller may already
	// have put it back in the pool.
	unsynced bool
	// Set by the writer before it signals done; read by the caller after.
	base Pos
	err  error
	done chan struct{} // capacity 1, reused across pool cycles
}

var requestPool = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

// queue holds the requests that arrived since the writer last looked: their
// frames, already encoded and checksummed by the callers, are concatenated
// in buf in arrival order, so a batch is written with one WriteAt.
type queue struct {
	mu     sync.Mutex
	buf    []byte
	reqs   []*request
	closed bool
	// failed is the sticky error: once set, every later Append and Sync
	// fails with it. It wraps ErrFailed. It is set when the log cannot
	// vouch for its files any more: a failed fsync (ErrFsyncFailed), or a
	// failed write it could not undo.
	failed error
}

// maxSpareBuf bounds the batch buffer kept for reuse, so that one huge
// Append does not pin its memory for the life of the log.
const maxSpareBuf = 8 << 20

// writer is the state of the writer goroutine; nothing else touches it
// (Open fills it in before starting the goroutine).
//
// Invariants: synced <= written; bytes [0, written) of active's records are
// in the file and their Appends are answered or being answered; under
// FlushSync, written == synced between batches.
type writer struct {
	log     *Log
	active  *segment
	written int64 // record bytes in the active file
	synced  int64 // record bytes of the active file known durable
	// room is how many record bytes the active file holds, written ones
	// and the preallocated zeros after them (room >= written): a write
	// past it grows the file.
	room int64
	// awaitSpare is set by Open when the active segment is empty and not
	// preallocated: the first write waits for a spare (adoptSpare).
	awaitSpare bool
	// Records and bytes written since the last data sync, for OnSync.
	pendingRecords int
	pendingBytes   int
	// sum is the CRC32C of the active segment's record bytes [0,
	// written), written to its sum file when it is sealed (sum.go).
	sum uint32

	spareBuf  []byte
	spareReqs []*request
	data      []*request // scratch: the data requests of a batch
	syncs     []*request // scratch: the Sync requests of a batch
	rest      []*request // scratch: a chunk's requests answered after its fdatasync
}

// errCleanup marks an error whose cleanup failed too, leaving files the log
// cannot vouch for; the writer makes such errors sticky.
var errCleanup = errors.New("commitlog: cleanup after the failure failed")

// enqueue adds a request for recs (nil for a Sync) and waits for the
// writer's answer. The caller returns req to the pool.
func (l *Log) enqueue(req *request, recs []Record, crcs []uint32, total int) error {
	l.q.mu.Lock()
	if l.q.closed {
		l.q.mu.Unlock()
		return ErrClosed
	}
	if l.q.failed != nil {
		err := l.q.failed
		l.q.mu.Unlock()
		return err
	}
	req.start = len(l.q.buf)
	l.q.buf = slices.Grow(l.q.buf, total)
	for i, r := range recs {
		l.q.buf = appendFrame(l.q.buf, r, crcs[i])
	}
	req.end = len(l.q.buf)
	l.q.reqs = append(l.q.reqs, req)
	l.q.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
	<-req.done
	return req.err
}

// Append writes recs contiguously and in order, in one group commit with
// whatever other Appends are queued, and returns their positions. Under
// FlushSync it returns once they are durable, under FlushAsync once they
// are written. On error none of recs is acknowledged: a failed write is
// truncated away, so no later record follows a hole. An error wrapping
// ErrFailed (ErrFsyncFailed for a failed fdatasync) means the log has
// stopped; the failed records were cut away too, unless the cut itself
// failed, and then a reopened log may or may not hold them. The payloads
// are copied before Append returns and may be reused. Append of no records
// returns nil, nil.
func (l *Log) Append(recs ...Record) ([]Pos, error) { return l.append(recs, false) }

// AppendUnsynced is Append, but under FlushSync it returns once the records
// are written, before the fdatasync that follows at once in the same group
// commit; under FlushAsync it is Append. It is for records that the log's
// owner can lose in a crash without losing anything it acknowledged: the
// engine's fire records (a fire lost is fired again at recovery, since its
// messages are still pending in the log). Everything else about the
// records is Append's: their order among all appends, their checksums,
// and that a failed fdatasync stops the log (the records may then be gone
// at the next open, as a failed fsync drops the pages it covered).
func (l *Log) AppendUnsynced(recs ...Record) ([]Pos, error) { return l.append(recs, true) }

func (l *Log) append(recs []Record, unsynced bool) ([]Pos, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	var crcArr [8]uint32
	crcs := crcArr[:0]
	total := 0
	for _, r := range recs {
		if r.Type == 0 || r.Type == TypeSkip {
			return nil, ErrInvalidRecord
		}
		if len(r.Payload) > l.opts.MaxRecordBytes {
			return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrRecordTooLarge, len(r.Payload), l.opts.MaxRecordBytes)
		}
		// Checksums are computed here, on the callers' goroutines, so that
		// the single writer only copies and writes.
		crcs = append(crcs, recordCRC(r.Type, r.Payload))
		total += frameSize(len(r.Payload))
	}
	req := requestPool.Get().(*request)
	req.records, req.sync, req.unsynced = len(recs), false, unsynced
	err := l.enqueue(req, recs, crcs, total)
	base := req.base
	requestPool.Put(req)
	if err != nil {
		return nil, err
	}
	pos := make([]Pos, len(recs))
	for i, r := range recs {
		pos[i] = base
		base += Pos(frameSize(len(r.Payload)))
	}
	return pos, nil
}

// Sync makes every record appended so far durable. Under FlushSync this is
// already so when Append returns; Sync then only reports the sticky error,
// if any. A failed fdatasync is sticky: see ErrFsyncFailed.
func (l *Log) Sync() error {
	req := requestPool.Get().(*request)
	req.records, req.sync, req.unsynced = 0, true, false
	err := l.enqueue(req, nil, nil, 0)
	requestPool.Put(req)
	return err
}

// Close stops the writer after it has served every queued Append, syncs
// what is unsynced, and closes the files. It reports a failed final sync
// and the sticky error, if any. Later calls return ErrClosed.
func (l *Log) Close() error {
	first := false
	l.closeOnce.Do(func() {
		first = true
		l.q.mu.Lock()
		l.q.closed = true
		l.q.mu.Unlock()
		select {
		case l.wake <- struct{}{}:
		default:
		}
		<-l.done
	})
	if !first {
		return ErrClosed
	}
	return l.closeErr
}

// run is the writer goroutine. Each round takes everything queued and
// commits it as one batch; Appends arriving meanwhile (during the write
// and the fdatasync) queue up for the next round, which is what makes one
// fdatasync serve many producers.
func (l *Log) run() {
	w := &l.w
	var tick <-chan time.Time
	if l.opts.Flush == FlushAsync {
		t := time.NewTicker(l.opts.FlushInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		l.q.mu.Lock()
		buf, reqs, closed := l.q.buf, l.q.reqs, l.q.closed
		l.q.buf, l.q.reqs = w.spareBuf[:0], w.spareReqs[:0]
		l.q.mu.Unlock()

		n := len(reqs)
		if n > 0 {
			w.commit(buf, reqs)
			// Let the appenders just answered run before the next round's
			// fdatasync. This goroutine spends most of its time in short
			// syscalls and keeps its P through each of them; the appenders
			// it wakes are queued on that P, and while the other P runs
			// something long (a checkpoint's sort or merge), nothing else
			// takes them: a runtime trace showed 126 appenders runnable
			// for up to 20 ms behind an fsync loop that never paused
			// (docs/benchmarks.md, issue 8 ninth pass). The cost: the
			// next round waits for the work of those it woke, which made
			// a 1 M herd's drain about a sixth slower; yielding only
			// while a checkpoint runs, or after a millisecond of rounds
			// back to back, did not keep the sends' tail under 10 ms.
			runtime.Gosched()
		}
		clear(reqs) // drop the pooled requests
		if cap(buf) > maxSpareBuf {
			buf = nil
		}
		w.spareBuf, w.spareReqs = buf, reqs
		if n > 0 {
			continue
		}
		if closed {
			l.finish()
			return
		}
		select {
		case <-l.wake:
		case <-tick:
			w.background()
		}
	}
}

// finish runs on the writer goroutine once the queue is closed and empty.
func (l *Log) finish() {
	w := &l.w
	var errs []error
	if w.written > w.synced {
		if err := w.fdatasync(); err != nil {
			// Reported through the sticky error below.
			w.syncFailed(fmt.Errorf("final sync of %s: %w", w.active.name, err))
		}
	}
	l.q.mu.Lock()
	if l.q.failed != nil {
		errs = append(errs, l.q.failed)
	}
	l.q.mu.Unlock()
	l.mu.Lock()
	l.mu.closed = true
	for _, s := range l.mu.segs {
		if s.refs == 0 {
			if err := s.f.Close(); err != nil {
				errs = append(errs, fmt.Errorf("commitlog: close %s: %w", s.name, err))
			}
		}
	}
	l.mu.Unlock()
	l.pre.stop()
	l.closeErr = errors.Join(errs...)
	close(l.done)
}

// answer wakes the callers of reqs with err.
func answer(reqs []*request, err error) {
	for _, r := range reqs {
		r.err = err
		r.done <- struct{}{}
	}
}

// commit writes one batch: the data requests in chunks, one chunk per
// segment they land in (a roll between chunks), then serves Sync requests.
func (w *writer) commit(buf []byte, reqs []*request) {
	if err := w.stickyErr(); err != nil {
		answer(reqs, err)
		return
	}
	w.data, w.syncs = w.data[:0], w.syncs[:0]
	for _, r := range reqs {
		if r.sync {
			w.syncs = append(w.syncs, r)
		} else {
			w.data = append(w.data, r)
		}
	}
	if w.awaitSpare && len(w.data) > 0 {
		if err := w.adoptSpare(); err != nil {
			answer(reqs, err)
			return
		}
	}
	limit := w.log.opts.SegmentBytes
	data := w.data
	for i := 0; i < len(data); {
		if n := int64(data[i].end - data[i].start); w.written > 0 && w.written+n > limit {
			if err := w.roll(); err != nil {
				answer(data[i:], err)
				break
			}
		}
		// The chunk: as many requests as fit, and always at least one.
		j, size := i, w.written
		for j < len(data) {
			n := int64(data[j].end - data[j].start)
			if j > i && size+n > limit {
				break
			}
			data[j].base = w.active.base + Pos(size)
			size += n
			j++
		}
		if answered, err := w.writeChunk(buf, data[i:j]); err != nil {
			answer(data[i+answered:], err)
			break
		}
		i = j
	}
	if len(w.syncs) > 0 {
		err := w.stickyErr()
		if err == nil && w.written > w.synced {
			if serr := w.fdatasync(); serr != nil {
				err = w.syncFailed(fmt.Errorf("sync %s: %w", w.active.name, serr))
			}
		}
		answer(w.syncs, err)
	}
	clear(w.data)
	clear(w.rest)
	clear(w.syncs)
}

// writeChunk writes chunk (consecutive requests that fit the active
// segment), syncs it under FlushSync, publishes it and answers it. On
// failure it undoes the write and returns the error for the caller to
// answer the requests from chunk[answered] on with (answered is how many
// the chunk's fdatasync failure left already answered: none, or all).
//
// The AppendUnsynced requests of a chunk are answered between the write
// and the fdatasync, after the chunk is published (its size and the log's
// head), so that whatever their callers do next (the engine applies a fire
// and a checkpoint may then record the head) sees them in the log.
func (w *writer) writeChunk(buf []byte, chunk []*request) (answered int, err error) {
	l := w.log
	from, to := chunk[0].start, chunk[len(chunk)-1].end
	if _, err := w.active.f.WriteAt(buf[from:to], HeaderSize+w.written); err != nil {
		return 0, w.undo(w.written, fmt.Errorf("commitlog: write %s: %w", w.active.name, classify(err)))
	}
	w.written += int64(to - from)
	w.room = max(w.room, w.written)
	w.sum = crc32.Update(w.sum, castagnoli, buf[from:to])
	w.pendingBytes += to - from
	for _, r := range chunk {
		w.pendingRecords += r.records
	}
	if l.opts.Flush == FlushSync {
		rest := w.answerUnsynced(chunk)
		// Not undone and retried: the retry could succeed without writing
		// the pages the failure dropped (see syncFailed).
		if err := w.fdatasync(); err != nil {
			err = w.syncFailed(fmt.Errorf("sync %s: %w", w.active.name, err))
			answer(rest, err)
			return len(chunk), err
		}
		chunk = rest
	}
	w.publish()
	answer(chunk, nil)
	return len(chunk), nil
}

// fdatasync syncs the active segment and reports it to OnSync.
func (w *writer) fdatasync() error {
	began := time.Now()
	if err := w.active.f.Sync(); err != nil {
		return err
	}
	if hook := w.log.opts.OnSync; hook != nil {
		hook(time.Since(began), w.pendingRecords, w.pendingBytes)
	}
	w.synced = w.written
	w.pendingRecords, w.pendingBytes = 0, 0
	l := w.log
	l.mu.Lock()
	l.mu.durable = max(l.mu.durable, w.active.base+Pos(w.synced))
	l.mu.Unlock()
	l.wakeDurable()
	return nil
}

// roll seals the active segment and starts the next one at its end.
func (w *writer) roll() error {
	l := w.log
	// A segment is durable in full before its successor exists, so that
	// recovery needs to scan only the last segment.
	if w.written > w.synced {
		if err := w.fdatasync(); err != nil {
			return w.syncFailed(fmt.Errorf("sync %s before roll: %w", w.active.name, err))
		}
	}
	if err := w.trim(); err != nil {
		return err
	}
	w.seal()
	base := w.active.base + Pos(w.written)
	if s, err := w.installSpare(base); s != nil || err != nil {
		if err != nil {
			return err
		}
		w.start(s, l.opts.SegmentBytes)
		return nil
	}
	watch := &syncWatch{FS: l.opts.FS}
	s, err := createSegment(watch, l.opts.Dir, base)
	if err != nil {
		if watch.failed {
			// The new file's header or its directory entry could not be
			// synced: fail-stop, as for any fsync of the log.
			return w.sticky(fmt.Errorf("%w: %w", ErrFsyncFailed, err))
		}
		if errors.Is(err, errCleanup) {
			return w.sticky(err)
		}
		return err
	}
	if f, ok := s.f.(*syncWatchFile); ok {
		s.f = f.File
	}
	w.start(s, 0)
	return nil
}

// start makes s, whose file holds room record bytes (zeros), the active
// segment.
func (w *writer) start(s *segment, room int64) {
	l := w.log
	l.mu.Lock()
	l.mu.segs = append(l.mu.segs, s)
	l.mu.Unlock()
	w.active, w.written, w.synced, w.room, w.sum = s, 0, 0, room, 0
}

// seal writes the sum file of the active segment, which is synced in full
// and about to be followed by a new one. It is best effort (see sum.go): a
// failure leaves the segment without a sum, checked by its frames alone,
// and removes what it may have left so that no partial sum file stays. A
// failed roll after it seals the same bytes again at the next try.
func (w *writer) seal() {
	l := w.log
	if err := writeSum(l.opts.FS, l.opts.Dir, w.active.name, w.active.base, w.written, w.sum); err != nil {
		_ = l.opts.FS.Remove(l.path(SumFileName(w.active.name)))
	}
}

// background is the FlushAsync ticker's sync.
func (w *writer) background() {
	if w.written == w.synced || w.stickyErr() != nil {
		return
	}
	if err := w.fdatasync(); err != nil {
		w.syncFailed(fmt.Errorf("background sync of %s: %w", w.active.name, err))
	}
}
