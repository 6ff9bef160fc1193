package engine

import "github.com/hourglass-mq/hourglass/vfs"

// overlayEntry remembers a message whose timer no longer matches its
// record: rescheduled, cancelled or already fired after a reschedule. It is
// kept while the message's record is retained, so that stale bucket entries
// are skipped and Inspect tells the truth.
type overlayEntry struct {
	Due       int64 // effective due time
	Cancelled bool
	Fired     bool
	Visible   int64 // when it became visible, if Fired
	// Changing is set while a cancel or reschedule of the message is
	// being written (from beginChangeLocked until applyChangeLocked or
	// undoChangeLocked). No timer of the message may be scheduled then, and
	// no other change may start: never journaled.
	Changing bool
}

// overlayState remembers messages whose timer no longer matches their
// record, and journals every change (overlay.go). Guarded by Engine.mu.
// Its fields are its own (ownership_test.go).
type overlayState struct {
	entries map[uint64]*overlayEntry
	journal *overlayJournal // nil until recovery opens it
	// segs says which log segment the current copy of a message lies in:
	// its entry is journaled in that segment's file.
	segs *segTable
}

func newOverlayState(segs *segTable) *overlayState {
	return &overlayState{entries: map[uint64]*overlayEntry{}, segs: segs}
}

// get returns the entry of the message at pos, or nil. The entry is the
// overlay's: its holder reads it and does not change it.
func (o *overlayState) get(pos uint64) *overlayEntry { return o.entries[pos] }

// copyEntries returns a copy of every entry, by value: the forecast's
// count after Open reads the overlay as it was before replay
// (forecastrecount.go).
func (o *overlayState) copyEntries() map[uint64]overlayEntry {
	out := make(map[uint64]overlayEntry, len(o.entries))
	for pos, ov := range o.entries {
		out[pos] = *ov
	}
	return out
}

// has reports whether the message at pos has an entry.
func (o *overlayState) has(pos uint64) bool { return o.entries[pos] != nil }

// open opens the journal and loads the entries the checkpoint vouches for
// (files: each journal file's length), dropping those of messages before
// logStart.
func (o *overlayState) open(fs vfs.FS, dataDir string, files map[uint64]int64, logStart uint64) error {
	var err error
	if o.journal, err = newOverlayJournal(fs, dataDir); err != nil {
		return err
	}
	return o.journal.load(files, logStart, func(pos uint64, ov overlayEntry) { o.entries[pos] = &ov })
}

// journalLocked journals the entry of pos, if it has one.
func (o *overlayState) journalLocked(pos uint64) {
	if ov := o.entries[pos]; ov != nil && o.journal != nil {
		o.journal.add(o.segs.segOfLocked(o.segs.physLocked(pos)), pos, ov)
	}
}

// beginChangeLocked marks the message at pos cancelled, or moved to
// newDue, while its change is written: Changing keeps the loader from
// scheduling a bucket entry of it meanwhile. One that matches the new due
// time (a reschedule to the time it already had, or back to an earlier
// one) would otherwise be scheduled beside the timer the change adds, and
// the message would fire twice. It returns the entry set, and the one
// before if there was one, for undoChangeLocked.
func (o *overlayState) beginChangeLocked(pos uint64, due int64, cancel bool, newDue int64) (ov *overlayEntry, prev overlayEntry, hadPrev bool) {
	if p, ok := o.entries[pos]; ok {
		prev, hadPrev = *p, true
	}
	ov = &overlayEntry{Due: due, Cancelled: cancel, Changing: true}
	if !cancel {
		ov.Due = newDue
	}
	o.entries[pos] = ov
	return ov, prev, hadPrev
}

// undoChangeLocked undoes beginChangeLocked after a failed append: the
// entry is what it was.
func (o *overlayState) undoChangeLocked(pos uint64, ov *overlayEntry, prev overlayEntry, hadPrev bool) {
	if hadPrev {
		*ov = prev
	} else {
		delete(o.entries, pos)
	}
}

// applyChangeLocked records a durable cancel (or a reschedule to due) of
// the message at pos, whose record says recordDue, and journals it. Live,
// beginChangeLocked set the entry already; setting it again is a no-op.
func (o *overlayState) applyChangeLocked(pos uint64, recordDue int64, cancel bool, due int64) {
	ov := o.entries[pos]
	if ov == nil {
		ov = &overlayEntry{Due: recordDue}
		o.entries[pos] = ov
	}
	ov.Changing = false
	if cancel {
		ov.Cancelled = true
	} else {
		ov.Due = due
	}
	o.journalLocked(pos)
}

// firedLocked records that the message at pos, if it has an entry, became
// visible at visible, and journals it.
func (o *overlayState) firedLocked(pos uint64, visible int64) {
	if ov := o.entries[pos]; ov != nil {
		ov.Fired, ov.Visible = true, visible
		o.journalLocked(pos)
	}
}

// prepareJournal freezes what was journaled for the checkpoint: the job
// writes and syncs it outside the locks; files are the lengths to record.
func (o *overlayState) prepareJournal() (*ovJob, map[uint64]int64) { return o.journal.prepare() }

// dropSegmentLocked removes the journal file of a segment retention
// deleted.
func (o *overlayState) dropSegmentLocked(base uint64) error { return o.journal.remove(base) }

// dropLocked forgets the entries of the messages gone reports gone.
func (o *overlayState) dropLocked(gone func(pos uint64) bool) {
	for p := range o.entries {
		if gone(p) {
			delete(o.entries, p)
		}
	}
}
