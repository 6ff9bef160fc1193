package engine

import "github.com/hourglass-mq/hourglass/commitlog"

// retain removes what the durable checkpoint st no longer needs.
func (e *Engine) retain(st *checkpointState) {
	e.mu.Lock()
	// Loaded buckets that end at or before the frontier hold only timers
	// that are visible, or that recovery re-adds from the log after LogPos.
	limit := min(st.Frontier, e.disp.loadedUntil)
	e.disp.timers.Remove(limit)
	// A segment may go when replay no longer needs it, no pending message
	// is in it, and its newest visible message is older than Retention.
	segs := e.clog.Segments()
	cut := commitlog.Pos(0)
	now := e.Now()
	var pinned *commitlog.Segment // the first segment kept only by pending messages
	for i, s := range segs {
		if i == len(segs)-1 || uint64(s.End) > st.LogPos ||
			now-e.segs.last[uint64(s.Base)] < e.opts.Retention.Milliseconds() {
			break
		}
		if n := e.segs.pending[uint64(s.Base)]; n > 0 {
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
			e.opts.Logger.Error("compaction failed", "segment", pinned.Name, "err", err)
		} else if n > 0 {
			e.opts.Logger.Info("compacted pending messages out of an old segment", "segment", pinned.Name, "moved", n)
		}
	}
	if cut == 0 {
		return
	}
	n, err := e.clog.DeleteBefore(cut)
	if err != nil {
		e.opts.Logger.Error("segment removal failed", "err", err)
		return
	}
	e.mu.Lock()
	for _, s := range segs[:n] {
		delete(e.segs.pending, uint64(s.Base))
		delete(e.segs.last, uint64(s.Base))
		if err := e.ovl.journal.remove(uint64(s.Base)); err != nil {
			e.opts.Logger.Error("overlay journal removal failed", "segment", s.Name, "err", err)
		}
	}
	for p := range e.ovl.entries {
		if e.physLocked(p) < uint64(cut) {
			delete(e.ovl.entries, p)
		}
	}
	// Keys below the cut may go, except those of moved messages, whose
	// identity stays their old position (compact.go).
	minKey := uint64(cut)
	for orig := range e.segs.reloc {
		minKey = min(minKey, orig)
	}
	e.keys.SetMinPos(minKey)
	for orig, p := range e.segs.reloc {
		if p < uint64(cut) {
			delete(e.segs.reloc, orig)
		}
	}
	e.segs.bases = nil
	e.mu.Unlock()
	e.stats.SegmentsDeleted.Add(uint64(n))
	e.opts.Logger.Info("retention removed segments", "segments", n, "before", cut)
}
