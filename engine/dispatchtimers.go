package engine

import (
	"fmt"
	"maps"
	"math"

	"github.com/hourglass-mq/hourglass/timerstore"
	"github.com/hourglass-mq/hourglass/timewheel"
)

// The dispatcher's timer index and its part in recovery: the index is a
// cache of the log, opened and checkpointed by the engine, and written by
// the dispatcher alone (addTimerLocked; spillTimers during replay).

// store is the timer index, for the engine's checkpoint and recovery,
// which run its jobs and open it; nil before recovery opens it.
func (d *dispatcher) store() *timerstore.Store { return d.timers }

// setStore installs the timer index recovery opened.
func (d *dispatcher) setStore(s *timerstore.Store) { d.timers = s }

// closeStore closes the timer index, if it was opened.
func (d *dispatcher) closeStore() {
	if d.timers != nil {
		d.timers.Close()
	}
}

// removeVisibleLocked drops the loaded buckets that end at or before the
// durable frontier: they hold only timers that are visible, or that
// recovery re-adds from the log after the checkpoint's position.
func (d *dispatcher) removeVisibleLocked(frontier int64) {
	d.timers.Remove(min(frontier, d.loadedUntil))
}

// startReplay makes every timer replay registers go to the buckets: no
// bucket is loaded and the wheel has not started.
func (d *dispatcher) startReplay() {
	d.loadedUntil = math.MinInt64
	d.lastAdvance = math.MinInt64
}

// setRecoveryFilter records the checkpoint's log position and frontier:
// entries registered before logPos and due at or before frontier are
// visible already (firedAtRecoveryLocked).
func (d *dispatcher) setRecoveryFilter(logPos uint64, frontier int64) {
	d.recL, d.recF = logPos, frontier
}

// timerIndexDamagedLocked stops the engine for damage in the timer index
// found outside a bucket load (the forecast's count after Open), as a load
// that meets damage does: the restart rebuilds the index from the log.
func (d *dispatcher) timerIndexDamagedLocked(err error) {
	d.life.failLocked(fmt.Errorf("timer index: %w", err))
}

// stopping is closed when Close begins: work the dispatcher's store runs
// outside the loop (the forecast's count after Open) stops then.
func (d *dispatcher) stopping() <-chan struct{} { return d.life.stopping() }

// recoveryFilterCopy returns a copy of the recovery filter (firedSince,
// recL, recF) as it is: the forecast's count after Open reads it as it was
// before replay (forecastrecount.go).
func (d *dispatcher) recoveryFilterCopy() (firedSince map[uint64]bool, recL uint64, recF int64) {
	return maps.Clone(d.firedSince), d.recL, d.recF
}

// markFiredSince records that the message at pos, due at due, was made
// visible after the checkpoint (by a replayed fire record, or found in a
// queue index past the frontier): its bucket entry must not fire again.
func (d *dispatcher) markFiredSince(pos uint64, due int64) {
	d.firedSince[pos] = true
	d.firedSinceTo = max(d.firedSinceTo, due+1)
}

// noteReplayed raises the latest broker time a replayed record carries.
func (d *dispatcher) noteReplayed(t int64) { d.replayHWM = max(d.replayHWM, t) }

// replayHighWater is the latest broker time a replayed record carried.
func (d *dispatcher) replayHighWater() int64 { return d.replayHWM }

// start sets the wheels up at start after replay, the buckets loaded up
// to the one after it, and a full token bucket.
func (d *dispatcher) start(start int64) {
	d.wheel = timewheel.New[timerRef](1, 512, start)
	d.lastAdvance = start
	d.leases = timewheel.New[timerRef](1, 512, start)
	d.leaseAt = start
	d.loadedUntil = d.timers.BucketOf(start + 1)
	d.tokensAt = d.clock.Now()
	d.tokens = d.rateBurst()
}

// spillTimers writes the timer index's memtable out as a run once it holds
// timerSpillBytes, during recovery: a rebuild Adds a timer for every
// retained message and a replay one for every send after the checkpoint,
// before any checkpoint can write them, and a long log would otherwise be
// held in memory whole. A spill merges no older run (PrepareSpill): those
// grow with the pending messages, and rewriting them made Open's time grow
// with them too. The run set is recorded by the first checkpoint,
// which lists the run; a crash before it leaves the run unlisted, and the
// next Open deletes it.
//
// A spill that fails (a full disk, a failed write or fsync) does not stop
// the recovery: the entries stay in memory, as without spills, the job's
// file is gone, and no further spill is tried; the first checkpoint writes
// them and reports its own failure. Runs a spill merged away that no
// durable checkpoint lists are deleted at once.
func (d *dispatcher) spillTimers() {
	if d.spillOff || d.timers.Buffered() < timerSpillBytes {
		return
	}
	j, err := d.timers.PrepareSpill()
	if err == nil {
		_, err = d.timers.Complete(j, j.Run())
	}
	if err != nil {
		d.spillOff = true
		d.opts.Logger.Warn("recovery could not write timers out as it went; keeping them in memory until the first checkpoint", "err", err)
		return
	}
	if err := d.timers.DropUnlisted()(); err != nil {
		d.opts.Logger.Warn("removing timer runs a recovery spill replaced failed; the next start removes them", "err", err)
	}
}

// scanPlanLocked pages the timer index for an operator's listing of
// pending messages (browse.go): up to limit entries from `from` on, due
// before hi, to be read without the lock. The index holds every message
// timer not yet removed, stale ones (cancelled, moved, fired) among them:
// the caller checks each against the message's state.
func (d *dispatcher) scanPlanLocked(from timerstore.Entry, hi int64, limit int) *timerstore.ScanPlan {
	return d.timers.ScanPlan(from, hi, limit)
}
