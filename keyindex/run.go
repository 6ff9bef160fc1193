package keyindex

import (
	"encoding/binary"
	"fmt"
	"io"
	"path"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/hourglass-mq/hourglass/vfs"
)

// run is one immutable run file, open for reading.
type run struct {
	runMeta
	name string
	f    vfs.File
	// first holds the first hash of each block: the sparse index a Get
	// searches to pick the one block that may hold a hash.
	first []uint64
	// refs counts the run set's reference (dropped by Release or Close)
	// and the Gets reading the file; the last one closes it.
	refs atomic.Int32
}

// runName returns the file name of run seq in dir.
func runName(dir string, seq uint64) string {
	return path.Join(dir, fmt.Sprintf("%016x%s", seq, runSuffix))
}

const runSuffix = ".kix"

func (r *run) ref() { r.refs.Add(1) }

// unref drops a reference and closes the file with the last one.
func (r *run) unref() {
	if r.refs.Add(-1) == 0 {
		r.f.Close()
	}
}

// blockPool holds the buffers Gets read blocks into.
var blockPool = sync.Pool{New: func() any { return new([BlockSize]byte) }}

// get looks h up in the run: one pread of the block the sparse index
// points at, which is checked before it is believed.
func (r *run) get(h uint64, b []byte) (uint64, bool, error) {
	i := sort.Search(len(r.first), func(i int) bool { return r.first[i] > h }) - 1
	if i < 0 {
		return 0, false, nil
	}
	if err := readFull(r.f, r.name, b, int64(i)*BlockSize); err != nil {
		return 0, false, err
	}
	n, _, err := checkBlock(b, r.name, r.seq, int64(i))
	if err != nil {
		return 0, false, err
	}
	j := sort.Search(n, func(j int) bool { return binary.LittleEndian.Uint64(b[j*slotSize:]) >= h })
	if j == n {
		return 0, false, nil
	}
	if sh, pos := slot(b, j); sh == h {
		return pos, true, nil
	}
	return 0, false, nil
}

// readFull reads len(b) bytes at off; a file that ends first is corrupt
// (run files are written whole before any state lists them).
func readFull(f vfs.File, name string, b []byte, off int64) error {
	n, err := f.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == io.EOF || err == nil {
		return corrupt(name, off+int64(n), "file ends here")
	}
	return fmt.Errorf("keyindex: read %s at offset %d: %w", name, off, err)
}

// chunkBlocks is how many blocks a reader or writer moves per call: 64 KiB,
// so merging k runs holds (k+1) * 64 KiB.
const chunkBlocks = 16

// iter streams the entries of a run in order, checking every block, every
// count and the order as it goes; Open runs one over each run to verify
// it, and merges read their inputs through it.
type iter struct {
	runMeta
	name   string
	f      vfs.File
	buf    []byte
	block  int64 // index of the block b holds
	b      []byte
	n, i   int // entries in b, next one to return
	left   uint64
	sum    uint32
	first  []uint64 // when non-nil, collects the sparse index
	prev   uint64
	h, pos uint64
	err    error
}

func newIter(m runMeta, name string, f vfs.File, collect bool) *iter {
	it := &iter{runMeta: m, name: name, f: f, block: -1, left: m.entries, sum: checkSeed}
	it.buf = make([]byte, min(m.blocks(), chunkBlocks)*BlockSize)
	if collect {
		it.first = make([]uint64, 0, m.blocks())
	}
	return it
}

// next moves to the next entry; false at the end or on an error (see err).
func (it *iter) next() bool {
	if it.err != nil {
		return false
	}
	if it.i == it.n {
		if it.left == 0 {
			if it.sum != it.runMeta.sum {
				it.err = corrupt(it.name, it.blocks()*BlockSize, "run sum %08x, the state recorded %08x", it.sum, it.runMeta.sum)
			}
			return false
		}
		if it.err = it.nextBlock(); it.err != nil {
			return false
		}
	}
	h, pos := slot(it.b, it.i)
	if (it.block > 0 || it.i > 0) && h <= it.prev {
		it.err = corrupt(it.name, it.block*BlockSize+int64(it.i*slotSize), "hash %016x follows %016x: out of order", h, it.prev)
		return false
	}
	it.i++
	it.h, it.pos, it.prev = h, pos, h
	return true
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
		it.first = append(it.first, binary.LittleEndian.Uint64(it.b))
	}
	return nil
}

// openRun opens the run m of dir and checks all of it.
func openRun(fs vfs.FS, dir string, m runMeta) (*run, error) {
	name := runName(dir, m.seq)
	f, err := fs.Open(name)
	if vfs.IsNotExist(err) {
		return nil, corrupt(name, 0, "file is missing, the state lists it")
	}
	if err != nil {
		return nil, err
	}
	r, err := checkRun(f, name, m)
	if err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

// checkRun checks the size and every entry of the run in f.
func checkRun(f vfs.File, name string, m runMeta) (*run, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if want := m.blocks() * BlockSize; size != want {
		return nil, corrupt(name, min(size, want), "file has %d bytes, the state says %d entries in %d", size, m.entries, want)
	}
	it := newIter(m, name, f, true)
	for it.next() {
	}
	if it.err != nil {
		return nil, it.err
	}
	r := &run{runMeta: m, name: name, f: f, first: it.first}
	r.refs.Store(1)
	return r, nil
}

// writer writes a run file: entries in strictly increasing hash order,
// whole blocks, a chunk at a time.
type writer struct {
	name string
	f    vfs.File
	seq  uint64
	buf  []byte
	off  int64 // file offset of buf[0]
	// kicked is the end of the range last written out: every
	// vfs.PaceBytes written are written out and waited for (vfs.WriteOut),
	// so the final fsync has little left and the device never holds more
	// than a step of the run ahead of another file's fsync.
	kicked int64
	nb     int // whole blocks in buf
	n      int // entries in the block being filled
	m      runMeta
	first  []uint64
}

func newWriter(f vfs.File, name string, seq uint64) *writer {
	return &writer{name: name, f: f, seq: seq, buf: make([]byte, chunkBlocks*BlockSize), m: runMeta{seq: seq, sum: checkSeed}}
}

// add appends an entry; h must be greater than the last one's.
func (w *writer) add(h, pos uint64) error {
	b := w.buf[w.nb*BlockSize:]
	if w.n == 0 {
		clear(b[:BlockSize])
		w.first = append(w.first, h)
	}
	binary.LittleEndian.PutUint64(b[w.n*slotSize:], h)
	binary.LittleEndian.PutUint64(b[w.n*slotSize+8:], pos)
	w.n++
	w.m.entries++
	if w.n == blockEntries {
		return w.seal()
	}
	return nil
}

// seal closes the block being filled and writes the buffer when full.
func (w *writer) seal() error {
	block := int64(len(w.first) - 1)
	c := sealBlock(w.buf[w.nb*BlockSize:(w.nb+1)*BlockSize], w.seq, block, w.n)
	w.m.sum = sumUpdate(w.m.sum, c)
	w.nb, w.n = w.nb+1, 0
	if w.nb == chunkBlocks {
		return w.flush()
	}
	return nil
}

func (w *writer) flush() error {
	if w.nb == 0 {
		return nil
	}
	if _, err := w.f.WriteAt(w.buf[:w.nb*BlockSize], w.off); err != nil {
		return fmt.Errorf("keyindex: write %s: %w", w.name, err)
	}
	w.off += int64(w.nb) * BlockSize
	w.nb = 0
	if w.off-w.kicked >= vfs.PaceBytes {
		if err := vfs.WriteOut(w.f, w.kicked, w.off-w.kicked); err != nil {
			return fmt.Errorf("keyindex: write %s: %w", w.name, err)
		}
		w.kicked = w.off
	}
	return nil
}

// finish writes what is buffered and fsyncs the file; a failed fsync
// wraps ErrSyncFailed.
func (w *writer) finish() (*run, error) {
	if w.n > 0 {
		if err := w.seal(); err != nil {
			return nil, err
		}
	}
	if err := w.flush(); err != nil {
		return nil, err
	}
	if err := w.f.Sync(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrSyncFailed, w.name, err)
	}
	r := &run{runMeta: w.m, name: w.name, f: w.f, first: w.first}
	r.refs.Store(1)
	return r, nil
}
