package engine

import "github.com/hourglass-mq/hourglass/commitlog"

// retain removes what the durable checkpoint st no longer needs.
func (k *checkpointer) retain(st *checkpointState) {
	k.eng.mu.Lock()
	k.eng.disp.removeVisibleLocked(st.Frontier)
	// A segment may go when replay no longer needs it, no pending message
	// is in it, and its newest visible message is older than Retention.
	segs := k.eng.clog.Segments()
	cut := commitlog.Pos(0)
	now := k.eng.Now()
	var pinned *commitlog.Segment // the first segment kept only by pending messages
	for i, s := range segs {
		n, young := k.eng.segs.retainable(uint64(s.Base), now, k.eng.opts.Retention.Milliseconds())
		if i == len(segs)-1 || uint64(s.End) > st.LogPos || young {
			break
		}
		if n > 0 {
			if n <= int64(k.eng.opts.CompactMaxPending) {
				pinned = &segs[i]
			}
			break
		}
		cut = s.End
	}
	k.eng.mu.Unlock()
	if pinned != nil {
		// Move its pending messages forward; a later retain deletes it.
		n, err := k.compact(*pinned)
		if err != nil {
			k.eng.opts.Logger.Error("compaction failed", "segment", pinned.Name, "err", err)
		} else if n > 0 {
			k.eng.opts.Logger.Info("compacted pending messages out of an old segment", "segment", pinned.Name, "moved", n)
		}
	}
	if cut == 0 {
		return
	}
	n, err := k.eng.clog.DeleteBefore(cut)
	if err != nil {
		k.eng.opts.Logger.Error("segment removal failed", "err", err)
		return
	}
	k.eng.mu.Lock()
	bases := make([]uint64, n)
	for i, s := range segs[:n] {
		bases[i] = uint64(s.Base)
		if err := k.eng.ovl.dropSegmentLocked(uint64(s.Base)); err != nil {
			k.eng.opts.Logger.Error("overlay journal removal failed", "segment", s.Name, "err", err)
		}
	}
	k.eng.ovl.dropLocked(func(p uint64) bool { return k.eng.segs.physLocked(p) < uint64(cut) })
	// Keys below the cut may go, except those of moved messages, whose
	// identity stays their old position (compact.go).
	k.eng.keys.SetMinPos(k.eng.segs.lowestIdentity(uint64(cut)))
	k.eng.segs.droppedLocked(bases, uint64(cut))
	k.eng.mu.Unlock()
	k.eng.stats.SegmentsDeleted.Add(uint64(n))
	k.eng.opts.Logger.Info("retention removed segments", "segments", n, "before", cut)
}
