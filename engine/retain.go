package engine

import "github.com/hourglass-mq/hourglass/commitlog"

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
