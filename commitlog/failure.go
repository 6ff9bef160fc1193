package commitlog

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/hourglass-mq/hourglass/vfs"
)

// classify adds ErrDiskFull to an error caused by ENOSPC.
func classify(err error) error {
	if errors.Is(err, syscall.ENOSPC) && !errors.Is(err, ErrDiskFull) {
		return fmt.Errorf("%w: %w", ErrDiskFull, err)
	}
	return err
}

// fail records err as the log's permanent failure (the first one wins)
// and returns the sticky error, which wraps ErrFailed and the first err.
// It may be called from any goroutine.
func (l *Log) fail(err error) error {
	q := &l.q
	q.mu.Lock()
	first := q.failed == nil
	if first {
		q.failed = fmt.Errorf("%w: %w", ErrFailed, err)
	}
	failed := q.failed
	q.mu.Unlock()
	if first {
		l.wakeDurable() // WaitDurable returns the failure
	}
	return failed
}

// failure returns the log's permanent failure, or nil.
func (l *Log) failure() error {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	return l.q.failed
}

func (w *writer) sticky(err error) error { return w.log.fail(err) }

// syncFailed stops the log after a failed fdatasync of the active segment
// (cause describes it) and returns the sticky error, which wraps
// ErrFsyncFailed.
//
// Why stop: after a failed fsync Linux marks the pages it could not write
// clean, so a retry succeeds without writing them; the bytes after the last
// successful sync may be gone from the disk while reads still return them.
// Why cut back to the last successful sync first: a reopen in the same boot
// reads the page cache, and would otherwise take those records as present,
// append after them and, after a power loss, find a hole before records it
// acknowledged later. Every byte below synced was covered by a successful
// fsync, so the cut loses nothing that reached the disk. Under FlushSync it
// removes only the failed, unacknowledged batch; under FlushAsync it also
// removes acknowledged records written since the last sync, which a power
// loss could have taken anyway and which the failed sync may already have
// lost. Head moves back accordingly. The cut is best effort: if it fails,
// recovery sorts out the tail.
func (w *writer) syncFailed(cause error) error {
	err := fmt.Errorf("%w: %w", ErrFsyncFailed, classify(cause))
	if w.written > w.synced {
		if terr := w.active.f.Truncate(HeaderSize + w.synced); terr != nil {
			err = fmt.Errorf("%w; cutting %s back to its last synced byte failed too: %w", err, w.active.name, terr)
		} else {
			w.room = w.synced
			if serr := w.active.f.Sync(); serr != nil {
				err = fmt.Errorf("%w; syncing the cut failed too: %w", err, serr)
			}
		}
		w.written = w.synced
		w.pendingRecords, w.pendingBytes = 0, 0
		l := w.log
		l.mu.Lock()
		w.active.size = min(w.active.size, w.synced)
		l.mu.head = w.active.end()
		l.mu.Unlock()
	}
	return w.sticky(err)
}

func (w *writer) stickyErr() error {
	q := &w.log.q
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.failed
}

// undo cuts the active segment back to to record bytes after a failed
// write (not a failed sync: see syncFailed), so that no later record
// follows a hole, and makes the cut durable. If that works the log goes on
// and cause is returned; if not, the failure becomes sticky.
func (w *writer) undo(to int64, cause error) error {
	if err := w.active.f.Truncate(HeaderSize + to); err != nil {
		return w.sticky(fmt.Errorf("%w; then truncate failed: %w", cause, err))
	}
	w.written, w.room = to, to
	// Forced even if nothing is pending: the new length must be durable.
	began := time.Now()
	if err := w.active.f.Sync(); err != nil {
		return w.syncFailed(fmt.Errorf("%w; then sync after truncate failed: %w", cause, err))
	}
	if w.written > w.synced {
		// Under FlushAsync this sync also made earlier records durable.
		if hook := w.log.opts.OnSync; hook != nil {
			hook(time.Since(began), w.pendingRecords, w.pendingBytes)
		}
		w.pendingRecords, w.pendingBytes = 0, 0
	}
	w.synced = w.written
	return cause
}

// syncWatch is the FS a roll creates its segment through: it notes whether
// a File.Sync or SyncDir failed, which createSegment's error does not say,
// so that roll can fail-stop on a failed fsync but go on after a failed
// create or header write (a full disk).
type syncWatch struct {
	vfs.FS
	failed bool // only the writer goroutine uses a syncWatch
}

// Create creates name and watches the new file's Sync.
func (s *syncWatch) Create(name string) (vfs.File, error) {
	f, err := s.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &syncWatchFile{File: f, watch: s}, nil
}

// SyncDir syncs dir and notes a failure.
func (s *syncWatch) SyncDir(dir string) error {
	err := s.FS.SyncDir(dir)
	if err != nil {
		s.failed = true
	}
	return err
}

// syncWatchFile is a file created through a syncWatch; roll unwraps it
// once the segment exists.
type syncWatchFile struct {
	vfs.File
	watch *syncWatch
}

// Sync syncs the file and notes a failure.
func (f *syncWatchFile) Sync() error {
	err := f.File.Sync()
	if err != nil {
		f.watch.failed = true
	}
	return err
}
