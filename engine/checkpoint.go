package engine

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path"
	"time"

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
	for {
		t := e.opts.Clock.NewTimer(e.opts.CheckpointInterval)
		select {
		case <-e.life.done:
			t.Stop()
			return
		case <-t.C():
		case <-e.life.ckptNow:
			t.Stop()
		case <-e.life.failedCh:
			// No checkpoint after a fatal failure (fail.go).
			t.Stop()
			return
		}
		if err := e.checkpoint(); err != nil {
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
	e.ckptMu.Lock()
	defer e.ckptMu.Unlock()
	start := time.Now()
	e.gate.Lock()
	e.mu.Lock()
	if e.life.failed != nil {
		// No checkpoint after a fatal failure: the last durable one and
		// the log are the truth.
		err := e.life.failed
		e.mu.Unlock()
		e.gate.Unlock()
		return err
	}
	// An index write that failed (a full disk) left entries whose fire
	// records lie before the log position captured below: write them now,
	// or refuse, so that recovery still replays those records.
	retried := false
	for _, t := range e.cat.topicsByID {
		for _, q := range t.queues {
			if q.Unwritten() == 0 {
				continue
			}
			if err := q.Retry(); err != nil {
				e.mu.Unlock()
				e.gate.Unlock()
				return fmt.Errorf("queue index of topic %q: %w", t.name, err)
			}
			retried = true
		}
	}
	if retried {
		e.notifyVisibleLocked()
	}
	st := &checkpointState{
		Incarnation: e.ids.incarn,
		LogPos:      uint64(e.clog.Head()),
		Frontier:    e.frontierLocked(),
		SegPending:  make(map[uint64]int64, len(e.segs.pending)),
		SegLast:     make(map[uint64]int64, len(e.segs.last)),
		Written:     e.Now(),
	}
	st.Reloc = make(map[uint64]uint64, len(e.segs.reloc))
	for k, v := range e.segs.reloc {
		st.Reloc[k] = v
	}
	for k, v := range e.segs.pending {
		st.SegPending[k] = v
	}
	for k, v := range e.segs.last {
		st.SegLast[k] = v
	}
	var toSync []interface{ Sync() error }
	for _, t := range e.cat.topicsByID {
		ct := checkpointTopic{ID: t.id, Name: t.name, Pending: t.pending}
		if t.fifo {
			ct.Flags |= topicFIFO
		}
		for _, q := range t.queues {
			ct.Entries = append(ct.Entries, int64(q.Len()))
			toSync = append(toSync, q)
		}
		st.Topics = append(st.Topics, ct)
	}
	for _, g := range e.cons.groupsByID {
		cg := checkpointGroup{ID: g.id, Topic: g.topic.id, Name: g.name, Config: g.cfg}
		for _, gq := range g.queues {
			cq := checkpointGroupQueue{Acked: gq.acked, Attempts: make(map[uint64]uint32, len(gq.attempts))}
			for off := range gq.done {
				cq.Done = append(cq.Done, off)
			}
			for off, a := range gq.attempts {
				cq.Attempts[off] = a
			}
			cg.Queues = append(cg.Queues, cq)
		}
		st.Groups = append(st.Groups, cg)
	}
	// The key index freezes what was Put so far; its job writes it as a
	// run file outside the locks.
	keyJob, err := e.keys.Prepare()
	if err != nil {
		e.mu.Unlock()
		e.gate.Unlock()
		return e.cacheErr("key index", err)
	}
	bucketSync := e.disp.timers.PrepareSync()
	ovJob, ovSizes := e.ovl.journal.prepare()
	st.OverlayFiles = ovSizes
	st.TimerBuckets = e.disp.timers.Sizes()
	e.mu.Unlock()
	e.gate.Unlock()
	// Everything below runs without the locks: sends, fires and acks do
	// not wait for the checkpoint's fsyncs.
	//
	// The checkpoint tells recovery that the log holds everything before
	// LogPos, and the timer buckets synced next point at those records:
	// under async flush both are true only once the log is synced. A sync
	// now covers at least everything before LogPos.
	err = e.clog.Sync()
	if err != nil {
		e.mu.Lock()
		e.disp.timers.Complete(bucketSync, err)
		e.mu.Unlock()
		e.keys.Complete(keyJob, err) // its frozen entries wait for the next job
		return e.storageErr(fmt.Errorf("sync commit log: %w", err))
	}
	kerr := keyJob.Run()
	if st.KeyState, err = e.keys.Complete(keyJob, kerr); err != nil {
		return e.cacheErr("write the key index", err)
	}
	if err := ovJob.run(); err != nil {
		return e.fail(fmt.Errorf("write and sync the overlay journal: %w", err))
	}
	// There may be thousands of bucket files.
	err = bucketSync.Run(4)
	e.mu.Lock()
	e.disp.timers.Complete(bucketSync, err)
	e.mu.Unlock()
	if err != nil {
		return e.cacheErr("write and sync timer buckets", err)
	}
	// The caches only grow after the capture; syncing more than was
	// captured is harmless.
	for _, s := range toSync {
		if err := s.Sync(); err != nil {
			return e.cacheErr("sync a queue or key index", err)
		}
	}
	dirs := []string{e.opts.Dir, path.Join(e.opts.Dir, "queues")}
	for _, t := range st.Topics {
		dirs = append(dirs, path.Join(e.opts.Dir, "queues", fmt.Sprint(t.ID)))
	}
	for _, d := range dirs {
		if err := e.opts.FS.SyncDir(d); err != nil {
			return e.cacheErr("sync directory "+d, err)
		}
	}
	data, err := encodeCheckpoint(st)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(e.opts.FS, e.opts.Dir, checkpointFile, data); err != nil {
		return err
	}
	// The new checkpoint no longer lists the runs a merge replaced.
	if err := e.keys.Release(keyJob); err != nil {
		e.opts.Logger.Warn("removing replaced key index runs failed", "err", err)
	}
	e.stats.Checkpoints.Add(1)
	e.stats.CheckpointSeconds.Observe(time.Since(start).Seconds())
	e.retain(st)
	return nil
}

func putU64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }
func getU64(b []byte) uint64    { return binary.LittleEndian.Uint64(b) }
