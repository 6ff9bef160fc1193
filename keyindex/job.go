package keyindex

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
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
	acc, k := fresh, 0
	for k < len(sizes) {
		s := sizes[len(sizes)-1-k]
		if s > mergeRatio*acc && len(sizes)-k < maxRuns {
			break
		}
		acc += s
		k++
	}
	return k
}

// Job writes the memtables Prepare froze, merged with the newest runs, as
// one new run. Run it without any lock, then give it to Complete.
type Job struct {
	x      *Index
	frozen []map[uint64]uint64
	sorted []kv   // the Index's sorted entries when prepared (a failed job's)
	inputs []*run // the newest runs, oldest first, that the output replaces
	seq    uint64
	minPos uint64
	ran    bool
	out    *run  // the new run; nil when there was nothing to write
	err    error // what Run returned
	// obsolete is what Release deletes: set by Complete.
	obsolete []*run
}

// kv is one entry of a frozen memtable, sorted for writing.
type kv struct{ h, pos uint64 }

// source is one sorted input of a merge.
type source interface {
	next() bool
	cur() (h, pos uint64)
	failed() error
}

func (it *iter) cur() (uint64, uint64) { return it.h, it.pos }
func (it *iter) failed() error         { return it.err }

// memSource streams a sorted slice of a frozen memtable.
type memSource struct {
	es []kv
	i  int
}

func (m *memSource) next() bool            { m.i++; return m.i <= len(m.es) }
func (m *memSource) cur() (uint64, uint64) { return m.es[m.i-1].h, m.es[m.i-1].pos }
func (m *memSource) failed() error         { return nil }

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
	srcs := []source{&memSource{es: es}}
	for _, r := range j.inputs {
		srcs = append(srcs, newIter(r.runMeta, r.name, r.f, false))
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

// write merges srcs into the job's run file; it creates no file when no
// entry survives.
func (j *Job) write(srcs []source) (*run, error) {
	fs, name := j.x.fs, runName(j.x.dir, j.seq)
	var w *writer
	fail := func(err error) (*run, error) {
		if w != nil {
			w.f.Close()
			fs.Remove(name) // best effort: Open removes what no state lists
		}
		return nil, err
	}
	err := merge(srcs, func(h, pos uint64) error {
		if pos < j.minPos {
			return nil
		}
		if w == nil {
			f, err := fs.Create(name)
			if err != nil {
				return err
			}
			w = newWriter(f, name, j.seq)
		}
		return w.add(h, pos)
	})
	if err != nil || w == nil {
		return fail(err)
	}
	out, err := w.finish()
	if err != nil {
		return fail(err)
	}
	if err := fs.SyncDir(j.x.dir); err != nil {
		return fail(fmt.Errorf("%w: directory %s: %w", ErrSyncFailed, j.x.dir, err))
	}
	return out, nil
}

// merge calls emit for every hash of the sorted sources, in order, with
// its greatest position among them.
func merge(srcs []source, emit func(h, pos uint64) error) error {
	live := srcs[:0]
	for _, s := range srcs {
		if s.next() {
			live = append(live, s)
		} else if err := s.failed(); err != nil {
			return err
		}
	}
	for len(live) > 0 {
		h, pos := live[0].cur()
		for _, s := range live[1:] {
			if sh, sp := s.cur(); sh < h || sh == h && sp > pos {
				h, pos = sh, sp
			}
		}
		if err := emit(h, pos); err != nil {
			return err
		}
		next := live[:0]
		for _, s := range live {
			if sh, _ := s.cur(); sh != h || s.next() {
				next = append(next, s)
			} else if err := s.failed(); err != nil {
				return err
			}
		}
		live = next
	}
	return nil
}
