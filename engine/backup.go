package engine

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/queueindex"
	"github.com/hourglass-mq/hourglass/vfs"
)

// Online backup.
//
// A backup is a data directory a broker can open: IDENTITY (the key that
// seals IDs, so a restored broker accepts the IDs it handed out), a fresh
// CHECKPOINT, the commit log up to a record boundary at or after that
// checkpoint's position, and the caches. It is taken while sends go on:
//
//  1. Backup takes gate.serial, the lock that serialises checkpoints, and holds
//     it to the end. Every removal or rewrite of a file of the data
//     directory happens inside a checkpoint (retention of segments and
//     overlay files, removal of timer buckets and replaced key runs, the
//     writes of timer buckets, key runs and the overlay journal): while
//     Backup holds gate.serial, those files are frozen, the commit log and
//     the queue indexes only grow, and nothing Backup reads disappears.
//     One write is outside it: a read that meets damage in a timer or key
//     run withdraws that run's tail in place and writes the damage mark
//     (sortedrun's noteDamage), at any time. The copy holds the same
//     damaged blocks either way; if it got the tail before the withdrawal
//     and not the mark, the restored broker trusts that tail until a read
//     meets the damage and records it, as for damage not yet found.
//  2. It writes a checkpoint (checkpointLocked). Sends wait only for its
//     capture under the gate, as for any checkpoint; BackupInfo.Pause is
//     that wait. Every message acknowledged before Backup was called is
//     in the log before the checkpoint's position.
//  3. It reads the log's head H (a record boundary: Head moves by whole
//     acknowledged batches) and copies the log up to H: sealed segments
//     wholly below H are hard-linked (they are never written again) or
//     copied where linking fails, the segment holding H is copied up to
//     H. A message acknowledged while Backup runs is one record, below H
//     (in the backup, whole) or not (absent).
//  4. It copies the caches as they are. Recovery of the backup cuts every
//     queue index, timer bucket and overlay file back to the length the
//     checkpoint recorded and ignores key runs it does not list (see
//     recover.go), then replays the log from the checkpoint's position to
//     H: whatever the caches gained after the checkpoint is derived again
//     from the log, so nothing in the backup is early.
//  5. It writes into a temporary sibling directory, syncs every file and
//     directory, and renames it to its name: a crash leaves no half
//     backup under that name. LOCK is not copied.
//
// While Backup runs no checkpoint can run: the timer entries of far-future
// sends wait in memory (the buffer a checkpoint would flush), and the log
// a recovery would replay grows. A backup of a large directory therefore
// costs some memory and some recovery time until the next checkpoint,
// which the checkpointer runs as soon as Backup returns.
//
// Caveat: a linked segment shares its data with the live directory.
// Nothing in the broker writes a sealed segment, but `hourglass repair`
// does, in place: copy the backup (or restore it) before repairing the
// live directory, or repair a copy.

// BackupInfo says what Backup wrote.
type BackupInfo struct {
	// Dir is the backup's directory.
	Dir string
	// CheckpointPos is where the backup's checkpoint starts replay;
	// LogHead the end of the log copied (a record boundary). Every message
	// acknowledged before Backup was called lies below CheckpointPos.
	CheckpointPos, LogHead uint64
	// Files and Bytes count what was copied; LinkedFiles and LinkedBytes
	// the sealed segments hard-linked (no new disk space).
	Files, LinkedFiles int
	Bytes, LinkedBytes int64
	// Pause is how long sends waited: the checkpoint's capture.
	Pause time.Duration
	// Duration is the whole backup, checkpoint included.
	Duration time.Duration
}

// BackupWith writes a consistent copy of the data directory to dir, an
// absolute path that does not exist yet or is an empty directory, whose
// parent exists, on the engine's filesystem, while sends go on (see the
// comment above for how, and what is and is not in it). Bad targets are
// InvalidArgument errors; a closed engine is Unavailable. It is safe to
// call concurrently with everything; backups run one at a time.
//
// It also writes extra (paths relative to the data directory, and their
// bytes; nil for none) into the copy before it is renamed into place, so
// that a crash never leaves a backup that looks whole without them. The
// caller reads them before the call: whatever they record of the log (the
// schedules' progress) is then in the log the copy ends at.
func (e *Engine) BackupWith(ctx context.Context, dir string, extra map[string][]byte) (BackupInfo, error) {
	start := time.Now()
	info := BackupInfo{Dir: dir}
	if err := checkBackupTarget(e.opts.FS, e.opts.Dir, dir); err != nil {
		return info, err
	}
	e.mu.Lock()
	closed := e.life.closedLocked()
	e.mu.Unlock()
	if closed {
		return info, errs.New(errs.Unavailable, "the broker is shutting down")
	}
	e.gate.serial.Lock()
	defer e.gate.serial.Unlock()
	// Again, now that no other backup runs: one into the same directory
	// may have finished while this one waited; refuse before copying.
	if err := checkEmptyTarget(e.opts.FS, dir); err != nil {
		return info, err
	}
	st, pause, err := e.ckpt.checkpointLocked()
	info.Pause = pause
	if err != nil {
		return info, fmt.Errorf("backup: checkpoint: %w", err)
	}
	info.CheckpointPos, info.LogHead = st.LogPos, uint64(e.clog.Head())
	c := &copier{ctx: ctx, fs: e.opts.FS, info: &info}
	// A backup into dir cut short by a crash left its temporary sibling
	// behind; backups of this broker take turns (gate.serial), so any
	// such sibling now is a leftover.
	if n, err := removeLeftovers(e.opts.FS, dir); err != nil {
		e.opts.Logger.Warn("removing what an earlier backup left failed", "dir", dir, "err", err)
	} else if n > 0 {
		e.opts.Logger.Info("removed what earlier backups cut short left", "dir", dir, "removed", n)
	}
	err = c.into(dir, func(tmp string) error {
		if err := e.ckpt.copyLive(c, tmp, commitlog.Pos(info.LogHead)); err != nil {
			return err
		}
		return c.put(tmp, extra)
	})
	info.Duration = time.Since(start)
	if err != nil {
		return info, fmt.Errorf("backup: %w", err)
	}
	e.opts.Logger.Info("backup written", "dir", dir, "checkpoint", info.CheckpointPos, "log_head", info.LogHead,
		"bytes", info.Bytes, "linked_bytes", info.LinkedBytes, "pause", info.Pause, "took", info.Duration)
	return info, nil
}

// checkBackupTarget validates a backup's directory, dir, for the data
// directory dataDir.
func checkBackupTarget(fs vfs.FS, dataDir, dir string) error {
	if !filepath.IsAbs(dir) {
		return errs.New(errs.InvalidArgument, "backup directory %q is not an absolute path", dir)
	}
	dir = filepath.Clean(dir)
	data, err := filepath.Abs(dataDir)
	if err == nil && (dir == data || strings.HasPrefix(dir, data+string(filepath.Separator))) {
		return errs.New(errs.InvalidArgument, "backup directory %q is inside the data directory", dir)
	}
	return checkEmptyTarget(fs, dir)
}

// checkEmptyTarget accepts a directory that does not exist, or is empty,
// and whose parent exists.
func checkEmptyTarget(fs vfs.FS, dir string) error {
	if _, err := fs.List(filepath.Dir(dir)); err != nil {
		return errs.New(errs.InvalidArgument, "the parent of %q cannot be listed (it must exist): %v", dir, err)
	}
	names, err := fs.List(dir)
	switch {
	case vfs.IsNotExist(err):
		return nil
	case err != nil:
		return errs.New(errs.InvalidArgument, "%q is not a directory that can be listed: %v", dir, err)
	case len(names) > 0:
		return errs.New(errs.InvalidArgument, "%q is not empty (%d entries): choose a new directory", dir, len(names))
	}
	return nil
}

// copyLive copies the live data directory into tmp: the log up to head,
// then the rest as it is (gate.serial held: see the comment at the top).
func (k *checkpointer) copyLive(c *copier, tmp string, head commitlog.Pos) error {
	src := k.opts.Dir
	for _, name := range []string{identityFile, checkpointFile} {
		if err := c.file(path.Join(src, name), path.Join(tmp, name), -1); err != nil {
			return err
		}
	}
	if err := c.mkdir(path.Join(tmp, "log")); err != nil {
		return err
	}
	segs := k.log.Segments()
	for i, s := range segs {
		if s.Base > head {
			break
		}
		from, to := path.Join(src, "log", s.Name), path.Join(tmp, "log", s.Name)
		if s.End <= head && i < len(segs)-1 {
			if err := c.link(from, to); err != nil {
				return err
			}
			// Its sum file, if it has one (commitlog/sum.go): immutable
			// like the segment, and the restored broker's scrub uses it.
			sum := commitlog.SumFileName(s.Name)
			if f, err := k.opts.FS.Open(path.Join(src, "log", sum)); err == nil {
				f.Close()
				if err := c.link(path.Join(src, "log", sum), path.Join(tmp, "log", sum)); err != nil {
					return err
				}
			}
			continue
		}
		if err := c.file(from, to, commitlog.HeaderSize+int64(min(s.End, head)-s.Base)); err != nil {
			return err
		}
	}
	// Queue indexes only grow; a partial entry at the end is left out.
	topics, err := k.opts.FS.List(path.Join(src, "queues"))
	if err != nil && !vfs.IsNotExist(err) {
		return err
	}
	for _, t := range topics {
		files, err := k.opts.FS.List(path.Join(src, "queues", t))
		if err != nil {
			return err
		}
		if err := c.mkdir(path.Join(tmp, "queues", t)); err != nil {
			return err
		}
		for _, f := range files {
			if !strings.HasSuffix(f, ".qi") {
				continue
			}
			if err := c.file(path.Join(src, "queues", t, f), path.Join(tmp, "queues", t, f), -queueindex.EntrySize); err != nil {
				return err
			}
		}
	}
	for _, d := range []string{"keys", "timers", overlayDir} {
		if err := c.tree(path.Join(src, d), path.Join(tmp, d)); err != nil {
			return err
		}
	}
	return nil
}

// Restore makes the directory to, which must be missing or empty with an
// existing parent, a copy of the backup (or stopped data directory) from,
// ready for a broker to open: every file but LOCK is copied (never
// linked: the broker appends to the last segment, and the backup must not
// change), synced, and the directory renamed into place. It refuses a
// source a running broker holds. It then checks the result (Check) and
// returns the report; a report with problems is returned with a nil
// error, for the caller to show.
func Restore(ctx context.Context, fs vfs.FS, from, to string, opts CheckOptions) (BackupInfo, *CheckReport, error) {
	info := BackupInfo{Dir: to}
	start := time.Now()
	if b, err := readAll(fs, path.Join(from, identityFile)); err != nil {
		return info, nil, errs.New(errs.InvalidArgument, "%s is not a backup or data directory: %v", from, err)
	} else if _, err := decodeIdentity(b); err != nil {
		return info, nil, errs.New(errs.InvalidArgument, "%s: %v", from, err)
	}
	if err := checkEmptyTarget(fs, to); err != nil {
		return info, nil, err
	}
	lock, err := vfs.Lock(vfs.ReadOnly(fs), path.Join(from, LockFile))
	if errors.Is(err, vfs.ErrLocked) {
		return info, nil, fmt.Errorf("%w: %s; restore from a backup, or stop the broker", ErrInUse, from)
	}
	if err != nil {
		return info, nil, err
	}
	defer lock.Close()
	c := &copier{ctx: ctx, fs: fs, info: &info}
	if err := c.into(to, func(tmp string) error { return c.tree(from, tmp) }); err != nil {
		return info, nil, fmt.Errorf("restore: %w", err)
	}
	info.Duration = time.Since(start)
	rep, err := Check(fs, to, opts)
	return info, rep, err
}
