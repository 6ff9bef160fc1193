package kafkamode

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
)

// committedState is what the state topic commits about one delay
// partition, as the Locator reads it: the same records, from the same
// offset on, as a worker taking the partition over (loadState).
type committedState struct {
	lp *loadedPart
}

// committedState reads the committed state of partition.
func (l *Locator) committedState(ctx context.Context, partition int32) (*committedState, error) {
	from, err := stateStarts(ctx, l.adm, l.cfg)
	if err != nil {
		return nil, err
	}
	st := newStateRead(l.cfg, nil)
	err = l.scan(ctx, l.cfg.StateTopic, map[int32]int64{partition: max(from[partition], 0)}, 0, func(r *kgo.Record) bool {
		st.add(r)
		return true
	})
	if err != nil {
		return nil, err
	}
	return &committedState{lp: st.result(partition)}, nil
}

// resolvedAbove reports whether offset o, a delay record at or above the
// committed offset, is resolved: named by a resolution record or a legacy
// marker, or below the latest snapshot's read position and not among its
// pending entries (a snapshot lists every record pending below it).
func (cs *committedState) resolvedAbove(o int64) bool {
	lp := cs.lp
	if lp.resolved.contains(o) || slices.Contains(lp.markers, o) {
		return true
	}
	if s := lp.snap; s != nil && o < s.read {
		_, found := slices.BinarySearchFunc(s.entries, o, func(e snapEntry, o int64) int {
			switch {
			case e.offset < o:
				return -1
			case e.offset > o:
				return 1
			}
			return 0
		})
		return !found
	}
	return false
}
