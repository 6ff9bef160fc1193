package kafkamode

import "time"

// loopIndex is the worker's index of pending entries and what serves it;
// owned by the loop goroutine.
type loopIndex struct {
	cfg   *Config // the worker's, read only
	stats *Stats  // the worker's counters
	// copyAfterMs is the age (now - record timestamp) at which a pending
	// record is copied forward: half the delay topic's retention.ms; 0
	// when retention is unlimited. Set before the loop starts.
	copyAfterMs int64
	// warm queues business topics for the warmer goroutine (warm.go).
	warm      chan string
	due       dueHeap // every pending entry, by due time
	noBody    dueHeap // entries whose body was dropped, by due time
	loader    *bodyLoader
	loadBusy  bool
	loadDone  chan bodyResult
	copies    tsHeap   // entries that may need copying forward, by timestamp
	copyReady []*entry // entries to copy, body loaded
	lastSnap  time.Time
	// warmed holds the business topics already warmed (warm.go).
	warmed map[string]struct{}
	// The spill of entries due beyond the near window (spill.go); nil
	// before Run. spillErr ends the session.
	spill         *spiller
	spillErr      error
	spillLogged   bool
	lastCopyCheck time.Time
	// deadSlots counts entries resolved while still in the due heap
	// (compactIndex).
	deadSlots int
	// deferredParts lists the partitions with cancels waiting for their
	// copies to be read back (deferral.go).
	deferredParts []*partProgress
	// forwarded holds, in at-least-once mode, the entries collected and
	// forwarded (or waiting for a transaction: cancels, copies) while the
	// last transaction settled; the next transaction commits them.
	forwarded []*entry
}

// newLoopIndex returns an empty index.
func newLoopIndex(cfg *Config, stats *Stats) loopIndex {
	return loopIndex{cfg: cfg, stats: stats, loadDone: make(chan bodyResult, 1), warmed: make(map[string]struct{}),
		warm: make(chan string, warmQueue)}
}

// reset empties the index (RAM and spill files): a session starts from
// what Kafka holds.
func (x *loopIndex) reset() {
	x.due, x.noBody, x.copies, x.copyReady = nil, nil, nil, nil
	x.deadSlots = 0
	x.deferredParts = nil
	x.forwarded = nil
	if x.spill != nil {
		x.spill.reset()
	}
	x.spillErr = nil
	x.lastSnap = time.Now()
}

// waitLoader waits for a body load in flight, so no result leaks into
// the next session.
func (x *loopIndex) waitLoader() {
	if x.loadBusy {
		<-x.loadDone
		x.loadBusy = false
	}
}

// snapshotDue reports whether interval has passed since the last
// snapshot round (or one was asked for at once: forceSnapshot), and
// starts the next round if so.
func (x *loopIndex) snapshotDue(interval time.Duration) bool {
	if time.Since(x.lastSnap) < interval {
		return false
	}
	x.lastSnap = time.Now()
	return true
}

// forceSnapshot makes snapshotDue true within a second of the last
// round rather than after interval: at most one round a second, since a
// partition that cannot be snapshotted yet (an open cancel) would
// otherwise make every transaction scan the index.
func (x *loopIndex) forceSnapshot(interval time.Duration) {
	if t := time.Now().Add(time.Second - interval); t.Before(x.lastSnap) {
		x.lastSnap = t
	}
}

// failure is the spill's error that ends the session, if any.
func (x *loopIndex) failure() error { return x.spillErr }

// setLoader sets the body loader of the worker's run.
func (x *loopIndex) setLoader(l *bodyLoader) { x.loader = l }

// resolvedInHeap counts an entry resolved while still in the due heap
// (compactIndex drops such entries once they are many).
func (x *loopIndex) resolvedInHeap() { x.deadSlots++ }

// putBack returns an entry of an aborted transaction to the index: a copy
// forward (which never left the due heap) to the copies ready, any other
// live entry to the due heap.
func (x *loopIndex) putBack(e *entry) {
	switch {
	case !e.live():
	case e.copy:
		x.copyReady = append(x.copyReady, e)
	default:
		x.due.push(e)
	}
}

// collectLive appends, to known's list of each partition it has a key
// for, the snapshot entry of every live scheduled entry in RAM.
func (x *loopIndex) collectLive(known map[*partProgress][]snapEntry) {
	for _, e := range x.due {
		if es, ok := known[e.pp]; ok && e.ctl == nil && e.live() {
			known[e.pp] = append(es, snapEntry{offset: e.offset, due: e.due, ts: e.ts, keyHash: e.keyHash, back: e.offset - firstOffset(e)})
		}
	}
}

// withSpilled appends partition pp's spilled entries to have.
func (x *loopIndex) withSpilled(have []snapEntry, pp *partProgress) ([]snapEntry, error) {
	if x.spill == nil {
		return have, nil
	}
	return x.spill.appendEntries(have, pp)
}

// stashForwarded keeps entries collected ahead of their transaction.
func (x *loopIndex) stashForwarded(es []*entry) { x.forwarded = append(x.forwarded, es...) }

// hasForwarded reports whether stashForwarded keeps entries.
func (x *loopIndex) hasForwarded() bool { return len(x.forwarded) > 0 }

// takeForwarded returns the entries stashForwarded kept that are still
// live, and forgets them all. An entry of a partition revoked since its
// forward is left out: its progress is the new owner's to commit (it
// forwards the entry again, marked, as mayRedeliver says), and a commit
// of this worker's for a partition it no longer owns could move the
// group's offset under the new owner.
func (x *loopIndex) takeForwarded() []*entry {
	es := x.forwarded[:0] // filtered in place: the stash is forgotten below
	for _, e := range x.forwarded {
		if e.live() {
			es = append(es, e)
		}
	}
	x.forwarded = nil
	return es
}
