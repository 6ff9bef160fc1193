package keyindex

import (
	"cmp"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/hourglass-mq/hourglass/sortedrun"
)

// Merge policy (see the package doc): a job's output absorbs the next
// older run while that run holds at most mergeRatio times the entries
// gathered so far, and regardless while more than maxRuns runs would
// remain. With checkpoints of 10k to 100k keys and 10 M keys in all, this
// keeps 3 to 4 runs on average (6 at most) and writes each entry 5 to 7
// times over its life (a simulation of the policy; TestPickMerge pins it).
const (
	mergeRatio = 2
	maxRuns    = 6
)

// pickMerge returns how many of the newest runs (sizes, oldest first) a
// job that writes fresh entries merges into its output.
func pickMerge(sizes []uint64, fresh uint64) int {
	return sortedrun.Tier(sizes, fresh, mergeRatio, maxRuns)
}

// Job writes the memtables Prepare froze, merged with the newest runs, as
// one new run. Run it without any lock, then give it to Complete.
type Job struct {
	x      *Index
	frozen []map[uint64]uint64
	sorted []kv             // the Index's sorted entries when prepared (a failed job's)
	inputs []*sortedrun.Run // the newest runs, oldest first, that the output replaces
	seq    uint64
	minPos uint64
	ran    bool
	out    *sortedrun.Run // the new run; nil when there was nothing to write
	err    error          // what Run returned
	// obsolete is what Release deletes: set by Complete.
	obsolete []*sortedrun.Run
}

// kv is one entry of a frozen memtable, sorted for writing.
type kv struct{ h, pos uint64 }

// memSource streams a sorted slice of a frozen memtable.
type memSource struct {
	es  []kv
	i   int
	cur [slotSize]byte // the current entry, encoded
}

// Next moves to the next entry.
func (m *memSource) Next() bool {
	if m.i == len(m.es) {
		return false
	}
	binary.LittleEndian.PutUint64(m.cur[:], m.es[m.i].h)
	binary.LittleEndian.PutUint64(m.cur[8:], m.es[m.i].pos)
	m.i++
	return true
}

// Entry returns the current entry, encoded.
func (m *memSource) Entry() []byte { return m.cur[:] }

// Err is nil: a memtable does not fail.
func (m *memSource) Err() error { return nil }

// sortFrozen returns the entries of the frozen memtables and of sorted
// sorted by hash, one per hash, with its greatest position.
func sortFrozen(frozen []map[uint64]uint64, sorted []kv) []kv {
	n := len(sorted)
	for _, m := range frozen {
		n += len(m)
	}
	es := make([]kv, 0, n)
	es = append(es, sorted...)
	for _, m := range frozen {
		for h, p := range m {
			es = append(es, kv{h, p})
		}
	}
	slices.SortFunc(es, func(a, b kv) int {
		return cmp.Or(cmp.Compare(a.h, b.h), cmp.Compare(a.pos, b.pos))
	})
	out := es[:0]
	for i, e := range es {
		if i+1 < len(es) && es[i+1].h == e.h {
			continue // a greater position for the same hash follows
		}
		out = append(out, e)
	}
	return out
}

// Run writes the job's run file and fsyncs it and the directory. It takes
// no lock of the Index and may run alongside Put, Get and Prepare's
// caller. An error wrapping ErrSyncFailed means an fsync failed: Complete
// then fails the Index for good.
func (j *Job) Run() error {
	if j.ran {
		return errors.New("keyindex: job run twice")
	}
	j.ran = true
	if len(j.frozen) == 0 && len(j.sorted) == 0 && len(j.inputs) == 0 {
		return nil
	}
	es := j.sortedFrozen()
	srcs := []sortedrun.Source{&memSource{es: es}}
	for _, r := range j.inputs {
		srcs = append(srcs, r.NewIter(r.Meta))
	}
	j.out, j.err = j.write(srcs)
	return j.err
}

// sortedFrozen sorts the job's frozen memtables and hands the result to
// the Index in their place, so that the maps are garbage while the job
// writes (Gets search the sorted entries instead). Only the outstanding
// job touches frozen and sorted until its Complete (Prepare and Reset
// refuse meanwhile), so the frozen memtables are still exactly the job's.
func (j *Job) sortedFrozen() []kv {
	es := sortFrozen(j.frozen, j.sorted)
	x := j.x
	x.mu.Lock()
	x.mu.frozen, x.mu.sorted = nil, es
	x.mu.Unlock()
	j.frozen, j.sorted = nil, nil
	return es
}

// findSorted returns the position of hash h in es, sorted by hash with one
// entry per hash.
func findSorted(es []kv, h uint64) (uint64, bool) {
	i, found := slices.BinarySearchFunc(es, h, func(e kv, h uint64) int { return cmp.Compare(e.h, h) })
	if !found {
		return 0, false
	}
	return es[i].pos, true
}

// write merges srcs into the job's run file, each hash with its greatest
// position, without the positions below minPos; it creates no file when
// no entry survives.
func (j *Job) write(srcs []sortedrun.Source) (*sortedrun.Run, error) {
	return format.WriteRun(j.x.fs, j.x.dir, j.seq, srcs, func(e []byte) bool {
		_, pos := slot(e, 0)
		return pos >= j.minPos
	})
}
