package keyindex

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/hourglass-mq/hourglass/sortedrun"
	"github.com/hourglass-mq/hourglass/vfs"
)

// Index is the key index of one broker. See the package doc.
type Index struct {
	fs  vfs.FS
	dir string

	mu struct {
		sync.Mutex
		// mem takes Puts; frozen holds the memtables Prepare froze whose
		// run is not installed yet, oldest first (more than one only after
		// a job failed: the next job writes them all).
		mem    map[uint64]uint64
		frozen []map[uint64]uint64
		// sorted is what the frozen memtables held, one entry per hash
		// sorted by hash, once a job has sorted them (Job.Run): the job
		// drops the maps then, so that a checkpoint's write holds one
		// 16-byte entry per key rather than a map and its sorted copy.
		// Like frozen, it stays until a job's Complete succeeds.
		sorted []kv
		// runs is the installed run set, oldest first. The slice is
		// replaced, never changed in place, so a Get may keep reading the
		// one it took.
		runs    []*sortedrun.Run
		nextSeq uint64
		minPos  uint64
		job     *Job
		// obsolete holds the runs no longer in the set whose files stay
		// until a Release says the state that dropped them is durable.
		obsolete []*sortedrun.Run
		// unverified are the runs Open took from their tails that no
		// Verify has checked whole yet.
		unverified []*sortedrun.Run
		failed     error
		closed     bool
	}
}

// Open opens the index in dir (created if missing) from state, the last
// state Complete returned that the caller made durable (nil: empty). It
// opens every run the state lists from its tail when it has a good one
// (reading its first and last blocks only; Verify checks the rest), and
// reads the others whole, checking every block; it fails with ErrCorrupt,
// naming the file and offset, if a run disagrees or an earlier Verify
// found damage (see Verify). It deletes every run file the state does not
// list. Entries below minPos may be dropped by merges (see
// SetMinPos). The caller then re-puts the keys its log holds after the
// checkpoint that stored state.
func Open(fs vfs.FS, dir string, state []byte, minPos uint64) (*Index, error) {
	st, err := format.DecodeState(state)
	if err != nil {
		return nil, err
	}
	if err := fs.MkdirAll(dir); err != nil {
		return nil, err
	}
	if err := checkMark(fs, dir, state == nil); err != nil {
		return nil, err
	}
	x := &Index{fs: fs, dir: dir}
	x.mu.mem, x.mu.nextSeq, x.mu.minPos = map[uint64]uint64{}, st.NextSeq, minPos
	for _, m := range st.Runs {
		r, err := openRun(fs, dir, m)
		if err != nil {
			x.Close()
			return nil, err
		}
		x.mu.runs = append(x.mu.runs, r)
		if r.FromTail {
			x.mu.unverified = append(x.mu.unverified, r)
		}
	}
	if err := x.removeUnlisted(st); err != nil {
		x.Close()
		return nil, err
	}
	return x, nil
}

// removeUnlisted deletes the run files of dir that st does not list, and
// keeps the next sequence number above every one found, so that no name is
// ever reused.
func (x *Index) removeUnlisted(st sortedrun.State) error {
	names, err := x.fs.List(x.dir)
	if err != nil {
		return err
	}
	listed := map[uint64]bool{}
	for _, m := range st.Runs {
		listed[m.Seq] = true
	}
	for _, n := range names {
		seq, ok := format.ParseRunName(n)
		if !ok || listed[seq] {
			continue
		}
		if err := x.fs.Remove(format.RunName(x.dir, seq)); err != nil && !vfs.IsNotExist(err) {
			return err
		}
		x.mu.nextSeq = max(x.mu.nextSeq, seq+1)
	}
	return nil
}

// Put records that the message at pos carries the key hashed to h. It
// never waits for I/O. Where h already has a greater position, that one
// stays the answer.
func (x *Index) Put(h, pos uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if cur, ok := x.mu.mem[h]; !ok || pos > cur {
		x.mu.mem[h] = pos
	}
}

// Get returns the greatest position recorded for h: in the memtables, or
// in the run files, one pread each. It reads the files without holding
// the Index's mutex. A read error or a block failing its check is an
// error (ErrCorrupt for the latter), never a miss.
func (x *Index) Get(h uint64) (pos uint64, ok bool, err error) {
	x.mu.Lock()
	if x.mu.closed {
		x.mu.Unlock()
		return 0, false, ErrClosed
	}
	pos, ok = x.mu.mem[h]
	for _, m := range x.mu.frozen {
		if p, found := m[h]; found && (!ok || p > pos) {
			pos, ok = p, true
		}
	}
	if p, found := findSorted(x.mu.sorted, h); found && (!ok || p > pos) {
		pos, ok = p, true
	}
	runs := x.mu.runs
	for _, r := range runs {
		r.Ref()
	}
	x.mu.Unlock()
	defer func() {
		for _, r := range runs {
			r.Unref()
		}
	}()
	b := blockPool.Get().(*[BlockSize]byte)
	defer blockPool.Put(b)
	for _, r := range runs {
		p, found, err := get(r, h, b[:])
		if err != nil {
			return 0, false, err
		}
		if found && (!ok || p > pos) {
			pos, ok = p, true
		}
	}
	return pos, ok, nil
}

// SetMinPos raises the position below which entries are dead (retention
// removed their messages); merges drop them from then on. It never lowers
// it. A caller whose records move (compaction) passes the smallest
// position still alive, not the log's start.
func (x *Index) SetMinPos(p uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.mu.minPos = max(x.mu.minPos, p)
}

// maxPresize bounds the size Prepare gives a new memtable in advance.
const maxPresize = 1 << 18

// Prepare freezes the memtable and returns the job that writes it as a
// run, merged with the newest runs as the policy says. It does no I/O: call
// it under the lock that orders Puts with the caller's checkpoint, so that
// the state Complete returns covers exactly the Puts before it. It fails
// with ErrBusy while another job is outstanding and after a failed fsync.
func (x *Index) Prepare() (*Job, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case x.mu.closed:
		return nil, ErrClosed
	case x.mu.failed != nil:
		return nil, x.mu.failed
	case x.mu.job != nil:
		return nil, ErrBusy
	}
	if len(x.mu.mem) > 0 {
		// Sized like the last one: traffic is steady between checkpoints,
		// and growing a map entry by entry under the caller's lock costs
		// more than the Puts themselves. A burst's size is not kept.
		n := len(x.mu.mem)
		x.mu.frozen = append(x.mu.frozen, x.mu.mem)
		x.mu.mem = make(map[uint64]uint64, min(n, maxPresize))
	} else {
		// No Put since the last Prepare: the traffic stopped. Drop the
		// table presized for it (up to maxPresize entries, about 8 MiB that
		// a Go map never gives back), so that an idle broker's memtable
		// costs nothing.
		x.mu.mem = map[uint64]uint64{}
	}
	fresh := uint64(len(x.mu.sorted))
	for _, m := range x.mu.frozen {
		fresh += uint64(len(m))
	}
	sizes := make([]uint64, len(x.mu.runs))
	for i, r := range x.mu.runs {
		sizes[i] = r.Entries
	}
	k := 0
	if fresh > 0 {
		k = pickMerge(sizes, fresh)
	}
	j := &Job{x: x, frozen: slices.Clone(x.mu.frozen), sorted: x.mu.sorted, inputs: x.mu.runs[len(x.mu.runs)-k:],
		seq: x.mu.nextSeq, minPos: x.mu.minPos}
	for _, r := range j.inputs {
		r.Ref() // Close must not close them under the job
	}
	x.mu.nextSeq++
	x.mu.job = j
	return j, nil
}

// Complete ends job j, the outstanding one, with the error its Run
// returned. On success it installs the new run in place of the runs it
// merged, drops the memtables it wrote, and returns the state to store in
// the caller's checkpoint: it covers every Put before j's Prepare. On
// failure the frozen memtables stay, readable and written by the next job;
// a failed fsync fails the Index for good (ErrSyncFailed). It does no I/O.
func (x *Index) Complete(j *Job, err error) ([]byte, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.mu.job != j || j == nil {
		return nil, errors.New("keyindex: Complete of a job that is not the outstanding one")
	}
	x.mu.job = nil
	for _, r := range j.inputs {
		defer r.Unref()
	}
	if err == nil {
		err = j.err
	}
	if err == nil && !j.ran {
		err = errors.New("keyindex: Complete of a job that did not run")
	}
	if err != nil && errors.Is(err, ErrSyncFailed) && x.mu.failed == nil {
		x.mu.failed = fmt.Errorf("keyindex: checkpoint job: %w", err)
	}
	switch {
	case x.mu.closed:
		err = ErrClosed
	case x.mu.failed != nil:
		err = x.mu.failed
	case err != nil:
		err = fmt.Errorf("keyindex: checkpoint job: %w", err)
	}
	if err != nil {
		if j.out != nil {
			j.out.Unref()
		}
		return nil, err
	}
	keep := x.mu.runs[:len(x.mu.runs)-len(j.inputs)]
	runs := slices.Clip(slices.Clone(keep))
	if j.out != nil {
		runs = append(runs, j.out)
	}
	x.mu.runs = runs
	x.mu.frozen, x.mu.sorted = nil, nil
	x.mu.obsolete = append(x.mu.obsolete, j.inputs...)
	j.obsolete = slices.Clone(x.mu.obsolete)
	return format.EncodeState(x.stateLocked()), nil
}

func (x *Index) stateLocked() sortedrun.State {
	st := sortedrun.State{NextSeq: x.mu.nextSeq}
	for _, r := range x.mu.runs {
		st.Runs = append(st.Runs, r.Meta)
	}
	return st
}

// Release deletes the run files that j's state made obsolete. Call it once
// the checkpoint holding the state Complete returned for j is durable:
// until then the previous checkpoint lists them. A file not released stays
// until a later Release or the next Open. No lock need be held.
func (x *Index) Release(j *Job) error {
	x.mu.Lock()
	// Only runs still obsolete: a run is released once, and Close has
	// already dropped the references of all of them.
	var gone []*sortedrun.Run
	x.mu.obsolete = slices.DeleteFunc(x.mu.obsolete, func(r *sortedrun.Run) bool {
		if slices.Contains(j.obsolete, r) {
			gone = append(gone, r)
			return true
		}
		return false
	})
	j.obsolete = nil
	x.mu.Unlock()
	var errs []error
	for _, r := range gone {
		r.Unref()
		if err := x.fs.Remove(r.Name); err != nil && !vfs.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Reset empties the index, for a rebuild by re-putting every key from the
// log. The run files stay until the next Release (the caller's last
// checkpoint may still list them). It fails with ErrBusy while a job is
// outstanding. It does not clear a failed fsync: open the index again.
func (x *Index) Reset() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.mu.job != nil {
		return ErrBusy
	}
	x.mu.mem, x.mu.frozen, x.mu.sorted = map[uint64]uint64{}, nil, nil
	x.mu.obsolete = append(x.mu.obsolete, x.mu.runs...)
	x.mu.runs = nil
	return nil
}

// Stats describes an Index's size.
type Stats struct {
	Runs       int    // run files in the set
	RunEntries uint64 // entries in them (a hash may stand in several)
	Memtable   int    // entries in the memtable and the frozen ones
	IndexBytes int    // RAM of the runs' sparse indexes
}

// Stats returns the index's current size.
func (x *Index) Stats() Stats {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := Stats{Runs: len(x.mu.runs), Memtable: len(x.mu.mem) + len(x.mu.sorted)}
	for _, m := range x.mu.frozen {
		s.Memtable += len(m)
	}
	for _, r := range x.mu.runs {
		s.RunEntries += r.Entries
		s.IndexBytes += 8 * len(r.First)
	}
	return s
}

// Close closes the run files (each once the Gets and the job reading it
// are done). Later calls fail with ErrClosed.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.mu.closed {
		return nil
	}
	x.mu.closed = true
	for _, r := range append(x.mu.runs, x.mu.obsolete...) {
		r.Unref()
	}
	x.mu.runs, x.mu.obsolete = nil, nil
	return nil
}
