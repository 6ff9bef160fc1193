package sortedrun

import (
	"fmt"

	"github.com/hourglass-mq/hourglass/vfs"
)

// writer writes a run file block by block, a chunk (the format's Chunk
// blocks) a write.
type writer struct {
	format *Format
	file   vfs.File
	name   string
	seq    uint64
	buf    []byte // whole blocks not yet written
	blk    []byte // the block being filled, within buf
	n      int    // entries in blk
	off    int64  // file offset of buf[0]
	// kicked is the end of the range last written out: every
	// vfs.PaceBytes written are written out and waited for (vfs.WriteOut),
	// so the final fsync has little left and the device never holds more
	// than a step of the run ahead of another file's fsync. A shorter last
	// step is left to the fsync (see vfs.WritePaced).
	kicked int64
	m      Meta // what the state will record
	first  []uint64
	prev   []byte // the last entry added
	aux    TailAux
}

// newWriter returns a writer of run seq into file, an empty file named
// name.
func (f *Format) newWriter(file vfs.File, name string, seq uint64) *writer {
	return &writer{format: f, file: file, name: name, seq: seq, buf: make([]byte, 0, f.Chunk*BlockSize),
		m: Meta{Seq: seq, Sum: f.Seed}, prev: make([]byte, 0, f.EntrySize)}
}

// add appends entry e, which must sort after every entry added before; one
// with the key of the last one is skipped (the first of a key wins).
func (w *writer) add(e []byte) error {
	f := w.format
	if w.m.Entries > 0 && f.lead(w.prev) >= f.lead(e) {
		c, same := f.step(w.prev, e)
		if c <= 0 && same {
			return nil
		}
		if c >= 0 {
			return fmt.Errorf("%s: run %s written out of order: %x after %x", f.Name, w.name, e, w.prev)
		}
	}
	if w.blk == nil {
		w.buf = w.buf[:len(w.buf)+BlockSize]
		w.blk = w.buf[len(w.buf)-BlockSize:]
		w.first = append(w.first, Lead(e))
	}
	copy(w.blk[w.n*f.EntrySize:], e[:f.EntrySize])
	if w.aux != nil {
		w.aux.Add(e[:f.EntrySize])
	}
	w.n++
	w.m.Entries++
	w.prev = append(w.prev[:0], e...)
	if w.n == f.full {
		w.seal()
		if len(w.buf) == cap(w.buf) {
			return w.flush()
		}
	}
	return nil
}

// seal closes the block being filled.
func (w *writer) seal() {
	block := int64(len(w.first) - 1)
	w.m.Sum = sumUpdate(w.m.Sum, w.format.sealBlock(w.blk, w.seq, block, w.n))
	w.blk, w.n = nil, 0
}

// flush writes the sealed blocks, and writes out what it wrote since the
// last write-out once that is a vfs.PaceBytes step.
func (w *writer) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if _, err := w.file.WriteAt(w.buf, w.off); err != nil {
		return fmt.Errorf("%s: write %s: %w", w.format.Name, w.name, err)
	}
	w.off += int64(len(w.buf))
	w.buf = w.buf[:0]
	if w.off-w.kicked >= vfs.PaceBytes {
		if err := vfs.WriteOut(w.file, w.kicked, w.off-w.kicked); err != nil {
			return fmt.Errorf("%s: write %s: %w", w.format.Name, w.name, err)
		}
		w.kicked = w.off
	}
	return nil
}

// finish writes the last block and fsyncs the file, and returns the run,
// open for reading with the file. The caller syncs the directory before a
// state lists the run.
func (w *writer) finish() (*Run, error) {
	if w.blk != nil {
		w.seal()
	}
	if err := w.flush(); err != nil {
		return nil, err
	}
	if w.format.Tail {
		// Written once, with the blocks, before the one fsync of the file.
		var aux []byte
		if w.aux != nil {
			aux = w.aux.Bytes()
		}
		if _, err := w.file.WriteAt(w.format.encodeTail(w.m, w.first, Lead(w.prev), aux), w.off); err != nil {
			return nil, fmt.Errorf("%s: write %s: %w", w.format.Name, w.name, err)
		}
	}
	if err := w.file.Sync(); err != nil {
		return nil, w.format.syncFailed(w.name, err)
	}
	r := &Run{Meta: w.m, Name: w.name, First: w.first, Last: Lead(w.prev), format: w.format, file: w.file}
	r.refs.Store(1)
	return r, nil
}

// syncFailed wraps the error of a failed fsync of name in the format's
// SyncFailed, when it has one.
func (f *Format) syncFailed(name string, err error) error {
	if f.SyncFailed == nil {
		return err
	}
	return fmt.Errorf("%w: %s: %w", f.SyncFailed, name, err)
}

// Source is one sorted input of a merge.
type Source interface {
	// Next moves to the next entry; false at the end or on an error.
	Next() bool
	// Entry returns the current entry, valid until the next call of Next.
	Entry() []byte
	// Err returns the error that ended the source, nil at its end.
	Err() error
}

// merge hands the entries of the sorted sources to emit in the format's
// order; of equal entries, the one of the earliest source comes first.
// Few sources (a few runs and the frozen entries) make a linear choice
// cheaper than a heap.
func (f *Format) merge(srcs []Source, emit func(e []byte) error) error {
	live := make([]Source, 0, len(srcs))
	for _, s := range srcs {
		if s.Next() {
			live = append(live, s)
		} else if err := s.Err(); err != nil {
			return err
		}
	}
	for len(live) > 0 {
		k := 0
		for i := 1; i < len(live); i++ {
			a, b := live[i].Entry(), live[k].Entry()
			if la, lb := f.lead(a), f.lead(b); la < lb || la == lb && f.Compare(a, b) < 0 {
				k = i
			}
		}
		if err := emit(live[k].Entry()); err != nil {
			return err
		}
		if !live[k].Next() {
			if err := live[k].Err(); err != nil {
				return err
			}
			live = append(live[:k], live[k+1:]...)
		}
	}
	return nil
}

// WriteRun is the I/O of a job: it merges srcs into run seq of dir, keeping
// the entries keep accepts (all when keep is nil) and of those the first
// of each key, writes it in whole blocks, fsyncs it and then the directory. The
// file is created with the first entry kept: with none, WriteRun leaves no
// file and returns a nil run. On an error the file is closed and removed
// (best effort: no state lists it, and the users' Open deletes it), so
// that no file is written or fsynced twice.
func (f *Format) WriteRun(fs vfs.FS, dir string, seq uint64, srcs []Source, keep func(e []byte) bool) (*Run, error) {
	return f.WriteRunAux(fs, dir, seq, srcs, keep, nil)
}

// TailAux gathers a user's summary of a run as a job writes it, for the
// run's tail (a format with Tail): Add sees every entry written, in
// order, and Bytes returns the summary once the last was added.
type TailAux interface {
	Add(e []byte)
	Bytes() []byte
}

// WriteRunAux is WriteRun that also stores aux's summary in the run's
// tail (aux may be nil: an empty summary).
func (f *Format) WriteRunAux(fs vfs.FS, dir string, seq uint64, srcs []Source, keep func(e []byte) bool, aux TailAux) (*Run, error) {
	name := f.RunName(dir, seq)
	var w *writer
	fail := func(err error) (*Run, error) {
		if w != nil {
			w.file.Close()
			fs.Remove(name)
		}
		return nil, err
	}
	err := f.merge(srcs, func(e []byte) error {
		if keep != nil && !keep(e) {
			return nil
		}
		if w == nil {
			file, err := fs.Create(name)
			if err != nil {
				return err
			}
			w = f.newWriter(file, name, seq)
			w.aux = aux
		}
		return w.add(e)
	})
	if err != nil || w == nil {
		return fail(err)
	}
	r, err := w.finish()
	if err != nil {
		return fail(err)
	}
	r.fs = fs
	if err := fs.SyncDir(dir); err != nil {
		r.Unref()
		fs.Remove(name)
		return nil, f.syncFailed("directory "+dir, err)
	}
	return r, nil
}

// Tier is the size-tiered merge policy: it returns how many of the newest
// runs (sizes, oldest first) a job that writes fresh entries merges into
// its output. The output absorbs the next older run while that run holds
// at most ratio times the entries gathered so far, and regardless while
// more than maxRuns runs would remain; an entry is so rewritten about
// log(N / checkpoint size) times over its life.
func Tier(sizes []uint64, fresh, ratio uint64, maxRuns int) int {
	acc, k := fresh, 0
	for k < len(sizes) {
		s := sizes[len(sizes)-1-k]
		if s > ratio*acc && len(sizes)-k < maxRuns {
			break
		}
		acc += s
		k++
	}
	return k
}
