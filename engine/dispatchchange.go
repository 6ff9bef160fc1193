package engine

// The dispatcher and one message: its state as the dispatcher sees it, and
// holding its timer while a cancel or reschedule of it is written.

// stateLocked is the state of a message without an overlay entry that
// says cancelled or fired, its timer at timer. One lookup: in the wheel,
// or staged before its time (stagedLocked), is pending; held otherwise,
// or taken for a fire, is due; not held and not yet loaded is pending
// unless recovery knows it fired.
func (d *dispatcher) stateLocked(pos uint64, timer int64) State {
	t := d.near.get(pos)
	switch {
	case t != nil && (t.Scheduled() || timer > d.clock.Now()):
		return StatePending
	case t != nil, d.takenLocked(pos):
		return StateDue
	case timer >= d.loadedUntil && !d.firedAtRecoveryLocked(pos, timer):
		return StatePending
	}
	return StateVisible
}

// waitingLocked reports whether the message at pos, its timer at due, is
// in the wheel or not yet loaded (and not known to have fired): the
// messages compaction must carry forward. Staged and taken ones are not.
func (d *dispatcher) waitingLocked(pos uint64, due int64) bool {
	t := d.near.get(pos)
	return t != nil && t.Scheduled() ||
		(due >= d.loadedUntil && t == nil && !d.takenLocked(pos) && !d.firedAtRecoveryLocked(pos, due))
}

// unscheduleLocked takes the message at pos out of the wheel, or out of
// near if staged (which makes its heap entry stale), and returns its timer
// (nil if it held none): a change is being written. A taken one is not in
// near.
func (d *dispatcher) unscheduleLocked(pos uint64) *wheelTimer {
	t := d.near.get(pos)
	if t == nil {
		return nil
	}
	if t.Scheduled() {
		d.wheel.Cancel(t)
	}
	d.near.del(pos)
	return t
}

// holdLocked takes the message at pos out of the wheel and marks it
// cancelled or moved in the overlay, so that it cannot fire (or be loaded
// from its bucket) while its change is written.
func (d *dispatcher) holdLocked(pos uint64, due int64, cancel bool, newDue int64) hold {
	h := hold{pos: pos}
	// A timer in the wheel leaves it. A staged one (changeableLocked let
	// it through: it is not due) leaves near, which makes its heap entry
	// stale from now on. unholdLocked puts either back if the change
	// fails. A taken one is not in near (changeableLocked refuses it).
	h.timer = d.unscheduleLocked(pos)
	// The overlay entry is marked Changing (beginChangeLocked says why).
	h.ov, h.prev, h.hadPrev = d.ovl.beginChangeLocked(pos, due, cancel, newDue)
	return h
}

// unholdLocked undoes holdLocked after a failed append: the overlay entry
// is what it was and the timer ref is back where it belongs.
func (d *dispatcher) unholdLocked(h hold, ref timerRef) {
	d.ovl.undoChangeLocked(h.pos, h.ov, h.prev, h.hadPrev)
	if h.timer != nil {
		d.recycleTimerLocked(h.timer)
		d.scheduleLocked(ref)
		return
	}
	// Its bucket may have been loaded (and this entry skipped) while the
	// change was being written.
	d.placeTimerLocked(ref)
}
