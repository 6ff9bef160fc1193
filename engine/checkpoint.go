package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/commitlog"
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

// checkpointer writes the checkpoints: every CheckpointInterval in a
// goroutine of its own (run), as soon as CheckpointBytes of log were
// written since the last one (logSynced), and when Close, Backup or a test
// asks (Engine.checkpoint). One at a time: gate.serial. It captures every
// part's state under the exclusive gate and mu, makes the caches durable
// outside the locks, writes the checkpoint, and then lets retention go.
type checkpointer struct {
	// What it is given: the options (read-only after Open) and the
	// lifecycle at once, since the log's syncs count towards the next
	// checkpoint from the start (logSynced); the rest by init, after
	// recovery opened the key index: the engine's locks, clock, log,
	// stats and sealers, the key index and the health record, and every
	// part whose state a checkpoint captures.
	opts   *Options
	life   *lifecycle
	mu     *sync.Mutex
	gate   *ckptGate
	clock  *clock.Broker
	log    *commitlog.Log
	stats  *Stats
	ids    *idents
	keys   *keyindex.Index
	health *healthState
	cat    *catalog
	cons   *consumers
	disp   *dispatcher
	segs   *segTable
	ovl    *overlayState
	// The log written since the last capture, which recovery after a
	// crash replays: synced counts the bytes the commit log made durable
	// since Open, mark is that count at the last capture, and asked is
	// set once logSynced asked for a checkpoint for the bytes past mark,
	// so that it asks once, not at every sync until the capture.
	synced atomic.Int64
	mark   atomic.Int64
	asked  atomic.Bool
}

func newCheckpointer(opts *Options, life *lifecycle) *checkpointer {
	return &checkpointer{opts: opts, life: life}
}

// init gives the checkpointer the rest of what it uses; Open calls it once
// recovery is done, before the checkpointer runs.
func (k *checkpointer) init(mu *sync.Mutex, gate *ckptGate, clk *clock.Broker, log *commitlog.Log, stats *Stats, ids *idents,
	keys *keyindex.Index, health *healthState, cat *catalog, cons *consumers, disp *dispatcher, segs *segTable, ovl *overlayState) {
	k.mu, k.gate, k.clock, k.log, k.stats, k.ids, k.keys, k.health = mu, gate, clk, log, stats, ids, keys, health
	k.cat, k.cons, k.disp, k.segs, k.ovl = cat, cons, disp, segs, ovl
}

// run writes a checkpoint every CheckpointInterval until the engine
// closes or fails.
func (k *checkpointer) run() {
	defer k.life.checkpointerExited()
	trickle, stop := k.trickleTicks()
	defer stop()
	for {
		if !k.waitCheckpoint(k.opts.Clock.NewTimer(k.opts.CheckpointInterval), trickle) {
			return
		}
		err := k.checkpoint()
		k.health.checkpointDone(err, k.clock.Now())
		if err != nil {
			k.opts.Logger.Error("checkpoint failed", "err", err)
			k.stats.CheckpointErrors.Add(1)
		}
	}
}

// checkpoint captures the state under the exclusive gate, makes the caches
// it covers durable, writes the checkpoint atomically, and then removes what
// the new checkpoint no longer needs: loaded timer buckets behind the
// frontier and commit-log segments past retention.
func (e *Engine) checkpoint() error { return e.ckpt.checkpoint() }

// checkpoint is Engine.checkpoint: the checkpointer's own run and the
// engine's Close and tests call it.
func (k *checkpointer) checkpoint() error {
	// One checkpoint at a time: the timer store allows one sync job.
	k.gate.serial.Lock()
	defer k.gate.serial.Unlock()
	_, _, err := k.checkpointLocked()
	return err
}

// checkpointLocked is checkpoint for a caller that holds gate.serial (Backup
// holds it across the checkpoint and its copy). It returns the state it
// made durable and how long it held the gate (sends wait that long).
func (k *checkpointer) checkpointLocked() (st *checkpointState, pause time.Duration, err error) {
	start := time.Now()
	k.gate.Lock()
	locked := time.Now()
	k.mu.Lock()
	c, err := k.captureLocked(k.gate.Unlock)
	k.mu.Unlock()
	pause = time.Since(start)
	k.stats.CheckpointGateWaitSeconds.Observe(locked.Sub(start).Seconds())
	k.stats.CheckpointCaptureSeconds.Observe((pause - locked.Sub(start)).Seconds())
	if err != nil {
		return nil, pause, err
	}
	// Everything below runs without the locks: sends, fires and acks do
	// not wait for the checkpoint's fsyncs.
	if err := k.writeCaches(c); err != nil {
		return nil, pause, err
	}
	data, err := encodeCheckpoint(c.st)
	if err != nil {
		return nil, pause, err
	}
	if err := writeFileAtomic(k.opts.FS, k.opts.Dir, checkpointFile, data); err != nil {
		return nil, pause, err
	}
	// The new checkpoint no longer lists the runs a merge replaced.
	if err := k.keys.Release(c.keyJob); err != nil {
		k.opts.Logger.Warn("removing replaced key index runs failed", "err", err)
	}
	// The files go outside the lock: unlinking a large run frees its
	// blocks, journal work no send should wait for under mu.
	k.mu.Lock()
	release := k.disp.store().Release()
	k.mu.Unlock()
	if err := release(); err != nil {
		k.opts.Logger.Warn("removing replaced timer index runs failed", "err", err)
	}
	k.stats.Checkpoints.Add(1)
	k.stats.CheckpointSeconds.Observe(time.Since(start).Seconds())
	k.retain(c.st)
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
func (k *checkpointer) captureLocked(openGate func()) (*ckptCapture, error) {
	opened := false
	defer func() {
		if !opened {
			openGate()
		}
	}()
	if err := k.life.failureLocked(); err != nil {
		// No checkpoint after a fatal failure: the last durable one and
		// the log are the truth.
		return nil, err
	}
	if err := k.retryIndexesLocked(); err != nil {
		return nil, err
	}
	c := &ckptCapture{st: &checkpointState{
		Incarnation: k.ids.incarn,
		LogPos:      uint64(k.log.Head()),
		Frontier:    k.disp.frontierLocked(),
		Written:     k.clock.Now(),
	}}
	c.st.Reloc, c.st.SegPending, c.st.SegLast = k.segs.captureLocked()
	k.markCaptured()
	openGate()
	opened = true
	for t := range k.cat.topicsLocked() {
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
	c.st.Groups = k.captureGroupsLocked()
	// The key index freezes what was Put so far; its job writes it as a
	// run file outside the locks.
	var err error
	if c.keyJob, err = k.keys.Prepare(); err != nil {
		return nil, k.life.cacheErrLocked("key index", err)
	}
	// The timer index freezes what was Added so far, in one step whatever
	// its size; its job writes it as one run file outside the locks.
	if c.timerJob, err = k.disp.store().Prepare(); err != nil {
		k.keys.Complete(c.keyJob, err) // its frozen entries wait for the next job
		return nil, k.life.cacheErrLocked("timer index", err)
	}
	c.ovJob, c.st.OverlayFiles = k.ovl.prepareJournal()
	return c, nil
}

// retryIndexesLocked writes the queue-index entries whose write failed (a
// full disk): their fire records lie before the log position a checkpoint
// captures, so they must be written first, or the checkpoint refused, so
// that recovery still replays those records.
func (k *checkpointer) retryIndexesLocked() error {
	retried := false
	for t := range k.cat.topicsLocked() {
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
		k.life.notifyVisibleLocked()
	}
	return nil
}

// captureGroupsLocked copies every group's progress; MaxUnackedSpan
// bounds its size.
func (k *checkpointer) captureGroupsLocked() []checkpointGroup {
	var out []checkpointGroup
	k.cons.eachLocked(func(g *group) {
		cg := checkpointGroup{ID: g.id, Topic: g.topic.id, Name: g.name, Config: g.cfg, Paused: g.paused}
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
	})
	return out
}

// errCheckpointCut ends the timer index's job of a checkpoint that failed
// before the job ran.
var errCheckpointCut = errors.New("engine: the checkpoint failed before the timer index was written")

// writeCaches makes durable what the capture vouches for: the log up to
// its position, then the key index, overlay journal, timer buckets, queue
// indexes and their directories. A failed fsync stops the engine (fail.go).
func (k *checkpointer) writeCaches(c *ckptCapture) error {
	// The checkpoint tells recovery that the log holds everything before
	// LogPos, and the caches point at those records: under async flush
	// both are true only once the log is synced. A sync now covers at
	// least everything before LogPos.
	timersDone := false
	defer func() {
		if !timersDone { // its frozen entries wait for the next job
			k.mu.Lock()
			k.disp.store().Complete(c.timerJob, errCheckpointCut)
			k.mu.Unlock()
		}
	}()
	err := k.log.Sync()
	if err != nil {
		k.keys.Complete(c.keyJob, err) // its frozen entries wait for the next job
		return k.life.storageErr(fmt.Errorf("sync commit log: %w", err))
	}
	kerr := c.keyJob.Run()
	if c.st.KeyState, err = k.keys.Complete(c.keyJob, kerr); err != nil {
		return k.life.cacheErr("write the key index", err)
	}
	if err := c.ovJob.run(); err != nil {
		return k.life.fail(fmt.Errorf("write and sync the overlay journal: %w", err))
	}
	err = c.timerJob.Run()
	k.mu.Lock()
	c.st.TimerState, err = k.disp.store().Complete(c.timerJob, err)
	k.mu.Unlock()
	timersDone = true
	if err != nil {
		return k.life.cacheErr("write and sync the timer index", err)
	}
	// The caches only grow after the capture; syncing more than was
	// captured is harmless.
	for _, s := range c.toSync {
		if err := s.Sync(); err != nil {
			return k.life.cacheErr("sync a queue index", err)
		}
	}
	dirs := []string{k.opts.Dir, path.Join(k.opts.Dir, "queues")}
	for _, t := range c.st.Topics {
		dirs = append(dirs, path.Join(k.opts.Dir, "queues", fmt.Sprint(t.ID)))
	}
	for _, d := range dirs {
		if err := k.opts.FS.SyncDir(d); err != nil {
			return k.life.cacheErr("sync directory "+d, err)
		}
	}
	return nil
}

func putU64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }
func getU64(b []byte) uint64    { return binary.LittleEndian.Uint64(b) }
