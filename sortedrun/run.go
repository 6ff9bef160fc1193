package sortedrun

import (
	"fmt"
	"io"
	"sync/atomic"

	"github.com/hourglass-mq/hourglass/vfs"
)

// Run is one immutable run file, open for reading.
type Run struct {
	// Meta is what the state records of the run. The user may change
	// DeadBelow (under its own lock); nothing else changes.
	Meta
	// Name is the file's path.
	Name string
	// First holds Lead of the first entry of each block: the sparse index
	// a reader searches for the blocks that may hold what it looks for.
	First []uint64
	// Last is Lead of the run's last entry.
	Last uint64
	// FromTail says that OpenRunTail took First, Last and Aux from the
	// run's tail and read none but its first and last blocks: every block
	// is checked as it is read, and Verify checks the run whole.
	FromTail bool
	// Aux is the user's summary of the run its tail holds (TailAux), when
	// FromTail.
	Aux []byte

	format *Format
	file   vfs.File
	// fs is where the run lives, for recording damage a reader meets in it
	// (noteDamage); marked says that it was recorded.
	fs     vfs.FS
	marked atomic.Bool
	// refs counts the user's reference and the readers' (load plans,
	// jobs, lookups); the last Unref closes the file.
	refs atomic.Int32
}

// Ref takes a reference: the file stays open until it is dropped.
func (r *Run) Ref() { r.refs.Add(1) }

// Unref drops a reference and closes the file with the last one.
func (r *Run) Unref() {
	if r.refs.Add(-1) == 0 {
		r.file.Close()
	}
}

// readFull reads len(b) bytes at off; a file that ends first is damage
// (run files are written whole before any state lists them).
func (f *Format) readFull(file vfs.File, name string, b []byte, off int64) error {
	n, err := file.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		return f.corrupt(name, off+int64(n), "file ends here, expected %d more bytes", len(b)-n)
	}
	return fmt.Errorf("%s: read %s at offset %d: %w", f.Name, name, off, err)
}

// ReadBlocks reads blocks [start, end) of the run in one read, checks each
// and hands it and its count to visit, in order. Damage is an error
// wrapping the format's Corrupt error.
func (r *Run) ReadBlocks(start, end int, visit func(block []byte, n int)) error {
	buf := make([]byte, (end-start)*BlockSize)
	if err := r.format.readFull(r.file, r.Name, buf, int64(start)*BlockSize); err != nil {
		return r.noteDamage(err)
	}
	for k := range end - start {
		b := buf[k*BlockSize : (k+1)*BlockSize]
		n, err := r.checkRead(b, start+k)
		if err != nil {
			return r.noteDamage(err)
		}
		visit(b, n)
	}
	return nil
}

// checkRead checks block i of the run, read into b: its check and
// trailer, and that its first entry is the one the sparse index holds (a
// sparse index from a tail is checked against every block read).
func (r *Run) checkRead(b []byte, i int) (int, error) {
	n, _, err := r.format.checkBlock(b, r.Name, r.Seq, int64(i))
	if err == nil && Lead(b) != r.First[i] {
		err = r.format.corrupt(r.Name, int64(i)*BlockSize, "block's first entry %x disagrees with the sparse index (%x)", Lead(b), r.First[i])
	}
	return n, err
}

// ReadBlock reads block i of the run into b (BlockSize bytes), checks it
// and returns its count: one pread, for lookups that keep b in a pool.
func (r *Run) ReadBlock(b []byte, i int) (int, error) {
	if err := r.format.readFull(r.file, r.Name, b, int64(i)*BlockSize); err != nil {
		return 0, r.noteDamage(err)
	}
	n, err := r.checkRead(b, i)
	return n, r.noteDamage(err)
}

// OpenRun opens run m of dir and checks all of it: the file's size first
// (a damaged entry count must not size the sparse index), then every
// block, the order and the run's sum. It hands every entry to visit, when
// not nil, in order; the slice is valid only during the call.
func (f *Format) OpenRun(fs vfs.FS, dir string, m Meta, visit func(e []byte)) (*Run, error) {
	name := f.RunName(dir, m.Seq)
	if m.Entries == 0 {
		return nil, f.corrupt(name, 0, "the state lists a run of no entries")
	}
	file, err := fs.Open(name)
	if vfs.IsNotExist(err) {
		return nil, f.corrupt(name, 0, "file is missing; the state lists %d entries", m.Entries)
	}
	if err != nil {
		return nil, err
	}
	if _, err := f.checkSize(file, name, m); err != nil {
		file.Close()
		return nil, err
	}
	it := f.newIter(m, name, file, true)
	for it.Next() {
		if visit != nil {
			visit(it.Entry())
		}
	}
	if it.err != nil {
		file.Close()
		return nil, it.err
	}
	r := &Run{Meta: m, Name: name, First: it.first, Last: Lead(it.Entry()), format: f, file: file, fs: fs}
	r.refs.Store(1)
	return r, nil
}

// checkSize returns the size of file, and fails unless it has the size of
// run m: its blocks, and for a format with tails maybe more (a tail is
// checked before it is used, and a bad one costs only a whole read).
func (f *Format) checkSize(file vfs.File, name string, m Meta) (int64, error) {
	size, err := file.Size()
	if err != nil {
		return 0, err
	}
	if want := f.Blocks(m) * BlockSize; size != want && (!f.Tail || size < want) {
		return 0, f.corrupt(name, min(size, want), "file is %d bytes, the state recorded %d entries in %d", size, m.Entries, want)
	}
	return size, nil
}

// Iter walks a run file entry by entry, checking every block, the count of
// each, the order across the file, the run's sum and the file's size. It
// is a Source of a merge.
type Iter struct {
	Meta
	format *Format
	name   string
	file   vfs.File
	buf    []byte
	b      []byte // the current block
	block  int64  // its index
	n, i   int    // its count, and the next entry in it
	left   uint64 // entries in the blocks after the current one
	sum    uint32
	first  []uint64 // when non-nil, collects the sparse index
	size   int      // the format's EntrySize
	// lead is the current entry's lead (as the format orders it), once
	// started: the order check compares leads and looks at the entries
	// themselves only when they are equal.
	lead    uint64
	started bool
	// onRead, when not nil, is called with the size of each read before
	// it is made (Verify's pacing); its error ends the walk.
	onRead func(n int) error
	last   []byte // a copy of the last entry of the block before
	err    error
	// run, when not nil, is the run walked: damage that ends the walk is
	// recorded there (Run.noteDamage) when Err reports it.
	run *Run
}

// NewIter returns an iterator over run r as m describes it (the Meta the
// reader captured: its DeadBelow may differ from r's by now).
func (r *Run) NewIter(m Meta) *Iter {
	it := r.format.newIter(m, r.Name, r.file, false)
	it.run = r
	return it
}

func (f *Format) newIter(m Meta, name string, file vfs.File, collect bool) *Iter {
	it := &Iter{Meta: m, format: f, name: name, file: file, block: -1, left: m.Entries, sum: f.Seed, size: f.EntrySize}
	it.buf = make([]byte, min(f.Blocks(m), int64(f.Chunk))*BlockSize)
	if collect {
		it.first = make([]uint64, 0, f.Blocks(m))
	}
	return it
}

// Next moves to the next entry; false at the end or on an error (Err).
func (it *Iter) Next() bool {
	if it.err != nil {
		return false
	}
	if it.i == it.n {
		if it.left == 0 {
			it.err = it.end()
			return false
		}
		if it.err = it.nextBlock(); it.err != nil {
			return false
		}
	}
	e := it.b[it.i*it.size : (it.i+1)*it.size]
	lead := it.format.lead(e)
	if it.started && it.lead >= lead && it.disorder(e) {
		return false
	}
	it.i++
	it.lead, it.started = lead, true
	return true
}

// disorder reports whether e, the next entry, breaks the order after the
// current one, and sets the error if so: the slow path of Next, for
// entries whose leads do not decide.
func (it *Iter) disorder(e []byte) bool {
	prev := it.last
	if it.i > 0 {
		prev = it.Entry()
	}
	c, same := it.format.step(prev, e)
	if c < 0 && !same {
		return false
	}
	it.err = it.format.corrupt(it.name, it.Offset()+int64(it.size), "entry %x follows %x: out of order", e, prev)
	return true
}

// Entry returns the current entry, valid until the next call of Next.
func (it *Iter) Entry() []byte { return it.b[(it.i-1)*it.size : it.i*it.size : it.i*it.size] }

// Err returns the error that ended the walk, nil at its end. Damage in a
// run's iterator is recorded in the run first (Run.noteDamage).
func (it *Iter) Err() error {
	if it.err != nil && it.run != nil {
		it.err = it.run.noteDamage(it.err)
		it.run = nil
	}
	return it.err
}

// Offset returns the current entry's offset in the file.
func (it *Iter) Offset() int64 {
	return it.block*BlockSize + int64((it.i-1)*it.format.EntrySize)
}

// end checks what the walk cannot see entry by entry: the sum, and that
// nothing follows the last block.
func (it *Iter) end() error {
	if it.sum != it.Meta.Sum {
		return it.format.corrupt(it.name, it.format.Blocks(it.Meta)*BlockSize, "run sum %08x, the state recorded %08x", it.sum, it.Meta.Sum)
	}
	_, err := it.format.checkSize(it.file, it.name, it.Meta)
	return err
}

// nextBlock checks the next block and makes it current, reading the next
// chunk of the file when the buffer is used up.
func (it *Iter) nextBlock() error {
	f := it.format
	if it.started {
		// The next read overwrites the chunk: keep a copy of the entry the
		// order check may need.
		it.last = append(it.last[:0], it.Entry()...)
	}
	it.block++
	k := int(it.block % int64(f.Chunk))
	if k == 0 {
		nb := min(f.Blocks(it.Meta)-it.block, int64(f.Chunk))
		if it.onRead != nil {
			if err := it.onRead(int(nb * BlockSize)); err != nil {
				return err
			}
		}
		if err := f.readFull(it.file, it.name, it.buf[:nb*BlockSize], it.block*BlockSize); err != nil {
			return err
		}
	}
	it.b = it.buf[k*BlockSize : (k+1)*BlockSize]
	n, c, err := f.checkBlock(it.b, it.name, it.Seq, it.block)
	if err != nil {
		return err
	}
	if want := min(it.left, uint64(f.full)); uint64(n) != want {
		return f.corrupt(it.name, it.block*BlockSize+countOff, "block holds %d entries, want %d", n, want)
	}
	it.n, it.i, it.left, it.sum = n, 0, it.left-uint64(n), sumUpdate(it.sum, c)
	if it.first != nil {
		it.first = append(it.first, Lead(it.b))
	}
	return nil
}
