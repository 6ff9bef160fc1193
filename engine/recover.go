package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path"
	"sync"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/keyindex"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/timerstore"
	"github.com/hourglass-mq/hourglass/vfs"
)

// recovery is the engine's start from its directory, at Open: it runs
// once, alone, before the loop and the checkpointer start, and brings
// every part to the state the checkpoint and the log after it describe.
type recovery struct {
	// What the engine gives it (Engine.startParts): the engine's lock,
	// options, clock, log, stats and sealers; the slot of the key index,
	// which recovery opens, and the side indexes, whose forecast it
	// rebuilds; the parts it brings to their state; and the engine's apply
	// steps, through which replay applies each record as the live path
	// does.
	mu    *sync.Mutex
	opts  *Options
	clock *clock.Broker
	log   *commitlog.Log
	stats *Stats
	ids   *idents
	keys  **keyindex.Index
	side  *sideIndexes
	cat   *catalog
	cons  *consumers
	disp  *dispatcher
	segs  *segTable
	ovl   *overlayState
	apply replayApply
}

func newRecovery(mu *sync.Mutex, opts *Options, clk *clock.Broker, log *commitlog.Log, stats *Stats, ids *idents,
	keys **keyindex.Index, side *sideIndexes, cat *catalog, cons *consumers, disp *dispatcher, segs *segTable, ovl *overlayState,
	apply replayApply) *recovery {
	return &recovery{
		mu: mu, opts: opts, clock: clk, log: log, stats: stats, ids: ids, keys: keys, side: side,
		cat: cat, cons: cons, disp: disp, segs: segs, ovl: ovl, apply: apply,
	}
}

// replayApply is the engine's apply step of each kind of record that
// replay applies through it (Engine.applyMessageLocked, applyFireLocked,
// applyChangeLocked).
type replayApply struct {
	message func(pos uint64, s *message.Stored, t *topic)
	fire    func(visible int64, batch []fireEntry, live bool)
	change  func(pos uint64, s *message.Stored, top *topic, cancel bool, due int64)
}

// run loads the checkpoint, truncates the caches to it, replays the log
// after it and sets the wheel up at the fire frontier. A forecast count it
// defers (deferRecount) is started by the caller (startRecount), or given
// up if run fails.
func (r *recovery) run() (err error) {
	defer func() {
		if err != nil {
			r.side.fc.dropRecount()
		}
	}()
	st, err := r.loadCheckpoint()
	if err != nil {
		return err
	}
	if err := r.restoreState(st); err != nil {
		return err
	}
	if err := r.markVisibleAboveFrontier(st.Frontier); err != nil {
		return err
	}
	if err := r.openKeys(st.KeyState, st.LogPos); err != nil {
		return err
	}
	if err := r.openTimers(st); err != nil {
		return err
	}
	// Replay: every timer goes to the buckets (loadedUntil is -inf).
	r.disp.startReplay()
	minDue := int64(math.MaxInt64)
	replayed := 0
	err = r.log.Scan(commitlog.Pos(st.LogPos), func(pos commitlog.Pos, rec commitlog.Record) error {
		replayed++
		if err := r.replayLocked(uint64(pos), rec, &minDue); err != nil {
			return err
		}
		r.disp.spillTimers()
		return nil
	})
	if bad, ok := commitlog.DamagedAt(err); ok {
		return fmt.Errorf("replay from %d: %s holds damage at log position %d, after the checkpoint, which recovery must read: "+
			"this is media damage, not a torn write, and nothing was changed; stop here and run `hourglass repair --data-dir %s`, "+
			"which quarantines the damaged bytes and keeps every record after them (a message in them is lost, and a fire, ack "+
			"or change in them is not applied: its messages fire again, are redelivered or keep their old due time): %w",
			st.LogPos, r.segs.segmentOf(uint64(bad)), bad, r.opts.Dir, err)
	}
	if err != nil {
		return fmt.Errorf("replay from %d: %w", st.LogPos, err)
	}
	r.stats.Replayed.Store(uint64(replayed))
	r.stats.ReplayedBytes.Store(uint64(r.log.Head()) - st.LogPos)
	r.startDispatch(st, minDue)
	// The forecast's invariant: it counts what is pending (checked by
	// the deferred count when there is one).
	if r.side.fc.job == nil {
		if n, want := r.side.fc.total(), r.stats.Pending.Load(); n != want {
			r.opts.Logger.Warn("forecast counts disagree with the pending count", "counted", n, "pending", want)
		}
	}
	return nil
}

// loadCheckpoint reads the checkpoint, or returns the start state of a
// directory that has none.
func (r *recovery) loadCheckpoint() (*checkpointState, error) {
	st := &checkpointState{LogPos: uint64(r.log.Start()), Frontier: math.MinInt64 / 2}
	b, err := readAll(r.opts.FS, path.Join(r.opts.Dir, checkpointFile))
	switch {
	case vfs.IsNotExist(err):
		return st, nil
	case err != nil:
		return nil, err
	}
	if st, err = decodeCheckpoint(b); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if st.Incarnation != r.ids.incarn {
		return nil, fmt.Errorf("checkpoint belongs to incarnation %08x, the directory is %08x", st.Incarnation, r.ids.incarn)
	}
	if st.LogPos < uint64(r.log.Start()) || st.LogPos > uint64(r.log.Head()) {
		return nil, fmt.Errorf("checkpoint log position %d is outside the log [%d, %d]: the log is older than the checkpoint (a directory copied while its broker ran, or log segments lost); restore a backup (hourglass restore), or see hourglass check", st.LogPos, r.log.Start(), r.log.Head())
	}
	return st, nil
}

// restoreState puts back what the checkpoint recorded: the overlay (from
// its journal), per-segment accounting, topics and groups.
func (r *recovery) restoreState(st *checkpointState) error {
	if err := r.ovl.open(r.opts.FS, r.opts.Dir, st.OverlayFiles, uint64(r.log.Start())); err != nil {
		return err
	}
	r.segs.restore(st.Reloc, st.SegPending, st.SegLast)
	for _, t := range st.Topics {
		tp, err := r.cat.applyTopicLocked(t.ID, len(t.Entries), t.Flags, t.Name, t.Entries)
		if err != nil {
			return err
		}
		tp.pending = t.Pending
	}
	for _, cg := range st.Groups {
		t := r.cat.byIDLocked(cg.Topic)
		if t == nil {
			return fmt.Errorf("checkpoint group %q names unknown topic %d", cg.Name, cg.Topic)
		}
		g := r.cons.installLocked(cg.ID, t, cg.Config, cg.Name)
		if cg.Paused {
			r.cons.applyGroupChangeLocked(g, groupChange{op: opPause})
		}
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
func (r *recovery) startDispatch(st *checkpointState, minDue int64) {
	r.disp.setRecoveryFilter(st.LogPos, st.Frontier)
	// The broker clock must not run backwards across the restart: raise it
	// to the latest time the durable state shows it had reached.
	r.clock.Raise(max(st.Written, st.Frontier, r.disp.replayHighWater()))
	start := max(0, min(st.Frontier, minDue-1))
	r.disp.start(start)
	r.stats.Pending.Store(r.segs.pendingTotal())
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
func (r *recovery) markVisibleAboveFrontier(frontier int64) error {
	const chunk = 1024
	for t := range r.cat.topicsLocked() {
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
						r.disp.markFiredSince(es[i].Pos, es[i].Due)
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
func (r *recovery) openKeys(state []byte, logPos uint64) error {
	name := path.Join(r.opts.Dir, "keys")
	// Moved messages keep their old position as identity (compact.go):
	// their keys must survive merges.
	start := r.segs.lowestIdentity(uint64(r.log.Start()))
	x, err := keyindex.Open(r.opts.FS, name, state, start)
	if err == nil {
		*r.keys = x
		return nil
	}
	if !errors.Is(err, keyindex.ErrCorrupt) {
		return err
	}
	r.opts.Logger.Warn("key index damaged; rebuilding it from the commit log", "err", err)
	r.stats.CacheRebuilds.Add(1)
	if x, err = keyindex.Open(r.opts.FS, name, nil, start); err != nil {
		return err
	}
	*r.keys = x
	err = r.scanMessages(logPos, func(orig uint64, s *message.Stored) error {
		if s.Key != "" {
			(*r.keys).Put(keyHash(s.Topic, s.Key), orig)
		}
		if s.DedupID != "" {
			(*r.keys).Put(dedupHash(s.Topic, s.DedupID), orig)
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
// timerstore checks what it reads of every run file it lists (the tails,
// or runs without one whole), and the pending messages are counted for
// the forecast after Open, in a pass that checks the runs whole
// (deferRecount). Damage is not trusted and not
// fatal: the index is a cache, so it is rebuilt from the log (a scan of
// every retained record before the checkpoint's position; replay adds what
// follows it), as is the index of a version 2 checkpoint, which was kept in
// the layout before runs.
func (r *recovery) openTimers(st *checkpointState) error {
	dir, width := path.Join(r.opts.Dir, "timers"), r.opts.BucketWidth.Milliseconds()
	var err error
	if !st.timersLegacy {
		r.startForecastLocked(st)
		var ts *timerstore.Store
		// Opened from the runs' tails; the forecast's count of the
		// checkpoint's timers, which reads them whole, runs after Open
		// (forecastrecount.go).
		ts, err = timerstore.Open(r.opts.FS, dir, width, st.TimerState, nil)
		if err == nil {
			r.disp.setStore(ts)
			r.deferRecount(ts.RunsPlan())
			return nil
		}
		if !errors.Is(err, timerstore.ErrCorrupt) {
			return fmt.Errorf("timer index: %w", err)
		}
		r.opts.Logger.Warn("timer index damaged; rebuilding it from the commit log", "err", err)
		r.stats.CacheRebuilds.Add(1)
	} else {
		r.opts.Logger.Info("timer index in the layout of an older hourglass (one file per bucket); rebuilding it from the commit log")
	}
	// A nil state deletes every file of the directory.
	ts, err := timerstore.Open(r.opts.FS, dir, width, nil, nil)
	if err != nil {
		return fmt.Errorf("reset the timer index: %w", err)
	}
	r.disp.setStore(ts)
	r.startForecastLocked(st) // count again, from the log
	err = r.scanMessages(st.LogPos, func(orig uint64, s *message.Stored) error {
		t := r.cat.topic(s.Topic)
		if t == nil {
			return fmt.Errorf("message %d names unknown topic %q", orig, s.Topic)
		}
		ref := messageRef(orig, s, t)
		if ov := r.ovl.get(orig); ov != nil {
			if ov.Cancelled || ov.Fired {
				return nil
			}
			ref.due, ref.windowed = ov.Due, false // a reschedule sets an exact time
		}
		// Entries due at or before the frontier are filtered as visible when
		// loaded, like any other (validLocked).
		en := timerstore.Entry{Due: ref.due, Pos: orig, Topic: t.id, Queue: uint16(s.Queue), Kind: ref.timerKind()}
		r.countTimerLocked(en)
		r.disp.store().Add(en)
		r.disp.spillTimers()
		return nil
	})
	if err != nil {
		return fmt.Errorf("rebuild the timer index from the log: %w", err)
	}
	r.side.fc.finishRecount()
	return nil
}

// timerSpillBytes is how many bytes of timer entries recovery holds in
// memory before it writes them out (a variable for tests).
var timerSpillBytes = timerstore.FlushThreshold

// scanMessages calls fn with every retained message record (original or
// moved copy, by identity) before the log position until, in log order: the
// rebuilds of damaged caches read the log through it.
func (r *recovery) scanMessages(until uint64, fn func(orig uint64, s *message.Stored) error) error {
	err := r.log.Scan(r.log.Start(), func(pos commitlog.Pos, rec commitlog.Record) error {
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
