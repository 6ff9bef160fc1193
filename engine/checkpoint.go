package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"path"
	"time"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/keyindex"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/timerstore"
	"github.com/hourglass-mq/hourglass/timewheel"
	"github.com/hourglass-mq/hourglass/vfs"
)

// checkpointFile is the name of the checkpoint in the data directory. Its
// content is "HGCK", a version byte, a gob-encoded checkpointState and a
// CRC32C of everything before it; it is replaced atomically.
const checkpointFile = "CHECKPOINT"

const checkpointVersion = 1

// checkpointState is what recovery starts from. See the package doc for
// the invariants.
type checkpointState struct {
	Incarnation uint32
	LogPos      uint64 // replay starts here
	Frontier    int64  // every timer registered before LogPos and due at or before it is visible
	Topics      []checkpointTopic
	Groups      []checkpointGroup
	// OverlayFiles is the synced length of each overlay journal file, by
	// segment base (see overlay.go).
	OverlayFiles map[uint64]int64
	KeyBytes     int64 // synced length of the key index
	// Reloc maps moved messages (by identity) to their current copy.
	Reloc map[uint64]uint64
	// TimerBuckets is the synced length of each timer bucket file.
	TimerBuckets map[int64]int64
	SegPending   map[uint64]int64
	SegLast      map[uint64]int64
	Written      int64 // Unix ms
}

type checkpointTopic struct {
	ID      uint32
	Name    string
	Flags   uint8
	Entries []int64 // synced entries per queue index
	Pending int64
}

type checkpointGroup struct {
	ID, Topic uint32
	Name      string
	Config    GroupConfig
	Queues    []checkpointGroupQueue
}

type checkpointGroupQueue struct {
	Acked    uint64
	Done     []uint64
	Attempts map[uint64]uint32
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func encodeCheckpoint(st *checkpointState) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("HGCK")
	buf.WriteByte(checkpointVersion)
	if err := gob.NewEncoder(&buf).Encode(st); err != nil {
		return nil, err
	}
	return binary.LittleEndian.AppendUint32(buf.Bytes(), crc32.Checksum(buf.Bytes(), crcTable)), nil
}

func decodeCheckpoint(b []byte) (*checkpointState, error) {
	if len(b) < 9 || string(b[:4]) != "HGCK" || b[4] != checkpointVersion {
		return nil, errors.New("not a checkpoint of this version")
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, crcTable) != sum {
		return nil, errors.New("checkpoint checksum mismatch")
	}
	st := &checkpointState{}
	if err := gob.NewDecoder(bytes.NewReader(body[5:])).Decode(st); err != nil {
		return nil, err
	}
	return st, nil
}

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
	defer close(e.ckptDone)
	for {
		t := e.opts.Clock.NewTimer(e.opts.CheckpointInterval)
		select {
		case <-e.done:
			t.Stop()
			return
		case <-t.C():
		case <-e.ckptNow:
			t.Stop()
		case <-e.failedCh:
			// No checkpoint after a fatal failure (fail.go).
			t.Stop()
			return
		}
		if err := e.checkpoint(); err != nil {
			e.log.Error("checkpoint failed", "err", err)
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
	// Write the buffered key entries before taking the locks, so that the
	// capture below writes only what arrives meanwhile.
	if err := e.keys.Flush(); err != nil {
		e.log.Warn("key index write failed; the checkpoint will retry", "err", err)
	}
	e.gate.Lock()
	e.mu.Lock()
	if e.failed != nil {
		// No checkpoint after a fatal failure: the last durable one and
		// the log are the truth.
		err := e.failed
		e.mu.Unlock()
		e.gate.Unlock()
		return err
	}
	// An index write that failed (a full disk) left entries whose fire
	// records lie before the log position captured below: write them now,
	// or refuse, so that recovery still replays those records.
	retried := false
	for _, t := range e.topicsByID {
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
		Incarnation: e.incarn,
		LogPos:      uint64(e.clog.Head()),
		Frontier:    e.frontierLocked(),
		SegPending:  make(map[uint64]int64, len(e.segPending)),
		SegLast:     make(map[uint64]int64, len(e.segLast)),
		Written:     e.Now(),
	}
	st.Reloc = make(map[uint64]uint64, len(e.reloc))
	for k, v := range e.reloc {
		st.Reloc[k] = v
	}
	for k, v := range e.segPending {
		st.SegPending[k] = v
	}
	for k, v := range e.segLast {
		st.SegLast[k] = v
	}
	var toSync []interface{ Sync() error }
	for _, t := range e.topicsByID {
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
	for _, g := range e.groupsByID {
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
	// Most key entries were written before the locks were taken (see
	// above); this writes the few that came since.
	e.keys.Flush()
	if n := e.keys.Unwritten(); n > 0 {
		// The write failed (and was logged). Recovery reads keys of records
		// before LogPos only from the file: do not pass them.
		e.mu.Unlock()
		e.gate.Unlock()
		return fmt.Errorf("key index: %d entries could not be written", n)
	}
	st.KeyBytes = e.keys.Len()
	toSync = append(toSync, e.keys)
	bucketSync := e.timers.PrepareSync()
	ovJob, ovSizes := e.ovj.prepare()
	st.OverlayFiles = ovSizes
	st.TimerBuckets = e.timers.Sizes()
	e.mu.Unlock()
	e.gate.Unlock()
	// Everything below runs without the locks: sends, fires and acks do
	// not wait for the checkpoint's fsyncs.
	//
	// The checkpoint tells recovery that the log holds everything before
	// LogPos, and the timer buckets synced next point at those records:
	// under async flush both are true only once the log is synced. A sync
	// now covers at least everything before LogPos.
	err := e.clog.Sync()
	if err != nil {
		e.mu.Lock()
		e.timers.Complete(bucketSync, err)
		e.mu.Unlock()
		return e.storageErr(fmt.Errorf("sync commit log: %w", err))
	}
	if err := ovJob.run(); err != nil {
		return e.fail(fmt.Errorf("write and sync the overlay journal: %w", err))
	}
	// There may be thousands of bucket files.
	err = bucketSync.Run(4)
	e.mu.Lock()
	e.timers.Complete(bucketSync, err)
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
		if err := e.fs.SyncDir(d); err != nil {
			return e.cacheErr("sync directory "+d, err)
		}
	}
	data, err := encodeCheckpoint(st)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(e.fs, e.opts.Dir, checkpointFile, data); err != nil {
		return err
	}
	e.stats.Checkpoints.Add(1)
	e.stats.CheckpointSeconds.Observe(time.Since(start).Seconds())
	e.retain(st)
	return nil
}

// retain removes what the durable checkpoint st no longer needs.
func (e *Engine) retain(st *checkpointState) {
	e.mu.Lock()
	// Loaded buckets that end at or before the frontier hold only timers
	// that are visible, or that recovery re-adds from the log after LogPos.
	limit := min(st.Frontier, e.loadedUntil)
	_, err := e.timers.Remove(limit)
	if err != nil {
		e.log.Error("timer bucket removal failed", "err", err)
	}
	// A segment may go when replay no longer needs it, no pending message
	// is in it, and its newest visible message is older than Retention.
	segs := e.clog.Segments()
	cut := commitlog.Pos(0)
	now := e.Now()
	var pinned *commitlog.Segment // the first segment kept only by pending messages
	for i, s := range segs {
		if i == len(segs)-1 || uint64(s.End) > st.LogPos ||
			now-e.segLast[uint64(s.Base)] < e.opts.Retention.Milliseconds() {
			break
		}
		if n := e.segPending[uint64(s.Base)]; n > 0 {
			if n <= int64(e.opts.CompactMaxPending) {
				pinned = &segs[i]
			}
			break
		}
		cut = s.End
	}
	e.mu.Unlock()
	if pinned != nil {
		// Move its pending messages forward; a later retain deletes it.
		n, err := e.compact(*pinned)
		if err != nil {
			e.log.Error("compaction failed", "segment", pinned.Name, "err", err)
		} else if n > 0 {
			e.log.Info("compacted pending messages out of an old segment", "segment", pinned.Name, "moved", n)
		}
	}
	if cut == 0 {
		return
	}
	n, err := e.clog.DeleteBefore(cut)
	if err != nil {
		e.log.Error("segment removal failed", "err", err)
		return
	}
	e.mu.Lock()
	for _, s := range segs[:n] {
		delete(e.segPending, uint64(s.Base))
		delete(e.segLast, uint64(s.Base))
		if err := e.ovj.remove(uint64(s.Base)); err != nil {
			e.log.Error("overlay journal removal failed", "segment", s.Name, "err", err)
		}
	}
	for p := range e.overlay {
		if e.physLocked(p) < uint64(cut) {
			delete(e.overlay, p)
		}
	}
	e.keys.DropBefore(uint64(cut))
	for orig, p := range e.reloc {
		if p < uint64(cut) {
			delete(e.reloc, orig)
		}
	}
	e.segBases = nil
	e.mu.Unlock()
	e.stats.SegmentsDeleted.Add(uint64(n))
	e.log.Info("retention removed segments", "segments", n, "before", cut)
}

// recover loads the checkpoint, truncates the caches to it, replays the
// log after it and sets the wheel up at the fire frontier.
func (e *Engine) recover() error {
	st := &checkpointState{LogPos: uint64(e.clog.Start()), Frontier: math.MinInt64 / 2}
	b, err := readAll(e.fs, path.Join(e.opts.Dir, checkpointFile))
	switch {
	case err == nil:
		if st, err = decodeCheckpoint(b); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		if st.Incarnation != e.incarn {
			return fmt.Errorf("checkpoint belongs to incarnation %08x, the directory is %08x", st.Incarnation, e.incarn)
		}
		if st.LogPos < uint64(e.clog.Start()) || st.LogPos > uint64(e.clog.Head()) {
			return fmt.Errorf("checkpoint log position %d is outside the log [%d, %d]", st.LogPos, e.clog.Start(), e.clog.Head())
		}
	case vfs.IsNotExist(err):
	default:
		return err
	}
	if e.ovj, err = newOverlayJournal(e.fs, e.opts.Dir); err != nil {
		return err
	}
	if err := e.ovj.load(st.OverlayFiles, uint64(e.clog.Start()), func(pos uint64, ov overlayEntry) { e.overlay[pos] = &ov }); err != nil {
		return err
	}
	for k, v := range st.SegPending {
		e.segPending[k] = v
	}
	for k, v := range st.Reloc {
		e.reloc[k] = v
	}
	for k, v := range st.SegLast {
		e.segLast[k] = v
	}
	for _, t := range st.Topics {
		tp, err := e.applyTopicLocked(t.ID, len(t.Entries), t.Flags, t.Name, t.Entries)
		if err != nil {
			return err
		}
		tp.pending = t.Pending
	}
	for _, cg := range st.Groups {
		t := e.topicsByID[cg.Topic]
		if t == nil {
			return fmt.Errorf("checkpoint group %q names unknown topic %d", cg.Name, cg.Topic)
		}
		g := e.applyGroupLocked(cg.ID, t, cg.Config, cg.Name)
		for i, cq := range cg.Queues {
			if i >= len(g.queues) {
				break
			}
			gq := g.queues[i]
			gq.acked, gq.next = cq.Acked, cq.Acked
			for _, off := range cq.Done {
				gq.done[off] = true
			}
			for off, a := range cq.Attempts {
				gq.attempts[off] = a
			}
		}
	}
	if err := e.markVisibleAboveFrontier(st.Frontier); err != nil {
		return err
	}
	if err := e.openKeys(st.KeyBytes, st.LogPos); err != nil {
		return err
	}
	if e.timers, err = timerstore.Open(e.fs, path.Join(e.opts.Dir, "timers"), e.opts.BucketWidth.Milliseconds()); err != nil {
		return err
	}
	if err := e.checkTimers(st); err != nil {
		return err
	}
	// Replay: every timer goes to the buckets (loadedUntil is -inf).
	e.loadedUntil = math.MinInt64
	e.lastAdvance = math.MinInt64
	minDue := int64(math.MaxInt64)
	replayed := 0
	err = e.clog.Scan(commitlog.Pos(st.LogPos), func(pos commitlog.Pos, rec commitlog.Record) error {
		replayed++
		return e.replayLocked(uint64(pos), rec, &minDue)
	})
	if err != nil {
		return fmt.Errorf("replay from %d: %w", st.LogPos, err)
	}
	e.recL, e.recF = st.LogPos, st.Frontier
	// From now on timer entries are written only by the checkpoint's sync
	// job, outside the engine's lock; a large buffer asks for a checkpoint
	// early (addTimerLocked).
	e.timers.ManualFlush = true
	// The broker clock must not run backwards across the restart: raise it
	// to the latest time the durable state shows it had reached.
	e.clock.Raise(max(st.Written, st.Frontier, e.replayHWM))
	start := st.Frontier
	if minDue-1 < start {
		start = minDue - 1
	}
	if start < 0 {
		start = 0
	}
	e.wheel = timewheel.New[timerRef](1, 512, start)
	e.lastAdvance = start
	e.loadedUntil = e.timers.BucketOf(start + 1)
	e.tokensAt = e.Now()
	e.tokens = max(float64(e.opts.DispatchBatch), float64(e.opts.DispatchRate)/100)
	e.stats.Replayed.Store(uint64(replayed))
	var pending int64
	for _, n := range e.segPending {
		pending += n
	}
	e.stats.Pending.Store(pending)
	return nil
}

// markVisibleAboveFrontier adds to firedSince the messages the queue
// indexes already hold that are due after the checkpoint's frontier. The
// frontier is the earliest due time still waiting for dispatch, but later
// ones may have fired before it: the part of a herd the dispatch rate let
// through, or everything fired while a late arrival (due at or before the
// wheel's time) waited. Their bucket entries are not behind the frontier,
// so without this they would fire a second time.
//
// Visible times never decrease along a queue index, so each is read
// backwards only until an entry that became visible at or before the
// frontier: that one and all before it were due at or before it too.
func (e *Engine) markVisibleAboveFrontier(frontier int64) error {
	const chunk = 1024
	for _, t := range e.topicsByID {
		for _, q := range t.queues {
		scan:
			for end := q.Len(); end > 0; {
				from := end - min(end, chunk)
				es, err := q.Read(from, int(end-from), end)
				if err != nil {
					return fmt.Errorf("topic %q: %w", t.name, err)
				}
				for i := len(es) - 1; i >= 0; i-- {
					if es[i].Visible <= frontier {
						break scan
					}
					if es[i].Due > frontier {
						e.firedSince[es[i].Pos] = true
						e.firedSinceTo = max(e.firedSinceTo, es[i].Due+1)
					}
				}
				end = from
			}
		}
	}
	return nil
}

// replayLocked applies one record after the checkpoint. Caller holds no
// locks (recovery is single-threaded), the name says what it touches.
func (e *Engine) replayLocked(pos uint64, rec commitlog.Record, minDue *int64) error {
	switch rec.Type {
	case recTopic:
		id, queues, flags, name, err := decodeTopic(rec.Payload)
		if err != nil {
			return err
		}
		if _, ok := e.topicsByID[id]; !ok {
			if _, err := e.applyTopicLocked(id, queues, flags, name, nil); err != nil {
				return err
			}
		}
	case recMessage:
		s, err := message.Decode(rec.Payload)
		if err != nil {
			return fmt.Errorf("message at %d: %w", pos, err)
		}
		t := e.topicsByName[s.Topic]
		if t == nil {
			return fmt.Errorf("message at %d names unknown topic %q", pos, s.Topic)
		}
		e.applyMessageLocked(pos, s, t)
		*minDue = min(*minDue, s.Due)
		e.replayHWM = max(e.replayHWM, s.Sent)
	case recCancel, recReschedule:
		p, due, err := decodePos(rec.Payload)
		if err != nil {
			return err
		}
		s, _, err := e.readStored(p)
		if err != nil {
			return fmt.Errorf("change at %d of %d: %w", pos, p, err)
		}
		ov := e.overlay[p]
		if ov == nil {
			ov = &overlayEntry{Due: s.Due}
			e.overlay[p] = ov
		}
		if rec.Type == recCancel {
			ov.Cancelled = true
			e.journalLocked(p)
			e.segPending[e.segOfLocked(e.physLocked(p))]--
			if t := e.topicsByName[s.Topic]; t != nil {
				t.pending--
			}
			return nil
		}
		t := e.topicsByName[s.Topic]
		if t == nil {
			return fmt.Errorf("reschedule at %d of %d names unknown topic %q", pos, p, s.Topic)
		}
		ov.Due = due
		e.journalLocked(p)
		*minDue = min(*minDue, due)
		e.addTimerLocked(timerRef{pos: p, due: due, topic: t.id, queue: uint16(s.Queue)})
	case recFire:
		visible, es, err := decodeFire(rec.Payload)
		if err != nil {
			return err
		}
		for _, fe := range es {
			if e.overlay[fe.pos] == nil {
				e.firedSince[fe.pos] = true
				e.firedSinceTo = max(e.firedSinceTo, fe.due+1)
			}
		}
		e.applyFireLocked(visible, es, false)
		e.replayHWM = max(e.replayHWM, visible)
	case recMoved:
		if len(rec.Payload) < 8 {
			return errBadPayload
		}
		e.applyMovedLocked(binary.LittleEndian.Uint64(rec.Payload), pos)
	case recGroup:
		id, tid, cfg, name, err := decodeGroup(rec.Payload)
		if err != nil {
			return err
		}
		t := e.topicsByID[tid]
		if t == nil {
			return fmt.Errorf("group at %d names unknown topic %d", pos, tid)
		}
		if e.groupsByID[id] == nil {
			e.applyGroupLocked(id, t, cfg, name)
		}
	case recAck, recAttempt:
		gid, items, err := decodeProgress(rec.Type, rec.Payload)
		if err != nil {
			return err
		}
		g := e.groupsByID[gid]
		if g == nil {
			return fmt.Errorf("progress at %d names unknown group %d", pos, gid)
		}
		for _, it := range items {
			if int(it.queue) >= len(g.queues) {
				return fmt.Errorf("progress at %d names queue %d of %d", pos, it.queue, len(g.queues))
			}
			gq := g.queues[it.queue]
			if rec.Type == recAck {
				gq.markDone(it.offset)
			} else if it.offset >= gq.acked && !gq.done[it.offset] && it.attempt > gq.attempts[it.offset] {
				gq.attempts[it.offset] = it.attempt
			}
		}
	default:
		// Unknown types are written by a newer version; refuse rather than
		// silently drop state.
		return fmt.Errorf("record at %d has unknown type %d", pos, rec.Type)
	}
	return nil
}

// openKeys opens the key index, checks it against the checkpoint and cuts
// it to the checkpointed length. A damaged index is rebuilt from the log:
// every retained message record before the checkpoint's position (replay
// adds the keys of what follows).
func (e *Engine) openKeys(keep int64, logPos uint64) error {
	name := path.Join(e.opts.Dir, "keys.idx")
	start := uint64(e.clog.Start())
	x, err := keyindex.Open(e.fs, name, keep, start, e.physLocked)
	if err == nil {
		e.keys = x
		return nil
	}
	if !errors.Is(err, keyindex.ErrCorrupt) {
		return err
	}
	e.log.Warn("key index damaged; rebuilding it from the commit log", "err", err)
	e.stats.CacheRebuilds.Add(1)
	if x, err = keyindex.Open(e.fs, name, 0, start, e.physLocked); err != nil {
		return err
	}
	e.keys = x
	err = e.clog.Scan(e.clog.Start(), func(pos commitlog.Pos, rec commitlog.Record) error {
		if uint64(pos) >= logPos {
			return errStopScan
		}
		orig, payload := uint64(pos), rec.Payload
		switch rec.Type {
		case recMessage:
		case recMoved:
			if len(payload) < 8 {
				return errBadPayload
			}
			orig, payload = binary.LittleEndian.Uint64(payload), payload[8:]
		default:
			return nil
		}
		s, err := message.Decode(payload)
		if err != nil {
			return fmt.Errorf("message at %d: %w", pos, err)
		}
		if s.Key != "" {
			e.keys.Put(keyHash(s.Topic, s.Key), orig)
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopScan) {
		return fmt.Errorf("rebuild the key index from the log: %w", err)
	}
	return nil
}

func putU64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }
func getU64(b []byte) uint64    { return binary.LittleEndian.Uint64(b) }

// errStopScan ends a log scan early.
var errStopScan = errors.New("engine: stop scan")

// checkTimers checks the timer buckets against the checkpoint: every file
// it recorded must be there, at least as long, with every entry passing its
// checksum. Damage is not trusted and not fatal: the buckets are a cache,
// so they are rebuilt from the log (a scan of every retained record before
// the checkpoint's position; replay adds what follows it).
func (e *Engine) checkTimers(st *checkpointState) error {
	err := e.timers.Trim(st.TimerBuckets)
	if err == nil {
		err = e.timers.Verify(st.TimerBuckets)
	}
	if err == nil {
		return nil
	}
	if !errors.Is(err, timerstore.ErrCorrupt) {
		return fmt.Errorf("timer buckets: %w", err)
	}
	e.log.Warn("timer index damaged; rebuilding it from the commit log", "err", err)
	if err := e.timers.Reset(); err != nil {
		return fmt.Errorf("reset the damaged timer index: %w", err)
	}
	e.stats.CacheRebuilds.Add(1)
	err = e.clog.Scan(e.clog.Start(), func(pos commitlog.Pos, rec commitlog.Record) error {
		if uint64(pos) >= st.LogPos {
			return errStopScan
		}
		orig, payload := uint64(pos), rec.Payload
		switch rec.Type {
		case recMessage:
		case recMoved:
			if len(payload) < 8 {
				return errBadPayload
			}
			orig, payload = binary.LittleEndian.Uint64(payload), payload[8:]
		default:
			return nil
		}
		s, err := message.Decode(payload)
		if err != nil {
			return fmt.Errorf("message at %d: %w", pos, err)
		}
		t := e.topicsByName[s.Topic]
		if t == nil {
			return fmt.Errorf("message at %d names unknown topic %q", pos, s.Topic)
		}
		due := s.Due
		if ov := e.overlay[orig]; ov != nil {
			if ov.Cancelled || ov.Fired {
				return nil
			}
			due = ov.Due
		}
		// Entries due at or before the frontier are filtered as visible when
		// loaded, like any other (validLocked).
		return e.timers.Add(timerstore.Entry{Due: due, Pos: orig, Topic: t.id, Queue: uint16(s.Queue), Kind: kindMessage})
	})
	if err != nil && !errors.Is(err, errStopScan) {
		return fmt.Errorf("rebuild the timer index from the log: %w", err)
	}
	return nil
}
