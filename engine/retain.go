package engine

import "github.com/hourglass-mq/hourglass/commitlog"

// retain removes what the durable checkpoint st no longer needs.
func (k *checkpointer) retain(st *checkpointState) {
	k.mu.Lock()
	k.disp.removeVisibleLocked(st.Frontier)
	// A segment may go when replay no longer needs it, no pending message
	// is in it, and its newest visible message is older than Retention.
	segs := k.log.Segments()
	cut := commitlog.Pos(0)
	now := k.clock.Now()
	var pinned *commitlog.Segment // the first segment kept only by pending messages
	for i, s := range segs {
		n, young := k.segs.retainable(uint64(s.Base), now, k.opts.Retention.Milliseconds())
		if i == len(segs)-1 || uint64(s.End) > st.LogPos || young {
			break
		}
		if n > 0 {
			if n <= int64(k.opts.CompactMaxPending) {
				pinned = &segs[i]
			}
			break
		}
		cut = s.End
	}
	k.mu.Unlock()
	if pinned != nil {
		// Move its pending messages forward; a later retain deletes it.
		n, err := k.compact(*pinned)
		if err != nil {
			k.opts.Logger.Error("compaction failed", "segment", pinned.Name, "err", err)
		} else if n > 0 {
			k.opts.Logger.Info("compacted pending messages out of an old segment", "segment", pinned.Name, "moved", n)
		}
	}
	if cut == 0 {
		return
	}
	n, err := k.log.DeleteBefore(cut)
	if err != nil {
		k.opts.Logger.Error("segment removal failed", "err", err)
		return
	}
	k.mu.Lock()
	bases := make([]uint64, n)
	for i, s := range segs[:n] {
		bases[i] = uint64(s.Base)
		if err := k.ovl.dropSegmentLocked(uint64(s.Base)); err != nil {
			k.opts.Logger.Error("overlay journal removal failed", "segment", s.Name, "err", err)
		}
	}
	k.ovl.dropLocked(func(p uint64) bool { return k.segs.physLocked(p) < uint64(cut) })
	// Keys below the cut may go, except those of moved messages, whose
	// identity stays their old position (compact.go).
	k.keys.SetMinPos(k.segs.lowestIdentity(uint64(cut)))
	k.segs.droppedLocked(bases, uint64(cut))
	k.mu.Unlock()
	k.stats.SegmentsDeleted.Add(uint64(n))
	k.opts.Logger.Info("retention removed segments", "segments", n, "before", cut)
}
