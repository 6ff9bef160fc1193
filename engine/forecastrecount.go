package engine

import (
	"errors"

	"github.com/hourglass-mq/hourglass/timerstore"
)

// The deferred count of the checkpoint's timers. The forecast's counts are
// not in the checkpoint: recovery counts them from the timer index. Doing
// so in Open read every run of the index whole (230 MiB and 1.1 s of CPU
// at 10 M pending, most of a cold start): Open now opens the index from
// its runs' tails (timerstore.Open without a visit), and the count runs
// after Open returns, reading the runs the checkpoint listed
// (timerstore.RunsPlan.Each), which also checks them whole (invariant
// E13: damage there leaves a mark that makes the next start rebuild the
// index, and stops the engine, as a bucket load that meets damage does).
//
// The count must be the one recovery made before: the checkpoint's
// pending messages at their effective due times, as the recovery filter
// and the overlay said before replay. Replay and the live paths change
// both meanwhile, so the count reads a frozen copy of what it depends on
// (recountFilter), taken before replay: the overlay's entries, the moved
// messages' positions, the messages found visible past the frontier. Its
// size grows with the changes and moves the checkpoint holds, not with
// the pending messages. The near set and the positions taken for a fire
// are empty before replay, so the copy leaves them out. The changes the
// apply paths make meanwhile wait in forecastState.deltas and are applied
// after the count, in order, as if it had run first.

// recountJob is a count deferred until after Open.
type recountJob struct {
	plan   *timerstore.RunsPlan
	filter *recountFilter
}

// recountFilter is validFromLocked as of the checkpoint, on frozen
// copies.
type recountFilter struct {
	logStart   uint64
	reloc      map[uint64]uint64
	ovl        map[uint64]overlayEntry
	firedSince map[uint64]bool
	recL       uint64
	recF       int64
}

// valid is validFromLocked(pos, due, logStart) before replay.
func (f *recountFilter) valid(pos uint64, due int64) bool {
	phys := pos
	if p, ok := f.reloc[pos]; ok {
		phys = p
	}
	if phys < f.logStart {
		return false
	}
	if ov, ok := f.ovl[pos]; ok {
		return !ov.Changing && !ov.Cancelled && !ov.Fired && ov.Due == due
	}
	return !f.firedSince[pos] && !(due <= f.recF && pos < f.recL)
}

// errRecountStopped ends a deferred count when the engine closes.
var errRecountStopped = errors.New("engine: closed during the count of the pending messages")

// dropRecount gives back what a deferred count that will not start holds
// (a recovery that failed after deferring it).
func (f *forecastState) dropRecount() {
	if f != nil && f.job != nil {
		f.job.plan.Drop()
		f.job = nil
		f.readyErr = errRecountStopped
		close(f.ready)
	}
}

// count is countTimerLocked on the frozen filter.
func (j *recountJob) count(f *forecastState, en timerstore.Entry) {
	rc := f.recount
	if (en.Kind != kindMessage && en.Kind != kindWindowed) || !j.filter.valid(en.Pos, en.Due) {
		return
	}
	if _, ok := j.filter.ovl[en.Pos]; ok {
		if rc.seen[en.Pos] {
			return
		}
		rc.seen[en.Pos] = true
	}
	f.gather(en)
}
