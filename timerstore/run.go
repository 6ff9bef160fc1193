package timerstore

import (
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/hourglass-mq/hourglass/vfs"
)

// run is one immutable run file, open for reading.
type run struct {
	runMeta // deadBelow is the only field that changes (owner's lock)
	name    string
	f       vfs.File
	// first holds the due time of the first entry of each block: the
	// sparse index a load searches for the blocks of a bucket.
	first []int64
	last  int64 // due time of the last entry
	// listed is set once a durable state lists the run (owner's lock):
	// one that no durable state ever listed may go as soon as it leaves
	// the run set (DropUnlisted).
	listed bool
	// refs counts the store's reference (dropped by Release) and the load
	// plans and jobs reading the file; the last one closes it.
	refs atomic.Int32
}

const runSuffix = ".tr"

// runName returns the file name of run seq in dir.
func runName(dir string, seq uint64) string {
	return path.Join(dir, fmt.Sprintf("%016x%s", seq, runSuffix))
}

// parseRunName returns the sequence number a run file's name stands for.
func parseRunName(name string) (uint64, bool) {
	hex, ok := strings.CutSuffix(name, runSuffix)
	if !ok || len(hex) != 16 {
		return 0, false
	}
	seq, err := strconv.ParseUint(hex, 16, 64)
	return seq, err == nil
}

func (r *run) ref() { r.refs.Add(1) }

// unref drops a reference and closes the file with the last one.
func (r *run) unref() {
	if r.refs.Add(-1) == 0 {
		r.f.Close()
	}
}

// live estimates the entries at or after deadBelow: whole blocks before it
// are counted dead.
func (r *run) live() uint64 {
	i := sort.Search(len(r.first), func(i int) bool { return r.first[i] >= r.deadBelow })
	dead := uint64(max(0, i-1)) * blockEntries
	return r.entries - min(r.entries, dead)
}

// readFull reads len(b) bytes at off; a short file is damage.
func readFull(f vfs.File, name string, b []byte, off int64) error {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		return corrupt(name, off+int64(n), "file ends here, expected %d more bytes", len(b)-n)
	}
	return err
}

// readRange returns the entries with lo <= due < hi: it reads the blocks
// the sparse index says may hold them, in one read, and checks each.
func (r *run) readRange(lo, hi int64) ([]Entry, error) {
	if lo >= hi || r.last < lo {
		return nil, nil
	}
	start := max(0, sort.Search(len(r.first), func(i int) bool { return r.first[i] >= lo })-1)
	end := sort.Search(len(r.first), func(i int) bool { return r.first[i] >= hi })
	if start >= end {
		return nil, nil
	}
	buf := make([]byte, (end-start)*BlockSize)
	if err := readFull(r.f, r.name, buf, int64(start)*BlockSize); err != nil {
		return nil, err
	}
	var out []Entry
	for k := range end - start {
		b := buf[k*BlockSize : (k+1)*BlockSize]
		n, _, err := checkBlock(b, r.name, r.seq, int64(start+k))
		if err != nil {
			return nil, err
		}
		for i := range n {
			if e := getEntry(b, i); e.Due >= lo && e.Due < hi {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// chunkBlocks is how many blocks an iterator reads at a time.
const chunkBlocks = 64

// iter walks a run file entry by entry, checking every block, the count of
// each, the order across the file, the file's size and the run's sum.
type iter struct {
	runMeta
	name  string
	f     vfs.File
	buf   []byte
	b     []byte // the current block
	block int64  // its index
	n, i  int    // its count, and the next entry in it
	left  uint64 // entries in the blocks after the current one
	sum   uint32
	first []int64 // when non-nil, collects the sparse index
	prev  Entry
	cur   Entry
	err   error
}

func newIter(m runMeta, name string, f vfs.File, collect bool) *iter {
	it := &iter{runMeta: m, name: name, f: f, block: -1, left: m.entries, sum: checkSeed}
	it.buf = make([]byte, min(m.blocks(), chunkBlocks)*BlockSize)
	if collect {
		it.first = make([]int64, 0, m.blocks())
	}
	return it
}

// next moves to the next entry; false at the end or on an error (it.err).
func (it *iter) next() bool {
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
	e := getEntry(it.b, it.i)
	if (it.block > 0 || it.i > 0) && !it.prev.before(e) {
		it.err = corrupt(it.name, it.block*BlockSize+int64(it.i*EntrySize), "entry (due %d, pos %d) follows (due %d, pos %d): out of order", e.Due, e.Pos, it.prev.Due, it.prev.Pos)
		return false
	}
	it.i++
	it.cur, it.prev = e, e
	return true
}

// end checks what the walk cannot see entry by entry: the sum, and that
// nothing follows the last block.
func (it *iter) end() error {
	if it.sum != it.runMeta.sum {
		return corrupt(it.name, it.blocks()*BlockSize, "run sum %08x, the state recorded %08x", it.sum, it.runMeta.sum)
	}
	size, err := it.f.Size()
	if err != nil {
		return err
	}
	if want := it.blocks() * BlockSize; size != want {
		return corrupt(it.name, want, "file is %d bytes, the state recorded %d entries in %d", size, it.entries, want)
	}
	return nil
}

// nextBlock checks the next block and makes it current, reading the next
// chunk of the file when the buffer is used up.
func (it *iter) nextBlock() error {
	it.block++
	k := int(it.block % chunkBlocks)
	if k == 0 {
		nb := min(it.blocks()-it.block, chunkBlocks)
		if err := readFull(it.f, it.name, it.buf[:nb*BlockSize], it.block*BlockSize); err != nil {
			return err
		}
	}
	it.b = it.buf[k*BlockSize : (k+1)*BlockSize]
	n, c, err := checkBlock(it.b, it.name, it.seq, it.block)
	if err != nil {
		return err
	}
	if want := min(it.left, blockEntries); uint64(n) != want {
		return corrupt(it.name, it.block*BlockSize+countOff, "block holds %d entries, want %d", n, want)
	}
	it.n, it.i, it.left, it.sum = n, 0, it.left-uint64(n), sumUpdate(it.sum, c)
	if it.first != nil {
		it.first = append(it.first, getEntry(it.b, 0).Due)
	}
	return nil
}

// openRun opens run m of dir and checks all of it, handing every entry at
// or after its deadBelow to visit (when not nil).
func openRun(fs vfs.FS, dir string, m runMeta, visit func(Entry)) (*run, error) {
	name := runName(dir, m.seq)
	f, err := fs.Open(name)
	if vfs.IsNotExist(err) {
		return nil, corrupt(name, 0, "file is missing; the state lists %d entries", m.entries)
	}
	if err != nil {
		return nil, err
	}
	// The size first: the state's entry count sizes the sparse index, and
	// a damaged count must not allocate it.
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, err
	}
	if want := m.blocks() * BlockSize; size != want {
		f.Close()
		return nil, corrupt(name, min(size, want), "file is %d bytes, the state recorded %d entries in %d", size, m.entries, want)
	}
	it := newIter(m, name, f, true)
	for it.next() {
		if visit != nil && it.cur.Due >= m.deadBelow {
			visit(it.cur)
		}
	}
	if it.err != nil {
		f.Close()
		return nil, it.err
	}
	r := &run{runMeta: m, name: name, f: f, first: it.first, last: it.prev.Due}
	r.refs.Store(1)
	return r, nil
}

// writer writes a run file block by block.
type writer struct {
	f       vfs.File
	name    string
	seq     uint64
	buf     []byte // whole blocks not yet written
	blk     []byte // the block being filled, within buf
	n       int    // entries in blk
	written int64  // bytes written before buf
	entries uint64
	sum     uint32
	first   []int64
	prev    Entry
}

func newWriter(f vfs.File, name string, seq uint64) *writer {
	return &writer{f: f, name: name, seq: seq, buf: make([]byte, 0, chunkBlocks*BlockSize), sum: checkSeed}
}

// add appends e, which must sort after every entry added before; an equal
// (due, pos) pair is skipped.
func (w *writer) add(e Entry) error {
	if w.entries > 0 && !w.prev.before(e) {
		if e.Due == w.prev.Due && e.Pos == w.prev.Pos {
			return nil
		}
		return fmt.Errorf("timerstore: run %s written out of order: (%d, %d) after (%d, %d)", w.name, e.Due, e.Pos, w.prev.Due, w.prev.Pos)
	}
	if w.blk == nil {
		w.buf = w.buf[:len(w.buf)+BlockSize]
		w.blk = w.buf[len(w.buf)-BlockSize:]
		w.first = append(w.first, e.Due)
	}
	putEntry(w.blk[w.n*EntrySize:], e)
	w.n++
	w.entries++
	w.prev = e
	if w.n == blockEntries {
		w.seal()
		if len(w.buf) == cap(w.buf) {
			return w.flush()
		}
	}
	return nil
}

// seal closes the block being filled.
func (w *writer) seal() {
	block := (w.written+int64(len(w.buf)))/BlockSize - 1
	w.sum = sumUpdate(w.sum, sealBlock(w.blk, w.seq, block, w.n))
	w.blk, w.n = nil, 0
}

// flush writes the sealed blocks, starting their write-out as it goes.
func (w *writer) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if err := vfs.WritePaced(w.f, w.buf, w.written); err != nil {
		return err
	}
	w.written += int64(len(w.buf))
	w.buf = w.buf[:0]
	return nil
}

// finish writes the last block and fsyncs the file; the caller syncs the
// directory.
func (w *writer) finish() (*run, error) {
	if w.blk != nil {
		w.seal()
	}
	if err := w.flush(); err != nil {
		return nil, err
	}
	if err := w.f.Sync(); err != nil {
		return nil, err
	}
	r := &run{runMeta: runMeta{seq: w.seq, entries: w.entries, sum: w.sum}, name: w.name, f: w.f, first: w.first, last: w.prev.Due}
	r.refs.Store(1)
	return r, nil
}
