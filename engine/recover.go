package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"path"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/keyindex"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/timerstore"
	"github.com/hourglass-mq/hourglass/timewheel"
	"github.com/hourglass-mq/hourglass/vfs"
)

// recover loads the checkpoint, truncates the caches to it, replays the
// log after it and sets the wheel up at the fire frontier.
func (e *Engine) recover() error {
	st, err := e.loadCheckpoint()
	if err != nil {
		return err
	}
	if err := e.restoreState(st); err != nil {
		return err
	}
	if err := e.markVisibleAboveFrontier(st.Frontier); err != nil {
		return err
	}
	if err := e.openKeys(st.KeyState, st.LogPos); err != nil {
		return err
	}
	if err := e.openTimers(st); err != nil {
		return err
	}
	// Replay: every timer goes to the buckets (loadedUntil is -inf).
	e.disp.loadedUntil = math.MinInt64
	e.disp.lastAdvance = math.MinInt64
	minDue := int64(math.MaxInt64)
	replayed := 0
	err = e.clog.Scan(commitlog.Pos(st.LogPos), func(pos commitlog.Pos, rec commitlog.Record) error {
		replayed++
		if err := e.replayLocked(uint64(pos), rec, &minDue); err != nil {
			return err
		}
		e.spillTimers()
		return nil
	})
	if bad, ok := commitlog.DamagedAt(err); ok {
		return fmt.Errorf("replay from %d: %s holds damage at log position %d, after the checkpoint, which recovery must read: "+
			"this is media damage, not a torn write, and nothing was changed; stop here and run `hourglass repair --data-dir %s`, "+
			"which quarantines the damaged bytes and keeps every record after them (a message in them is lost, and a fire, ack "+
			"or change in them is not applied: its messages fire again, are redelivered or keep their old due time): %w",
			st.LogPos, e.segmentOf(uint64(bad)), bad, e.opts.Dir, err)
	}
	if err != nil {
		return fmt.Errorf("replay from %d: %w", st.LogPos, err)
	}
	e.stats.Replayed.Store(uint64(replayed))
	e.startDispatch(st, minDue)
	e.checkForecastLocked()
	return nil
}

// loadCheckpoint reads the checkpoint, or returns the start state of a
// directory that has none.
func (e *Engine) loadCheckpoint() (*checkpointState, error) {
	st := &checkpointState{LogPos: uint64(e.clog.Start()), Frontier: math.MinInt64 / 2}
	b, err := readAll(e.opts.FS, path.Join(e.opts.Dir, checkpointFile))
	switch {
	case vfs.IsNotExist(err):
		return st, nil
	case err != nil:
		return nil, err
	}
	if st, err = decodeCheckpoint(b); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if st.Incarnation != e.ids.incarn {
		return nil, fmt.Errorf("checkpoint belongs to incarnation %08x, the directory is %08x", st.Incarnation, e.ids.incarn)
	}
	if st.LogPos < uint64(e.clog.Start()) || st.LogPos > uint64(e.clog.Head()) {
		return nil, fmt.Errorf("checkpoint log position %d is outside the log [%d, %d]: the log is older than the checkpoint (a directory copied while its broker ran, or log segments lost); restore a backup (hourglass restore), or see hourglass check", st.LogPos, e.clog.Start(), e.clog.Head())
	}
	return st, nil
}

// restoreState puts back what the checkpoint recorded: the overlay (from
// its journal), per-segment accounting, topics and groups.
func (e *Engine) restoreState(st *checkpointState) error {
	var err error
	if e.ovl.journal, err = newOverlayJournal(e.opts.FS, e.opts.Dir); err != nil {
		return err
	}
	if err := e.ovl.journal.load(st.OverlayFiles, uint64(e.clog.Start()), func(pos uint64, ov overlayEntry) { e.ovl.entries[pos] = &ov }); err != nil {
		return err
	}
	maps.Copy(e.segs.pending, st.SegPending)
	maps.Copy(e.segs.reloc, st.Reloc)
	maps.Copy(e.segs.last, st.SegLast)
	for _, t := range st.Topics {
		tp, err := e.applyTopicLocked(t.ID, len(t.Entries), t.Flags, t.Name, t.Entries)
		if err != nil {
			return err
		}
		tp.pending = t.Pending
	}
	for _, cg := range st.Groups {
		t := e.cat.topicsByID[cg.Topic]
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
				gq.markDone(off)
			}
			for off, n := range cq.Attempts {
				if !gq.isDone(off) {
					gq.setAttempts(off, n)
				}
			}
		}
	}
	return nil
}

// startDispatch sets the dispatcher up after replay: the recovery filter,
// the broker clock's floor, and the wheel at the fire frontier (or just
// before the earliest replayed due time).
func (e *Engine) startDispatch(st *checkpointState, minDue int64) {
	e.disp.recL, e.disp.recF = st.LogPos, st.Frontier
	// The broker clock must not run backwards across the restart: raise it
	// to the latest time the durable state shows it had reached.
	e.clock.Raise(max(st.Written, st.Frontier, e.disp.replayHWM))
	start := max(0, min(st.Frontier, minDue-1))
	e.disp.wheel = timewheel.New[timerRef](1, 512, start)
	e.disp.lastAdvance = start
	e.disp.leases = timewheel.New[timerRef](1, 512, start)
	e.disp.leaseAt = start
	e.disp.loadedUntil = e.disp.timers.BucketOf(start + 1)
	e.disp.tokensAt = e.Now()
	e.disp.tokens = e.rateBurst()
	var pending int64
	for _, n := range e.segs.pending {
		pending += n
	}
	e.stats.Pending.Store(pending)
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
	for _, t := range e.cat.topicsByID {
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
						e.disp.firedSince[es[i].Pos] = true
						e.disp.firedSinceTo = max(e.disp.firedSinceTo, es[i].Due+1)
					}
				}
				end = from
			}
		}
	}
	return nil
}

// openKeys opens the key index from the state the checkpoint recorded;
// keyindex checks every run file it lists. A damaged index is rebuilt from
// the log: every retained message record before the checkpoint's position
// (replay adds the keys of what follows).
func (e *Engine) openKeys(state []byte, logPos uint64) error {
	name := path.Join(e.opts.Dir, "keys")
	// Moved messages keep their old position as identity (compact.go):
	// their keys must survive merges.
	start := uint64(e.clog.Start())
	for orig := range e.segs.reloc {
		start = min(start, orig)
	}
	x, err := keyindex.Open(e.opts.FS, name, state, start)
	if err == nil {
		e.keys = x
		return nil
	}
	if !errors.Is(err, keyindex.ErrCorrupt) {
		return err
	}
	e.opts.Logger.Warn("key index damaged; rebuilding it from the commit log", "err", err)
	e.stats.CacheRebuilds.Add(1)
	if x, err = keyindex.Open(e.opts.FS, name, nil, start); err != nil {
		return err
	}
	e.keys = x
	err = e.scanMessages(logPos, func(orig uint64, s *message.Stored) error {
		if s.Key != "" {
			e.keys.Put(keyHash(s.Topic, s.Key), orig)
		}
		if s.DedupID != "" {
			e.keys.Put(dedupHash(s.Topic, s.DedupID), orig)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("rebuild the key index from the log: %w", err)
	}
	return nil
}

// errStopScan ends a log scan early.
var errStopScan = errors.New("engine: stop scan")

// openTimers opens the timer index from the state the checkpoint recorded;
// timerstore checks every run file it lists, and the pending messages are
// counted for the forecast in the same pass. Damage is not trusted and not
// fatal: the index is a cache, so it is rebuilt from the log (a scan of
// every retained record before the checkpoint's position; replay adds what
// follows it), as is the index of a version 2 checkpoint, which was kept in
// the layout before runs.
func (e *Engine) openTimers(st *checkpointState) error {
	dir, width := path.Join(e.opts.Dir, "timers"), e.opts.BucketWidth.Milliseconds()
	var err error
	if !st.timersLegacy {
		e.startForecastLocked(st)
		e.disp.timers, err = timerstore.Open(e.opts.FS, dir, width, st.TimerState, e.countTimerLocked)
		if err == nil {
			e.finishRecountLocked()
			return nil
		}
		if !errors.Is(err, timerstore.ErrCorrupt) {
			return fmt.Errorf("timer index: %w", err)
		}
		e.opts.Logger.Warn("timer index damaged; rebuilding it from the commit log", "err", err)
		e.stats.CacheRebuilds.Add(1)
	} else {
		e.opts.Logger.Info("timer index in the layout of an older hourglass (one file per bucket); rebuilding it from the commit log")
	}
	// A nil state deletes every file of the directory.
	if e.disp.timers, err = timerstore.Open(e.opts.FS, dir, width, nil, nil); err != nil {
		return fmt.Errorf("reset the timer index: %w", err)
	}
	e.startForecastLocked(st) // count again, from the log
	err = e.scanMessages(st.LogPos, func(orig uint64, s *message.Stored) error {
		t := e.cat.topic(s.Topic)
		if t == nil {
			return fmt.Errorf("message %d names unknown topic %q", orig, s.Topic)
		}
		ref := messageRef(orig, s, t)
		if ov := e.ovl.entries[orig]; ov != nil {
			if ov.Cancelled || ov.Fired {
				return nil
			}
			ref.due, ref.windowed = ov.Due, false // a reschedule sets an exact time
		}
		// Entries due at or before the frontier are filtered as visible when
		// loaded, like any other (validLocked).
		en := timerstore.Entry{Due: ref.due, Pos: orig, Topic: t.id, Queue: uint16(s.Queue), Kind: ref.timerKind()}
		e.countTimerLocked(en)
		e.disp.timers.Add(en)
		e.spillTimers()
		return nil
	})
	if err != nil {
		return fmt.Errorf("rebuild the timer index from the log: %w", err)
	}
	e.finishRecountLocked()
	return nil
}

// timerSpillBytes is how many bytes of timer entries recovery holds in
// memory before it writes them out (a variable for tests).
var timerSpillBytes = timerstore.FlushThreshold

// spillTimers writes the timer index's memtable out as a run once it holds
// timerSpillBytes, during recovery: a rebuild Adds a timer for every
// retained message and a replay one for every send after the checkpoint,
// before any checkpoint can write them, and a long log would otherwise be
// held in memory whole. The run set is recorded by the first checkpoint,
// which lists the run; a crash before it leaves the run unlisted, and the
// next Open deletes it.
//
// A spill that fails (a full disk, a failed write or fsync) does not stop
// the recovery: the entries stay in memory, as without spills, the job's
// file is gone, and no further spill is tried; the first checkpoint writes
// them and reports its own failure. Runs a spill merged away that no
// durable checkpoint lists are deleted at once.
func (e *Engine) spillTimers() {
	if e.disp.spillOff || e.disp.timers.Buffered() < timerSpillBytes {
		return
	}
	j, err := e.disp.timers.Prepare()
	if err == nil {
		_, err = e.disp.timers.Complete(j, j.Run())
	}
	if err != nil {
		e.disp.spillOff = true
		e.opts.Logger.Warn("recovery could not write timers out as it went; keeping them in memory until the first checkpoint", "err", err)
		return
	}
	if err := e.disp.timers.DropUnlisted()(); err != nil {
		e.opts.Logger.Warn("removing timer runs a recovery spill replaced failed; the next start removes them", "err", err)
	}
}

// scanMessages calls fn with every retained message record (original or
// moved copy, by identity) before the log position until, in log order: the
// rebuilds of damaged caches read the log through it.
func (e *Engine) scanMessages(until uint64, fn func(orig uint64, s *message.Stored) error) error {
	err := e.clog.Scan(e.clog.Start(), func(pos commitlog.Pos, rec commitlog.Record) error {
		if uint64(pos) >= until {
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
		return fn(orig, s)
	})
	if errors.Is(err, errStopScan) {
		return nil
	}
	return err
}
