package timerstore

import (
	"errors"
	"math"
	"slices"

	"github.com/hourglass-mq/hourglass/sortedrun"
	"github.com/hourglass-mq/hourglass/vfs"
)

// The merge policy. A Job's output absorbs the newest runs while each is at
// most mergeRatio times the output so far (size-tiered: an entry is
// rewritten about log(N / checkpoint size) times over its life), and
// always while the run set would otherwise exceed maxRuns; a run more than
// half dead is absorbed too, so that the disk held by loaded buckets is
// given back. Sizes are live entries, estimated from the sparse index.
const (
	mergeRatio = 2
	maxRuns    = 8
)

// Job writes what a Prepare froze as one run file, merging the runs it
// picked, outside the owner's lock; see the package doc.
type Job struct {
	fs     vfs.FS
	dir    string
	width  int64 // the bucket width, for the run's tail
	seq    uint64
	write  bool // whether there is an output to write
	ran    bool // Run succeeded
	frozen []frozenPart
	inputs []runPart // the runs merged into the output, referenced
	// dropped are runs with no live entry left: they leave the run set
	// without being read.
	dropped []*run
	out     *run // the output; nil when it would be empty
}

// Prepare freezes the memtable and picks the runs to merge and drop, for a
// Job that the owner runs without its lock and ends with Complete. Only
// one Job may be outstanding (ErrBusy).
func (s *Store) Prepare() (*Job, error) { return s.prepare(mergeRatio) }

// PrepareSpill is Prepare for a recovery that writes its memtable out as
// it goes (the engine's spill): the Job merges no run into its output
// unless the run set would otherwise exceed maxRuns, and absorbs no run
// for being half dead. A merge rewrites older runs, whose size grows with
// the pending messages, not with the log recovery replays: merging at a
// spill made a restart with 10 M pending read and rewrite 75 MiB of runs
// before Open returned. The next checkpoint's Prepare merges as usual.
func (s *Store) PrepareSpill() (*Job, error) { return s.prepare(0) }

// prepare is Prepare with the merge policy's ratio; 0 merges only to keep
// the run set within maxRuns.
func (s *Store) prepare(ratio uint64) (*Job, error) {
	if s.closed {
		return nil, ErrClosed
	}
	if s.job != nil {
		return nil, ErrBusy
	}
	if s.mem.n > 0 {
		s.frozen = append(s.frozen, s.mem)
		s.mem = newMemtable()
	}
	j := &Job{fs: s.fs, dir: s.dir, width: s.width}
	fresh := uint64(0)
	for _, m := range s.frozen {
		j.frozen = append(j.frozen, frozenPart{m: m, deadBelow: m.deadBelow})
		fresh += uint64(m.n)
	}
	var keep []*run
	for _, r := range s.runs {
		if r.last() < r.DeadBelow {
			j.dropped = append(j.dropped, r)
		} else {
			keep = append(keep, r)
		}
	}
	merge := pickMerge(keep, fresh, ratio)
	for _, r := range keep {
		if merge[r] {
			r.Ref()
			j.inputs = append(j.inputs, runPart{r: r, meta: r.Meta})
		}
	}
	if fresh > 0 || len(j.inputs) > 0 {
		j.seq, j.write = s.nextSeq, true
		s.nextSeq++
	}
	s.job, s.jobCut = j, math.MinInt64
	return j, nil
}

// pickMerge returns the runs of keep (oldest first) to merge into an
// output that starts with fresh entries, by the size-tiered policy with
// ratio; with ratio 0, only the runs that keep the set within maxRuns.
func pickMerge(keep []*run, fresh, ratio uint64) map[*run]bool {
	sizes := make([]uint64, len(keep))
	for i, r := range keep {
		sizes[i] = r.live()
	}
	merge := map[*run]bool{}
	for _, r := range keep[len(keep)-sortedrun.Tier(sizes, fresh, ratio, maxRuns):] {
		merge[r] = true
	}
	if ratio == 0 {
		return merge
	}
	for i, r := range keep {
		if !merge[r] && sizes[i] < r.Entries/2 {
			merge[r] = true
		}
	}
	return merge
}

// frozenPart is a frozen memtable a Job writes, with its deadBelow when
// the Job was prepared. Its map is read, not written, by the Job: it is
// flattened and sorted outside the owner's lock.
type frozenPart struct {
	m         *memtable
	deadBelow int64
}

// memSource walks a frozen memtable in order: its buckets by start, and
// each bucket's entries sorted in a buffer of its own. Not one sort of the
// whole memtable: a checkpoint after a large preload holds hundreds of
// thousands of entries, and one sort of them all made a buffer of that
// size and took one core for a sixth of a second, which the sends beside
// it felt (docs/benchmarks.md, issue 8 ninth pass). A bucket holds few
// entries, except a herd's (a million due at one instant is one bucket,
// sorted whole, as before).
type memSource struct {
	m         *memtable
	deadBelow int64
	buckets   []int64
	k         int     // the next bucket
	es        []Entry // the current bucket's live entries, sorted
	i         int
	cur       [EntrySize]byte // the current entry, encoded
}

func newMemSource(p frozenPart) *memSource {
	bs := make([]int64, 0, len(p.m.m))
	for b := range p.m.m {
		bs = append(bs, b)
	}
	slices.Sort(bs)
	return &memSource{m: p.m, deadBelow: p.deadBelow, buckets: bs}
}

// Next moves to the next live entry.
func (m *memSource) Next() bool {
	m.i++
	for m.i > len(m.es) {
		if m.k == len(m.buckets) {
			return false
		}
		m.es, m.i = m.es[:0], 1
		for _, e := range m.m.m[m.buckets[m.k]] {
			if e.Due >= m.deadBelow {
				m.es = append(m.es, e)
			}
		}
		m.k++
		slices.SortFunc(m.es, compareEntries)
	}
	putEntry(m.cur[:], m.es[m.i-1])
	return true
}

// Entry returns the current entry, encoded.
func (m *memSource) Entry() []byte { return m.cur[:] }

// Err is nil: a memtable does not fail.
func (m *memSource) Err() error { return nil }

// Run writes the output run: the frozen entries, sorted, merged with the
// input runs, each without its dead entries; then it fsyncs the file and
// the directory. An input block that fails its check fails the Job with
// ErrCorrupt.
func (j *Job) Run() error {
	if !j.write {
		j.ran = true
		return nil
	}
	var srcs []sortedrun.Source
	for _, p := range j.frozen {
		srcs = append(srcs, newMemSource(p))
	}
	for _, in := range j.inputs {
		srcs = append(srcs, &deadFilter{Iter: in.r.NewIter(in.meta), deadBelow: in.meta.DeadBelow})
	}
	out, err := format.WriteRunAux(j.fs, j.dir, j.seq, srcs, nil, newBucketAux(j.width))
	if err != nil {
		return err
	}
	if out != nil {
		j.out = &run{Run: out}
	}
	j.ran = true // with a nil output, nothing was left alive to write
	return nil
}

// deadFilter skips a run's entries below its deadBelow.
type deadFilter struct {
	*sortedrun.Iter
	deadBelow int64
}

// Next moves to the next entry at or after deadBelow.
func (d *deadFilter) Next() bool {
	for d.Iter.Next() {
		if due(sortedrun.Lead(d.Entry())) >= d.deadBelow {
			return true
		}
	}
	return false
}

// Complete ends the Job and returns the state to record in the checkpoint.
// On success the output joins the run set and the runs it replaced leave
// it (Release deletes their files); on failure (err, the Job's error) the
// run set is unchanged, the Job's file is gone and its frozen entries wait
// for the next Job.
func (s *Store) Complete(j *Job, err error) ([]byte, error) {
	if s.job != j {
		panic("timerstore: Complete of a job that is not outstanding")
	}
	s.job = nil
	for _, in := range j.inputs {
		in.r.Unref()
	}
	if err == nil && !j.ran {
		err = errors.New("timerstore: Complete of a job that did not run")
	}
	if err != nil {
		if j.out != nil { // it ran, but the owner's checkpoint failed
			j.out.Unref()
			s.orphans = append(s.orphans, j.out.Name)
		}
		return nil, err
	}
	s.frozen = s.frozen[len(j.frozen):]
	gone := map[*run]bool{}
	for _, in := range j.inputs {
		gone[in.r] = true
	}
	for _, r := range j.dropped {
		gone[r] = true
	}
	runs := s.runs[:0:0]
	for _, r := range s.runs {
		if gone[r] {
			s.retired = append(s.retired, r)
		} else {
			runs = append(runs, r)
		}
	}
	if j.out != nil {
		j.out.DeadBelow = s.jobCut
		runs = append(runs, j.out)
	}
	s.runs = runs
	return format.EncodeState(s.state()), nil
}

// state returns the run set as the state records it.
func (s *Store) state() sortedrun.State {
	st := sortedrun.State{NextSeq: s.nextSeq}
	for _, r := range s.runs {
		st.Runs = append(st.Runs, r.Meta)
	}
	return st
}

// Release takes the runs that left the run set, and the files of jobs
// whose checkpoint failed, and returns the function that deletes them.
// The owner calls it once a checkpoint holding the state of the latest
// Complete is durable, so that no durable state lists them any more, and
// calls the function without its lock: unlinking a large file frees its
// blocks, which is journal work. A file still read by a load plan stays
// readable through its open handle until the plan ends. The function
// returns the first failed removal; a file left behind is deleted by the
// next Open.
func (s *Store) Release() func() error {
	for _, r := range s.runs {
		r.listed = true // the durable state lists exactly these
	}
	retired, orphans := s.retired, s.orphans
	s.retired, s.orphans = nil, nil
	return deleter(s.fs, retired, orphans)
}

// DropUnlisted takes the retired runs that no durable state ever listed
// (written by a job since the last Release and replaced by a later one)
// and returns the function that deletes them; the runs a durable state
// lists stay for Release. Recovery calls it after each of its spills, so
// that spilling a long log holds one run set, not every run it merged
// away.
func (s *Store) DropUnlisted() func() error {
	var drop, keep []*run
	for _, r := range s.retired {
		if r.listed {
			keep = append(keep, r)
		} else {
			drop = append(drop, r)
		}
	}
	s.retired = keep
	return deleter(s.fs, drop, nil)
}

// deleter returns the function that removes the files of retired runs and
// orphans and drops the store's references to the runs.
func deleter(fs vfs.FS, retired []*run, orphans []string) func() error {
	return func() error {
		var first error
		remove := func(name string) {
			if err := fs.Remove(name); err != nil && !vfs.IsNotExist(err) && first == nil {
				first = err
			}
		}
		for _, r := range retired {
			remove(r.Name)
			r.Unref()
		}
		for _, name := range orphans {
			remove(name)
		}
		return first
	}
}
