package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"path"
	"time"

	"github.com/hourglass-mq/hourglass/keyindex"
	"github.com/hourglass-mq/hourglass/timerstore"
	"github.com/hourglass-mq/hourglass/vfs"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func readAll(fs vfs.FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); err != nil && n < len(b) {
		return nil, err
	}
	return b, nil
}

// checkpointer writes a checkpoint every CheckpointInterval.
func (e *Engine) checkpointer() {
	defer close(e.life.ckptDone)
	trickle, stop := e.trickleTicks()
	defer stop()
	for {
		if !e.waitCheckpoint(e.opts.Clock.NewTimer(e.opts.CheckpointInterval), trickle) {
			return
		}
		err := e.checkpoint()
		e.side.health.checkpointDone(err, e.Now())
		if err != nil {
			e.opts.Logger.Error("checkpoint failed", "err", err)
			e.stats.CheckpointErrors.Add(1)
		}
	}
}

// checkpoint captures the state under the exclusive gate, makes the caches
// it covers durable, writes the checkpoint atomically, and then removes what
// the new checkpoint no longer needs: loaded timer buckets behind the
// frontier and commit-log segments past retention.
func (e *Engine) checkpoint() error {
	// One checkpoint at a time: the timer store allows one sync job.
	e.gate.serial.Lock()
	defer e.gate.serial.Unlock()
	_, _, err := e.checkpointLocked()
	return err
}

// checkpointLocked is checkpoint for a caller that holds gate.serial (Backup
// holds it across the checkpoint and its copy). It returns the state it
// made durable and how long it held the gate (sends wait that long).
func (e *Engine) checkpointLocked() (st *checkpointState, pause time.Duration, err error) {
	start := time.Now()
	e.gate.Lock()
	locked := time.Now()
	e.mu.Lock()
	c, err := e.captureLocked(e.gate.Unlock)
	e.mu.Unlock()
	pause = time.Since(start)
	e.stats.CheckpointGateWaitSeconds.Observe(locked.Sub(start).Seconds())
	e.stats.CheckpointCaptureSeconds.Observe((pause - locked.Sub(start)).Seconds())
	if err != nil {
		return nil, pause, err
	}
	// Everything below runs without the locks: sends, fires and acks do
	// not wait for the checkpoint's fsyncs.
	if err := e.writeCaches(c); err != nil {
		return nil, pause, err
	}
	data, err := encodeCheckpoint(c.st)
	if err != nil {
		return nil, pause, err
	}
	if err := writeFileAtomic(e.opts.FS, e.opts.Dir, checkpointFile, data); err != nil {
		return nil, pause, err
	}
	// The new checkpoint no longer lists the runs a merge replaced.
	if err := e.keys.Release(c.keyJob); err != nil {
		e.opts.Logger.Warn("removing replaced key index runs failed", "err", err)
	}
	// The files go outside the lock: unlinking a large run frees its
	// blocks, journal work no send should wait for under mu.
	e.mu.Lock()
	release := e.disp.timers.Release()
	e.mu.Unlock()
	if err := release(); err != nil {
		e.opts.Logger.Warn("removing replaced timer index runs failed", "err", err)
	}
	e.stats.Checkpoints.Add(1)
	e.stats.CheckpointSeconds.Observe(time.Since(start).Seconds())
	e.retain(c.st)
	return c.st, pause, nil
}

// ckptCapture is what a checkpoint captured under the locks: the state to
// record, and the jobs that make the caches it vouches for durable.
type ckptCapture struct {
	st       *checkpointState
	toSync   []interface{ Sync() error }
	keyJob   *keyindex.Job
	timerJob *timerstore.Job
	ovJob    *ovJob
}

// captureLocked captures the checkpoint's state; the caller holds gate
// exclusively and mu. It does no fsync: the jobs it prepares run later,
// without the locks.
//
// It calls openGate (which releases gate) as soon as it has read the log
// position: from then on appenders may append and wait for their fsync
// while the capture goes on, but none can apply its effect before mu is
// released, so the state captured is still exactly that of the records
// before the position. Everything captured is changed only under mu.
func (e *Engine) captureLocked(openGate func()) (*ckptCapture, error) {
	opened := false
	defer func() {
		if !opened {
			openGate()
		}
	}()
	if e.life.failed != nil {
		// No checkpoint after a fatal failure: the last durable one and
		// the log are the truth.
		return nil, e.life.failed
	}
	if err := e.retryIndexesLocked(); err != nil {
		return nil, err
	}
	c := &ckptCapture{st: &checkpointState{
		Incarnation: e.ids.incarn,
		LogPos:      uint64(e.clog.Head()),
		Frontier:    e.frontierLocked(),
		Written:     e.Now(),
		Reloc:       maps.Clone(e.segs.reloc),
		SegPending:  maps.Clone(e.segs.pending),
		SegLast:     maps.Clone(e.segs.last),
	}}
	openGate()
	opened = true
	for _, t := range e.cat.topicsByID {
		ct := checkpointTopic{ID: t.id, Name: t.name, Pending: t.pending}
		if t.fifo {
			ct.Flags |= topicFIFO
		}
		for _, q := range t.queues {
			ct.Entries = append(ct.Entries, int64(q.Len()))
			c.toSync = append(c.toSync, q)
		}
		c.st.Topics = append(c.st.Topics, ct)
	}
	c.st.Groups = e.captureGroupsLocked()
	// The key index freezes what was Put so far; its job writes it as a
	// run file outside the locks.
	var err error
	if c.keyJob, err = e.keys.Prepare(); err != nil {
		return nil, e.cacheErrLocked("key index", err)
	}
	// The timer index freezes what was Added so far, in one step whatever
	// its size; its job writes it as one run file outside the locks.
	if c.timerJob, err = e.disp.timers.Prepare(); err != nil {
		e.keys.Complete(c.keyJob, err) // its frozen entries wait for the next job
		return nil, e.cacheErrLocked("timer index", err)
	}
	c.ovJob, c.st.OverlayFiles = e.ovl.journal.prepare()
	return c, nil
}

// retryIndexesLocked writes the queue-index entries whose write failed (a
// full disk): their fire records lie before the log position a checkpoint
// captures, so they must be written first, or the checkpoint refused, so
// that recovery still replays those records.
func (e *Engine) retryIndexesLocked() error {
	retried := false
	for _, t := range e.cat.topicsByID {
		for _, q := range t.queues {
			if q.Unwritten() == 0 {
				continue
			}
			if err := q.Retry(); err != nil {
				return fmt.Errorf("queue index of topic %q: %w", t.name, err)
			}
			retried = true
		}
	}
	if retried {
		e.notifyVisibleLocked()
	}
	return nil
}

// captureGroupsLocked copies every group's progress; MaxUnackedSpan
// bounds its size.
func (e *Engine) captureGroupsLocked() []checkpointGroup {
	var out []checkpointGroup
	for _, g := range e.cons.groupsByID {
		cg := checkpointGroup{ID: g.id, Topic: g.topic.id, Name: g.name, Config: g.cfg}
		for _, gq := range g.queues {
			cq := checkpointGroupQueue{Acked: gq.acked, Attempts: map[uint64]uint32{}}
			gq.eachState(func(off uint64, attempts uint32, done bool) {
				if done {
					cq.Done = append(cq.Done, off)
				}
				if attempts != 0 {
					cq.Attempts[off] = attempts
				}
			})
			cg.Queues = append(cg.Queues, cq)
		}
		out = append(out, cg)
	}
	return out
}

// errCheckpointCut ends the timer index's job of a checkpoint that failed
// before the job ran.
var errCheckpointCut = errors.New("engine: the checkpoint failed before the timer index was written")

// writeCaches makes durable what the capture vouches for: the log up to
// its position, then the key index, overlay journal, timer buckets, queue
// indexes and their directories. A failed fsync stops the engine (fail.go).
func (e *Engine) writeCaches(c *ckptCapture) error {
	// The checkpoint tells recovery that the log holds everything before
	// LogPos, and the caches point at those records: under async flush
	// both are true only once the log is synced. A sync now covers at
	// least everything before LogPos.
	timersDone := false
	defer func() {
		if !timersDone { // its frozen entries wait for the next job
			e.mu.Lock()
			e.disp.timers.Complete(c.timerJob, errCheckpointCut)
			e.mu.Unlock()
		}
	}()
	err := e.clog.Sync()
	if err != nil {
		e.keys.Complete(c.keyJob, err) // its frozen entries wait for the next job
		return e.storageErr(fmt.Errorf("sync commit log: %w", err))
	}
	kerr := c.keyJob.Run()
	if c.st.KeyState, err = e.keys.Complete(c.keyJob, kerr); err != nil {
		return e.cacheErr("write the key index", err)
	}
	if err := c.ovJob.run(); err != nil {
		return e.fail(fmt.Errorf("write and sync the overlay journal: %w", err))
	}
	err = c.timerJob.Run()
	e.mu.Lock()
	c.st.TimerState, err = e.disp.timers.Complete(c.timerJob, err)
	e.mu.Unlock()
	timersDone = true
	if err != nil {
		return e.cacheErr("write and sync the timer index", err)
	}
	// The caches only grow after the capture; syncing more than was
	// captured is harmless.
	for _, s := range c.toSync {
		if err := s.Sync(); err != nil {
			return e.cacheErr("sync a queue index", err)
		}
	}
	dirs := []string{e.opts.Dir, path.Join(e.opts.Dir, "queues")}
	for _, t := range c.st.Topics {
		dirs = append(dirs, path.Join(e.opts.Dir, "queues", fmt.Sprint(t.ID)))
	}
	for _, d := range dirs {
		if err := e.opts.FS.SyncDir(d); err != nil {
			return e.cacheErr("sync directory "+d, err)
		}
	}
	return nil
}

func putU64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }
func getU64(b []byte) uint64    { return binary.LittleEndian.Uint64(b) }
