package engine

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/keyindex"
	"github.com/hourglass-mq/hourglass/timerstore"
)

// Fail-stop after a failed fsync.
//
// On Linux a failed fsync may drop the dirty pages it covered and mark them
// clean, so the next fsync of the file succeeds without writing them
// (PostgreSQL's "fsyncgate"). Retrying is therefore not a fix: after one,
// the engine can no longer vouch that what it wrote is on disk. The policy
// is fail-stop, as PostgreSQL's: the first failed fsync of the commit log
// or of any cache the checkpoint would vouch for (timer buckets, queue
// indexes, key index, overlay journal, their directories) stops the engine.
// No checkpoint is written after it, so the last durable checkpoint and the
// commit log stay the truth; every operation then fails with Unavailable,
// nothing more is made visible, and Failed is closed so that the process
// can exit and be restarted. Recovery re-reads only what is durable: it
// truncates the caches to the checkpoint and replays the log, and the log
// itself never acknowledged a record whose fsync failed.
//
// A failed write (not an fsync), such as ENOSPC, is not fatal: the write
// is refused with a clear error, nothing acknowledged depends on it, and it
// is retried.

// fail records the engine's first fatal storage error and stops it. It
// returns err for the caller's convenience.
func (l *lifecycle) fail(err error) error {
	l.mu.Lock()
	first := l.setFailedLocked(err)
	l.mu.Unlock()
	if first {
		l.stats.Failed.Store(true)
		l.logger.Error("storage failed: the broker stops; restart it to recover from the commit log", "err", err)
		l.kickLoop()
	}
	return err
}

// failLocked is fail for a caller holding mu.
func (l *lifecycle) failLocked(err error) {
	if l.setFailedLocked(err) {
		l.stats.Failed.Store(true)
		l.logger.Error("storage failed: the broker stops; restart it to recover from the commit log", "err", err)
		l.kickLoop()
	}
}

// Failed is closed when the engine stopped after a storage failure; Err
// then says why. A server should stop and be restarted: recovery rebuilds
// the state from what is durable.
func (e *Engine) Failed() <-chan struct{} { return e.life.failedSignal() }

// Err returns the storage failure that stopped the engine, or nil.
func (e *Engine) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.life.failureLocked()
}

// storageErr classifies a commit-log failure for the caller, stopping the
// engine when the log says it failed for good.
func (l *lifecycle) storageErr(err error) error {
	if errors.Is(err, commitlog.ErrFailed) {
		l.fail(err)
	}
	return storageErr(err)
}

// storageErrLocked is storageErr for a caller holding mu (fail would
// wait for the lock its caller holds, and the engine would hang instead
// of stopping).
func (l *lifecycle) storageErrLocked(err error) error {
	if errors.Is(err, commitlog.ErrFailed) {
		l.failLocked(err)
	}
	return storageErr(err)
}

// cacheErr classifies a failure to write or sync a cache for the
// checkpoint: a full disk fails this checkpoint only (nothing is recorded
// past what is durable, and the next one retries), anything else stops the
// engine, since a failed fsync may have dropped pages (see above).
func (l *lifecycle) cacheErr(what string, err error) error {
	err = fmt.Errorf("%s: %w", what, err)
	if errors.Is(err, syscall.ENOSPC) {
		return err
	}
	return l.fail(err)
}

// cacheErrLocked is cacheErr for a caller holding mu (the capture). A
// cache closed by Close, or busy with another job, is no storage failure:
// a Backup that waited for the checkpoint lock behind Close meets it.
func (l *lifecycle) cacheErrLocked(what string, err error) error {
	err = fmt.Errorf("%s: %w", what, err)
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, keyindex.ErrClosed) || errors.Is(err, keyindex.ErrBusy) ||
		errors.Is(err, timerstore.ErrClosed) || errors.Is(err, timerstore.ErrBusy) {
		return err
	}
	l.failLocked(err)
	return err
}

// Sync returns once every record the log held when it was called is
// durable: for an adapter that hands out, or keeps outside the log,
// positions in a queue that must never be ahead of what a crash leaves. A
// fire is applied before its record is durable (E21), so a queue offset
// a client keeps (the remoting adapter's pulls and consumer offsets) could
// otherwise name an entry whose fire a crash takes back and recovery makes
// again at that same offset, where the client would skip it. Under sync
// flush it waits for the fdatasync already under way, if any, and starts
// none of its own; under async flush, which promises nothing across a
// power loss, it waits for nothing. A failed fsync stops the engine, as
// any does.
func (e *Engine) Sync() error {
	if err := e.clog.WaitDurable(); err != nil {
		return e.life.storageErr(fmt.Errorf("sync commit log: %w", err))
	}
	return nil
}
