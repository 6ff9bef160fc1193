package commitlog

import (
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/vfs"
)

// Preallocation: the next segment is written in full with zeros, synced,
// before the writer needs it, so that appends overwrite bytes the file
// already holds. An fdatasync then has no file size to commit, which on
// ext4 spares it a journal commit (docs/benchmarks.md, "append-prealloc").
//
// One goroutine, started by Open and stopped by Close, writes at most one
// spare file, SpareName in the log's directory, when the writer asks for
// one (at Open and at each roll): zeros, written out step by step and
// synced, with no directory sync (the spare's entry need not survive a
// crash). A roll that finds it ready writes the new segment's header into
// it, syncs it, renames it to the segment's name and syncs the directory;
// a roll that finds none creates the segment as before. Only the last
// segment has zeros after its records: a roll first cuts the sealed
// segment back to its records. A failed preallocation (a full disk, say)
// fails nothing: the spare is removed, Options.OnPreallocate hears of it,
// and the log goes on with files that grow. Disk use: the active segment
// is SegmentBytes long from its start, and one spare of that size waits
// beside it.
//
// The spare's content is never trusted: it holds no record, Open removes a
// spare a crash left behind, and Close removes the spare it has.

// SpareName is the file name, in the log's directory, of the preallocated
// spare segment. It is not a segment name, so every reader of the log
// ignores it.
const SpareName = ".next-segment.spare"

// preallocator owns the spare file. The writer goroutine calls request,
// ready and take; stop is called once, by the writer as it exits.
type preallocator struct {
	fs   vfs.FS
	dir  string
	size int64 // HeaderSize + SegmentBytes
	hook func(time.Duration, error)
	wake chan struct{} // capacity 1: "make a spare"
	quit chan struct{}
	done chan struct{}

	mu struct {
		sync.Mutex
		ready vfs.File // the synced spare, or nil
		// taken: the writer holds a spare it took and has not yet renamed
		// or removed, so SpareName is still that file's path. No new
		// spare is created meanwhile: creating one at that path would
		// truncate and zero the file the writer is making a segment of.
		taken bool
	}
}

// newPreallocator starts the goroutine of a log with opts.
func newPreallocator(opts Options) *preallocator {
	p := &preallocator{
		fs: opts.FS, dir: opts.Dir, size: HeaderSize + opts.SegmentBytes, hook: opts.OnPreallocate,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
	}
	go p.run()
	return p
}

// request asks for a spare, if none is ready or being written.
func (p *preallocator) request() {
	if p == nil {
		return
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// ready reports whether a spare waits to be taken.
func (p *preallocator) ready() bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.ready != nil
}

// take returns the ready spare, or nil; the caller owns the file from
// then on.
func (p *preallocator) take() vfs.File {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.mu.ready
	p.mu.ready = nil
	p.mu.taken = f != nil
	return f
}

// release tells p that the spare the writer took is renamed into the log
// or removed: SpareName is free for the next spare.
func (p *preallocator) release() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.mu.taken = false
	p.mu.Unlock()
}

// needed reports whether a spare should be written now: none is ready,
// and none is taken and still under SpareName.
func (p *preallocator) needed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.ready == nil && !p.mu.taken
}

// stop ends the goroutine, waiting for a spare being written to be
// abandoned, and removes the spare: a stopped log keeps none on disk.
func (p *preallocator) stop() {
	if p == nil {
		return
	}
	close(p.quit)
	<-p.done
	if f := p.take(); f != nil {
		_ = f.Close()
	}
	_ = p.fs.Remove(path.Join(p.dir, SpareName))
}

func (p *preallocator) run() {
	defer close(p.done)
	for {
		select {
		case <-p.quit:
			return
		case <-p.wake:
		}
		if p.step() {
			return
		}
	}
}

// step answers one request: it writes a spare if one is needed, and
// reports whether stop interrupted it. A request can be stale (sent
// while the last spare was being written, and read after the writer took
// that spare), so need is checked here, not assumed.
func (p *preallocator) step() (stopped bool) {
	if !p.needed() {
		return false
	}
	began := time.Now()
	f, err := p.write()
	if errors.Is(err, errStopped) {
		return true
	}
	if err != nil {
		_ = p.fs.Remove(path.Join(p.dir, SpareName))
		err = fmt.Errorf("commitlog: preallocate %s: %w", SpareName, classify(err))
	} else {
		p.mu.Lock()
		p.mu.ready = f
		p.mu.Unlock()
	}
	p.report(time.Since(began), err)
	return false
}

// errStopped is write's answer when stop interrupted it.
var errStopped = errors.New("commitlog: preallocation stopped")

// write makes the spare: zeros to its full size, written out step by step
// so that the device never holds a long burst of them ahead of the
// writer's fdatasync, then synced.
func (p *preallocator) write() (vfs.File, error) {
	f, err := p.fs.Create(path.Join(p.dir, SpareName))
	if err != nil {
		return nil, err
	}
	if err := p.fill(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// fill writes the zeros of spare f and syncs them.
func (p *preallocator) fill(f vfs.File) error {
	zeros := make([]byte, vfs.PaceBytes)
	for off := int64(0); off < p.size; {
		select {
		case <-p.quit:
			return errStopped
		default:
		}
		n := min(int64(len(zeros)), p.size-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
		// An error of the write-out is this file's alone (the log's files
		// have their own pages), and fails only the preallocation.
		if err := vfs.WriteOut(f, off, n); err != nil {
			return err
		}
		off += n
	}
	// No directory sync: the spare's own entry need not survive a crash
	// (Open removes a spare anyway), and the rename that makes it a
	// segment is followed by one.
	return f.Sync()
}

// errInstallDir marks a failed directory sync after the spare was renamed
// into the log: an fsync of the log's directory failed, so the writer
// fail-stops as for createSegment's.
var errInstallDir = errors.New("commitlog: sync dir after renaming the spare")

// install makes spare f the durable segment for base: header, fdatasync
// (no size change: the file is full size already), rename, directory sync.
// Before the rename a failure leaves the log as it was: the spare is
// discarded and the caller creates the segment as before. After it, the
// error wraps errInstallDir.
func install(fsys vfs.FS, dir string, f vfs.File, base Pos) (*segment, error) {
	name := segmentName(base)
	spare := path.Join(dir, SpareName)
	_, err := f.WriteAt(encodeHeader(base), 0)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = fsys.Rename(spare, path.Join(dir, name))
	}
	if err != nil {
		_ = f.Close()
		_ = fsys.Remove(spare)
		return nil, err
	}
	if err := fsys.SyncDir(dir); err != nil {
		// As createSegment does: the log stops (the caller sees
		// errInstallDir), and the file goes, best effort; recovery
		// takes a leftover for the empty last segment it is.
		_ = f.Close()
		_ = fsys.Remove(path.Join(dir, name))
		return nil, fmt.Errorf("%w %s: %w", errInstallDir, name, err)
	}
	// The file goes on under its new name, so that it is known by that
	// name to the FS (a fault injector's, say); failing that, under the
	// handle it has.
	if g, err := fsys.Open(path.Join(dir, name)); err == nil {
		_ = f.Close()
		f = g
	}
	return &segment{base: base, name: name, f: f}, nil
}

// roomOf returns how many record bytes the file of s holds: its records
// and, if it is preallocated, the zeros after them.
func roomOf(s *segment) (int64, error) {
	size, err := s.f.Size()
	if err != nil {
		return 0, fmt.Errorf("commitlog: size of %s: %w", s.name, err)
	}
	return max(size-HeaderSize, s.size), nil
}

// removeSpare removes the spare segment a crash left (prealloc.go): it
// holds no record, and its zeros are not known durable.
func removeSpare(fsys vfs.FS, dir string, info *RecoveryInfo) error {
	err := fsys.Remove(path.Join(dir, SpareName))
	switch {
	case err == nil:
		info.RemovedSpare = true
		return nil
	case vfs.IsNotExist(err):
		return nil
	}
	return fmt.Errorf("commitlog: remove %s: %w", SpareName, err)
}

// report passes the outcome of a preallocation step to the hook.
func (p *preallocator) report(d time.Duration, err error) {
	if p.hook != nil {
		p.hook(d, err)
	}
}

// adoptSpare runs before the first write of a log opened on an empty
// segment that is not preallocated (a new log, above all): if the first
// spare is ready by then, it takes the empty segment's place, under the
// same name and base, so that the log is preallocated from its first
// record rather than from its first roll. It does not wait for the spare
// (a slow disk would hold the first Append up): without one the segment
// stays as it is. The rename replaces a durable empty segment by another,
// so a crash leaves either.
func (w *writer) adoptSpare() error {
	w.awaitSpare = false
	l := w.log
	if w.written != 0 || w.room != 0 || !l.pre.ready() {
		return nil
	}
	old := w.active
	s, err := w.installSpare(old.base)
	if s == nil || err != nil {
		return err
	}
	l.mu.Lock()
	l.mu.segs[len(l.mu.segs)-1] = s
	old.removed = true
	if old.refs == 0 {
		_ = old.f.Close()
	}
	l.mu.Unlock()
	w.active, w.room = s, l.opts.SegmentBytes
	return nil
}

// trim cuts the zeros after the active segment's records before it is
// sealed: a sealed segment's file ends with its last record, so that its
// length is its end for every reader and tool, and its successor's base
// follows on from it. The cut is synced, as its successor must not exist
// before it is durable.
func (w *writer) trim() error {
	if w.room <= w.written {
		return nil
	}
	if err := w.active.f.Truncate(HeaderSize + w.written); err != nil {
		return fmt.Errorf("commitlog: cut the preallocated zeros of %s before roll: %w", w.active.name, classify(err))
	}
	w.room = w.written
	if err := w.active.f.Sync(); err != nil {
		return w.syncFailed(fmt.Errorf("sync %s after cutting its preallocated zeros: %w", w.active.name, err))
	}
	return nil
}

// installSpare makes the ready spare, if any, the segment for base and
// asks for the next spare. It returns nil and no error when there is no
// spare or it could not be used (the caller creates the segment as
// without preallocation), and the sticky error when the directory sync
// after its rename failed.
func (w *writer) installSpare(base Pos) (*segment, error) {
	l := w.log
	f := l.pre.take()
	// When install returns, the spare is renamed or removed: only then may
	// the next one be created under SpareName.
	defer func() { l.pre.release(); l.pre.request() }()
	if f == nil {
		return nil, nil
	}
	began := time.Now()
	s, err := install(l.opts.FS, l.opts.Dir, f, base)
	if err == nil {
		return s, nil
	}
	l.pre.report(time.Since(began), fmt.Errorf("commitlog: use %s as %s: %w", SpareName, segmentName(base), classify(err)))
	if errors.Is(err, errInstallDir) {
		return nil, w.sticky(fmt.Errorf("%w: %w", ErrFsyncFailed, err))
	}
	return nil, nil
}
