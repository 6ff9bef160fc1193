package kafkamode

import (
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// partTable is the progress of the delay partitions this worker owns. The
// group callbacks (on the client's goroutines) add and drop partitions;
// the loop reads them. mu is never held across a call into the client:
// End waits for the callbacks.
type partTable struct {
	mu    sync.Mutex
	parts map[int32]*partProgress
	// seeded lists partitions whose snapshot entries applySeeds made
	// ready; the loop indexes them (takeSeeded).
	seeded []seededPart
}

// install makes pps the progress of their partitions, dropping what an
// earlier assignment of them left.
func (t *partTable) install(pps []*partProgress) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.parts == nil {
		t.parts = make(map[int32]*partProgress)
	}
	for _, pp := range pps {
		if old := t.parts[pp.partition]; old != nil {
			old.dropped.Store(true)
		}
		t.parts[pp.partition] = pp
	}
}

// applySeeds applies the loaded snapshots of the partitions in offsets
// (the committed offset of each, as the group fetched it) and sets each
// one's offset to consume from (see Worker.adjustOffsets).
func (t *partTable) applySeeds(offsets map[int32]kgo.Offset, log *slog.Logger) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for p, o := range offsets {
		pp := t.parts[p]
		if pp == nil || pp.seed == nil {
			continue
		}
		c := o.EpochOffset().Offset
		if c < 0 {
			log.Warn("partition has a snapshot but no committed offset; ignoring the snapshot", "partition", p)
			pp.seed = nil
			continue
		}
		entries, start := pp.applySeed(c)
		offsets[p] = kgo.NewOffset().At(start).WithEpoch(-1)
		t.seeded = append(t.seeded, seededPart{pp: pp, entries: entries})
		log.Info("partition resumes from its snapshot", "partition", p, "committed", c, "read_from", start,
			"pending", len(entries))
	}
}

// revoke drops the partitions ps; their entries die lazily.
func (t *partTable) revoke(ps []int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range ps {
		if pp := t.parts[p]; pp != nil {
			pp.dropped.Store(true)
			delete(t.parts, p)
		}
	}
}

// reset drops every partition.
func (t *partTable) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, pp := range t.parts {
		pp.dropped.Store(true)
	}
	t.parts = make(map[int32]*partProgress)
	t.seeded = nil
}

// pending returns the number of read, unresolved records of each
// partition.
func (t *partTable) pending() map[int32]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[int32]int64, len(t.parts))
	for p, pp := range t.parts {
		out[p] = pp.open.Load()
	}
	return out
}

// owned returns the partitions owned now, in no order.
func (t *partTable) owned() []int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]int32, 0, len(t.parts))
	for p := range t.parts {
		out = append(out, p)
	}
	return out
}

// readPositions returns, for each owned partition read from (or seeded),
// one past the highest offset read: where its consumer resumes after an
// abort (rewindAfterAbort).
func (t *partTable) readPositions() map[int32]kgo.EpochOffset {
	t.mu.Lock()
	defer t.mu.Unlock()
	at := map[int32]kgo.EpochOffset{}
	for p, pp := range t.parts {
		// next == 0: nothing read (no snapshot applied either), so the
		// group's own start position stands.
		if !pp.dropped.Load() && pp.seed == nil && pp.next > 0 {
			at[p] = kgo.EpochOffset{Epoch: -1, Offset: pp.next}
		}
	}
	return at
}

// snapshotCandidates returns the owned partitions read further since
// their last snapshot (and whose seed, if any, is applied), and those
// whose epoch has used its resolution slots.
func (t *partTable) snapshotCandidates() []*partProgress {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*partProgress
	for _, pp := range t.parts {
		if !pp.dropped.Load() && pp.seed == nil && pp.next > 0 && (pp.next > pp.snapRead || pp.slot >= maxResolutionSlots || pp.snapWanted) {
			out = append(out, pp)
		}
	}
	return out
}

// lockedParts is the table while its lock is held (whileLocked).
type lockedParts struct{ t *partTable }

// whileLocked runs f with the table locked: the loop indexes a poll's
// records so, and a revocation cannot come between.
func (t *partTable) whileLocked(f func(lockedParts)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(lockedParts{t})
}

// get returns partition p's progress, nil if it is not owned.
func (l lockedParts) get(p int32) *partProgress { return l.t.parts[p] }

// takeSeeded returns the seeded partitions not indexed yet, and forgets
// them.
func (l lockedParts) takeSeeded() []seededPart {
	s := l.t.seeded
	l.t.seeded = nil
	return s
}
