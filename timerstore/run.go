package timerstore

import (
	"sort"

	"github.com/hourglass-mq/hourglass/sortedrun"
)

// run is one immutable run file, open for reading. Its DeadBelow is the
// only field that changes (owner's lock).
type run struct {
	*sortedrun.Run
	// listed is set once a durable state lists the run (owner's lock):
	// one that no durable state ever listed may go as soon as it leaves
	// the run set (DropUnlisted).
	listed bool
}

// last returns the due time of the run's last entry.
func (r *run) last() int64 { return due(r.Last) }

// live estimates the entries at or after DeadBelow: whole blocks before it
// are counted dead.
func (r *run) live() uint64 {
	i := sort.Search(len(r.First), func(i int) bool { return due(r.First[i]) >= r.DeadBelow })
	dead := uint64(max(0, i-1)) * uint64(format.PerBlock())
	return r.Entries - min(r.Entries, dead)
}

// readRange returns the entries with lo <= due < hi: it reads the blocks
// the sparse index says may hold them, in one read, and checks each.
func (r *run) readRange(lo, hi int64) ([]Entry, error) {
	if lo >= hi || r.last() < lo {
		return nil, nil
	}
	start := max(0, sort.Search(len(r.First), func(i int) bool { return due(r.First[i]) >= lo })-1)
	end := sort.Search(len(r.First), func(i int) bool { return due(r.First[i]) >= hi })
	if start >= end {
		return nil, nil
	}
	var out []Entry
	err := r.ReadBlocks(start, end, func(b []byte, n int) {
		for i := range n {
			if e := getEntry(format.Entry(b, i)); e.Due >= lo && e.Due < hi {
				out = append(out, e)
			}
		}
	})
	return out, err
}
