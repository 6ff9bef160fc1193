package timerstore

import (
	"container/heap"
	"fmt"
	"math"
	"path"
	"slices"

	"github.com/hourglass-mq/hourglass/sortedrun"
	"github.com/hourglass-mq/hourglass/vfs"
)

// Store is the timer index of one directory. It is not safe for concurrent
// use: the engine calls it under its lock (see the package doc).
type Store struct {
	fs    vfs.FS
	dir   string
	width int64
	// mem takes the Adds since the last Prepare.
	mem *memtable
	// frozen are memtables a Job writes, or a failed Job left to the next
	// one; readable until a Job's Complete installs them in a run.
	frozen []*memtable
	// runs is the run set, oldest first.
	runs    []*run
	nextSeq uint64
	// job is the outstanding Job, and jobCut the highest cut a Remove
	// made while it ran: Complete gives it to the job's new run.
	job    *Job
	jobCut int64
	// retired are runs that left the run set at a Complete; the previous
	// durable state may still list them, so Release deletes their files.
	retired []*run
	// orphans are files of jobs whose Complete was given the owner's
	// failure after they ran: no state lists them; Release deletes them.
	orphans []string
	closed  bool
	// count is the number of entries (duplicates included) of each live
	// bucket; a bucket is live from its first Add until Remove forgets it.
	count map[int64]int64
	// order is a min-heap of the bucket starts in count, for NextBucket.
	order bucketHeap
	// low is at most the smallest bucket start in count (MaxInt64 when
	// none is), so that Remove scans count only when some bucket ended.
	low int64
}

// memtable holds entries by bucket start. Once frozen its map is never
// written again; deadBelow (owner's lock) is the highest cut a Remove made
// since it was frozen.
type memtable struct {
	m         map[int64][]Entry
	n         int
	deadBelow int64
}

func newMemtable() *memtable {
	return &memtable{m: map[int64][]Entry{}, deadBelow: math.MinInt64}
}

// Open opens (creating if needed) the timer index in dir, from the state
// the engine's last durable checkpoint recorded (nil for an empty index).
// With a visit, it reads and checks every run the state lists whole,
// handing each of their live entries to visit in file order. Without
// one, it opens each run from its tail when the run has a good one,
// reading two blocks and counting the buckets from the tail's summary,
// so that its cost does not grow with the timers; the caller then checks
// the rest with a RunsPlan's Each. It deletes every other file of the
// directory. A damage mark an earlier Each left fails it with ErrCorrupt. Damage is an ErrCorrupt naming the file and offset; the
// engine then opens with a nil state and re-adds its timers from the log.
// width is the bucket width in milliseconds.
func Open(fs vfs.FS, dir string, width int64, stateBytes []byte, visit func(Entry)) (*Store, error) {
	if width <= 0 || width > MaxWidth {
		return nil, fmt.Errorf("timerstore: bucket width %d ms is not in [1, %d]", width, int64(MaxWidth))
	}
	st, err := format.DecodeState(stateBytes)
	if err != nil {
		return nil, err
	}
	if err := fs.MkdirAll(dir); err != nil {
		return nil, err
	}
	s := &Store{fs: fs, dir: dir, width: width, mem: newMemtable(), nextSeq: st.NextSeq,
		count: map[int64]int64{}, low: math.MaxInt64, jobCut: math.MinInt64}
	if len(st.Runs) > 0 {
		if err := checkMark(fs, dir); err != nil {
			return nil, err
		}
	}
	listed := map[string]bool{}
	for _, m := range st.Runs {
		r, err := s.openRun(m, visit)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.runs = append(s.runs, r)
		listed[path.Base(r.Name)] = true
	}
	if err := s.removeUnlisted(listed); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// removeUnlisted deletes every file of the directory that is not a listed
// run, and syncs the directory if it deleted any.
func (s *Store) removeUnlisted(listed map[string]bool) error {
	names, err := s.fs.List(s.dir)
	if err != nil {
		return err
	}
	removed := false
	for _, n := range names {
		if listed[n] {
			continue
		}
		if err := s.fs.Remove(path.Join(s.dir, n)); err != nil && !vfs.IsNotExist(err) {
			return err
		}
		removed = true
	}
	if removed {
		return s.fs.SyncDir(s.dir)
	}
	return nil
}

// Close closes the run files. No Job may be outstanding, and no load plan
// may be read afterwards.
func (s *Store) Close() {
	s.closed = true
	for _, r := range s.runs {
		r.Unref()
	}
	for _, r := range s.retired {
		r.Unref()
	}
	s.runs, s.retired = nil, nil
}

// Width returns the bucket width in milliseconds.
func (s *Store) Width() int64 { return s.width }

// BucketOf returns the start of the bucket holding time t.
func (s *Store) BucketOf(t int64) int64 {
	b := t - t%s.width
	if t < 0 && t%s.width != 0 {
		b -= s.width
	}
	return b
}

// Add puts an entry in the memtable; the next Job makes it durable.
func (s *Store) Add(e Entry) {
	b := s.BucketOf(e.Due)
	s.mem.m[b] = append(s.mem.m[b], e)
	s.mem.n++
	s.countAdd(b)
}

func (s *Store) countAdd(b int64) { s.countAddN(b, 1) }

// countAddN counts n entries in bucket b.
func (s *Store) countAddN(b, n int64) {
	if _, ok := s.count[b]; !ok {
		s.low = min(s.low, b)
		heap.Push(&s.order, b)
	}
	s.count[b] += n
}

// bucketTally gathers Open's count of the entries of one bucket while a
// run's entries stay in it.
type bucketTally struct {
	b, n int64
}

// add counts an entry of bucket b, flushing the bucket before when b is
// another one.
func (c *bucketTally) add(s *Store, b int64) {
	if c.n > 0 && c.b != b {
		c.flush(s)
	}
	c.b = b
	c.n++
}

// flush adds the gathered count to the store.
func (c *bucketTally) flush(s *Store) {
	if c.n > 0 {
		s.countAddN(c.b, c.n)
		c.n = 0
	}
}

// Buffered returns the bytes of the entries Added since the last Prepare.
func (s *Store) Buffered() int { return s.mem.n * EntrySize }

// NextBucket returns the smallest live bucket start b with b+width > from.
// Buckets that end at or before from are forgotten by the search order
// (not removed).
func (s *Store) NextBucket(from int64) (int64, bool) {
	for s.order.Len() > 0 {
		b := s.order[0]
		if _, ok := s.count[b]; !ok || b+s.width <= from {
			heap.Pop(&s.order)
			continue
		}
		return b, true
	}
	return 0, false
}

// Remove forgets every bucket that ends at or before t and returns how
// many it forgot: their entries, in every source there is now, are dead
// (see the package doc); the runs they made all dead are dropped by the
// next Prepare and their files deleted by the Release after it. The engine
// calls it only for buckets its latest durable checkpoint no longer needs.
func (s *Store) Remove(t int64) int {
	cut := s.BucketOf(t)
	for _, r := range s.runs {
		r.DeadBelow = max(r.DeadBelow, cut)
	}
	for _, m := range s.frozen {
		m.deadBelow = max(m.deadBelow, cut)
	}
	if s.job != nil {
		s.jobCut = max(s.jobCut, cut)
	}
	if s.low >= cut {
		return 0 // no live bucket has ended
	}
	n, low := 0, int64(math.MaxInt64)
	for b := range s.count {
		if b >= cut {
			low = min(low, b)
			continue
		}
		delete(s.count, b)
		if es, ok := s.mem.m[b]; ok {
			s.mem.n -= len(es)
			delete(s.mem.m, b)
		}
		n++
	}
	s.low = low
	return n
}

// Buckets returns the number of live buckets and the bytes of the index:
// its run files and the entries in memory.
func (s *Store) Buckets() (n int, bytes int64) {
	for _, r := range s.runs {
		bytes += format.Blocks(r.Meta) * BlockSize
	}
	for _, m := range s.frozen {
		bytes += int64(m.n) * EntrySize
	}
	return len(s.count), bytes + int64(s.Buffered())
}

// Runs returns the number of run files in the run set.
func (s *Store) Runs() int { return len(s.runs) }

type bucketHeap []int64

func (h bucketHeap) Len() int           { return len(h) }
func (h bucketHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h bucketHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *bucketHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *bucketHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Load returns the entries of the bucket starting at b, without duplicate
// (due, pos) pairs, in due order.
func (s *Store) Load(b int64) ([]Entry, error) { return s.LoadPlan(b).Read() }

// LoadPlan captures, cheaply and without I/O, what Read needs to return
// the entries of bucket b: the runs that may hold them (each referenced,
// so that a Release cannot close it meanwhile), the frozen memtables, and
// a copy of the memtable's entries. The owner takes the plan under its
// lock and calls Read, exactly once, without it, so that reading a bucket
// of a million entries does not stall its other work. Entries added after
// the plan was taken are not in it: the owner must schedule those itself.
func (s *Store) LoadPlan(b int64) *LoadPlan {
	p := &LoadPlan{lo: b, hi: b + s.width}
	if _, ok := s.count[b]; !ok {
		return p
	}
	p.mem = slices.Clone(s.mem.m[b])
	for _, m := range s.frozen {
		if es := m.m[b]; len(es) > 0 {
			p.frozen = append(p.frozen, part{es: es, deadBelow: m.deadBelow})
		}
	}
	for _, r := range s.runs {
		if r.last() >= max(b, r.DeadBelow) && len(r.First) > 0 && due(r.First[0]) < p.hi {
			r.Ref()
			p.runs = append(p.runs, runPart{r: r, meta: r.Meta})
		}
	}
	return p
}

// LoadPlan is what LoadPlan captured.
type LoadPlan struct {
	lo, hi int64
	mem    []Entry
	frozen []part
	runs   []runPart
	done   bool
}

// part is a frozen memtable's entries of one bucket.
type part struct {
	es        []Entry
	deadBelow int64
}

// runPart is a run a plan or a job reads, with what the state said of it
// when the plan or the job was prepared: Remove may raise the run's
// deadBelow meanwhile, under the owner's lock, which they do not hold.
type runPart struct {
	r    *run
	meta sortedrun.Meta
}

// Read returns the plan's entries without duplicate (due, pos) pairs, in
// due order. Damage in a run is ErrCorrupt. It may run without the owner's
// lock, and must be called once.
func (p *LoadPlan) Read() ([]Entry, error) {
	if p.done {
		panic("timerstore: LoadPlan.Read called twice")
	}
	p.done = true
	defer func() {
		for _, rp := range p.runs {
			rp.r.Unref()
		}
	}()
	out := slices.Clone(p.mem)
	for _, f := range p.frozen {
		for _, e := range f.es {
			if e.Due >= f.deadBelow {
				out = append(out, e)
			}
		}
	}
	for _, rp := range p.runs {
		es, err := rp.r.readRange(max(p.lo, rp.meta.DeadBelow), p.hi)
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	slices.SortFunc(out, compareEntries)
	return slices.CompactFunc(out, func(a, b Entry) bool { return a.Due == b.Due && a.Pos == b.Pos }), nil
}

// FlushThreshold is how many bytes of entries Added since the last Prepare
// make the engine ask for a checkpoint before its interval: the memtable
// is the part of the index whose size depends on the traffic.
const FlushThreshold = 8 << 20
