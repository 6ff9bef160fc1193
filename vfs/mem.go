package vfs

import (
	"errors"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"sync"
)

// Mem is an in-memory FS that keeps apart what was written and what was made
// durable, so that a test can take the image a power loss would leave
// behind (Crash) without root and in microseconds.
//
// The model, which follows the FS durability contract:
//
//   - Each file has current data and durable data. File.Sync sets the durable
//     data to the current data. WriteAt and Truncate change current data only.
//   - Each directory has a current set of entries and a durable set. SyncDir
//     copies the current set of that one directory into its durable set, so
//     every create, remove and rename into or out of it becomes durable at
//     once. A file whose entry was never made durable is gone after a crash
//     even if its data was synced; a file whose entry is durable but whose
//     data was never synced comes back empty (or with its last synced data).
//   - A rename across directories changes two directories, and each becomes
//     durable on its own SyncDir: sync both to make the move durable. If only
//     the target is synced, the crash image holds the file under both names
//     (one file, two entries, like a hard link); if only the source is
//     synced, the file is gone from both.
//   - A failed fsync drops what it covered, as Linux does (see
//     Faulty.SetSyncFailure): the kernel marks the pages it could not write
//     clean, so reads still return the new bytes but a later Sync does not
//     write them and a power loss reverts them to their last durable
//     content. Mem tracks this per page of MemPageSize bytes: such "lost"
//     pages keep their durable content on every later Sync and Crash until
//     a write or truncate touches them again, which dirties the whole page
//     (its current bytes, the ones reads return, are then written at the
//     next Sync). A later Sync does make the file's current length durable,
//     so lost pages beyond the old durable length come back as zeros.
//   - Directories are durable as soon as MkdirAll creates them, and cannot be
//     removed or renamed. This is simpler than requiring a SyncDir of the
//     parent and loses nothing a test of hourglass needs: the broker creates
//     its directories once at start-up, before anything depends on them.
//
// Files are identified by node, not by name, as on POSIX: an open file keeps
// working after its name is removed or renamed (its data is then reachable
// only through the open handle), and Create on an existing name truncates the
// same file rather than replacing it.
//
// Names are cleaned with path.Clean; relative names live under ".", absolute
// ones under "/", and both roots always exist.
//
// Mem is safe for concurrent use; one mutex serializes all operations.
type Mem struct {
	mu sync.Mutex
	// dirs maps a cleaned directory path to its entries. Every directory is
	// durable (see above), so this one map serves the current and the
	// durable namespace; each memDir carries both entry sets.
	dirs map[string]*memDir
}

// memDir is a directory's current and durable entries. A subdirectory is an
// entry whose node has dir set; it is in both sets from its creation on.
type memDir struct {
	entries map[string]*memNode // current namespace
	durable map[string]*memNode // namespace as of the last SyncDir
}

// memNode is a file (or the entry of a subdirectory, when dir is set).
//
// Invariant: synced may share its backing array with data to make Sync O(1)
// (shared is then true); while shared, bytes of data below len(synced) must
// not be modified in place — mutateLocked detaches synced first. Bytes at or
// beyond len(synced) are not part of synced, so appends need no copy.
type memNode struct {
	dir    bool
	data   []byte // current content
	synced []byte // durable content
	shared bool   // synced aliases data's backing array
	// lost holds the indexes of the pages (MemPageSize bytes each) that a
	// failed Sync marked clean without writing: their current bytes are
	// what reads return, their durable bytes are those of synced (zeros
	// past its end) whatever later Syncs do. Empty in the common case, so
	// that Sync stays O(1). A page leaves lost when a write or truncate
	// touches it (it is dirty again) or when the file no longer reaches it.
	lost map[int64]struct{}
}

// MemPageSize is the page size of Mem's failed-sync model: a failed Sync
// drops whole pages, and a write into a dropped page dirties all of it
// again, as the page cache does.
const MemPageSize = 4096

// NewMem returns an empty in-memory FS holding only the roots "." and "/".
func NewMem() *Mem {
	m := &Mem{dirs: make(map[string]*memDir)}
	m.dirs["."] = newMemDir()
	m.dirs["/"] = newMemDir()
	return m
}

func newMemDir() *memDir {
	return &memDir{entries: make(map[string]*memNode), durable: make(map[string]*memNode)}
}

// mutateLocked prepares n for a change of data's bytes from index lo on: if
// that range overlaps the durable bytes that share data's array, the durable
// bytes get their own copy first.
func (n *memNode) mutateLocked(lo int64) {
	if n.shared && lo < int64(len(n.synced)) {
		n.synced = slices.Clone(n.synced)
		n.shared = false
	}
}

// touchLocked records that bytes [lo, hi) of the current data change: the
// pages they fall in are dirty again, so none of them stays lost.
func (n *memNode) touchLocked(lo, hi int64) {
	if len(n.lost) == 0 || hi <= lo {
		return
	}
	first, last := lo/MemPageSize, (hi-1)/MemPageSize
	for p := range n.lost {
		if p >= first && p <= last {
			delete(n.lost, p)
		}
	}
}

// durableByte returns the durable byte at i: synced's, or zero past its
// end (a region the file never durably held reads as a hole).
func (n *memNode) durableByte(i int64) byte {
	if i < int64(len(n.synced)) {
		return n.synced[i]
	}
	return 0
}

// writebackLocked returns what writing back every dirty page would leave on
// disk: the current data, except that lost pages keep their durable bytes.
// Without lost pages it is the current data itself (not a copy).
func (n *memNode) writebackLocked() []byte {
	if len(n.lost) == 0 {
		return n.data
	}
	out := slices.Clone(n.data)
	for p := range n.lost {
		lo, hi := p*MemPageSize, min((p+1)*MemPageSize, int64(len(out)))
		for i := lo; i < hi; i++ {
			out[i] = n.durableByte(i)
		}
	}
	return out
}

// dropDirtyLocked is what a failed fsync does: every dirty page (one whose
// current bytes differ from its durable ones and that is not lost already)
// is marked clean without being written, so it joins lost. Pages equal to
// their durable content need no tracking: losing them changes nothing.
func (n *memNode) dropDirtyLocked() {
	size := int64(len(n.data))
	for p := int64(0); p*MemPageSize < size; p++ {
		if _, ok := n.lost[p]; ok {
			continue
		}
		lo, hi := p*MemPageSize, min((p+1)*MemPageSize, size)
		for i := lo; i < hi; i++ {
			if n.data[i] != n.durableByte(i) {
				if n.lost == nil {
					n.lost = make(map[int64]struct{})
				}
				n.lost[p] = struct{}{}
				break
			}
		}
	}
}

// resizeLocked sets the current length to size, zero-filling any growth.
// The pages between the old and the new end are dirty (the kernel zeroes
// the tail of a cut page and writes it again).
func (n *memNode) resizeLocked(size int64) {
	old := int64(len(n.data))
	n.touchLocked(min(old, size), max(old, size))
	if size <= old {
		n.data = n.data[:size]
		return
	}
	n.mutateLocked(old)
	if size <= int64(cap(n.data)) {
		n.data = n.data[:size]
		clear(n.data[old:])
		return
	}
	n.data = append(n.data, make([]byte, size-old)...)
}

// lookupLocked splits name into its parent directory and base name and
// returns the parent, which must exist.
func (m *Mem) lookupLocked(op, name string) (*memDir, string, error) {
	if name == "" {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: notExistError{}}
	}
	clean := path.Clean(name)
	if clean == "." || clean == "/" {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: errIsDir}
	}
	dir, base := path.Split(clean)
	dir = path.Clean(dir) // "" becomes ".", "a/" becomes "a", "/" stays
	d, ok := m.dirs[dir]
	if !ok {
		if m.isFileLocked(dir) {
			return nil, "", &fs.PathError{Op: op, Path: name, Err: errNotDir}
		}
		return nil, "", &fs.PathError{Op: op, Path: name, Err: notExistError{}}
	}
	return d, base, nil
}

// isFileLocked reports whether the cleaned path p names an existing file.
func (m *Mem) isFileLocked(p string) bool {
	if p == "." || p == "/" {
		return false
	}
	d, ok := m.dirs[path.Dir(p)]
	if !ok {
		return false
	}
	n, ok := d.entries[path.Base(p)]
	return ok && !n.dir
}

// Create creates name, or truncates it if it exists (keeping the same file,
// as O_TRUNC does), opened read-write. The parent directory must exist.
func (m *Mem) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.lookupLocked("create", name)
	if err != nil {
		return nil, err
	}
	n, ok := d.entries[base]
	switch {
	case ok && n.dir:
		return nil, &fs.PathError{Op: "create", Path: name, Err: errIsDir}
	case ok:
		n.resizeLocked(0)
	default:
		n = &memNode{}
		d.entries[base] = n
	}
	return &memFile{m: m, n: n, name: name}, nil
}

// Open opens an existing file read-write.
func (m *Mem) Open(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.fileLocked("open", name)
	if err != nil {
		return nil, err
	}
	return &memFile{m: m, n: n, name: name}, nil
}

// fileLocked returns the file node that name refers to.
func (m *Mem) fileLocked(op, name string) (*memNode, error) {
	d, base, err := m.lookupLocked(op, name)
	if err != nil {
		return nil, err
	}
	n, ok := d.entries[base]
	if !ok {
		return nil, &fs.PathError{Op: op, Path: name, Err: notExistError{}}
	}
	if n.dir {
		return nil, &fs.PathError{Op: op, Path: name, Err: errIsDir}
	}
	return n, nil
}

// Remove deletes the entry of a file. Open handles keep working. Directories
// cannot be removed.
func (m *Mem) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.fileLocked("remove", name); err != nil {
		return err
	}
	d, base, _ := m.lookupLocked("remove", name)
	delete(d.entries, base)
	return nil
}

// Rename atomically replaces newname with the file oldname. Both parents
// must exist; directories cannot be renamed or replaced. See the type's doc
// for the durability of a rename across directories.
func (m *Mem) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.fileLocked("rename", oldname)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: unwrapPath(err)}
	}
	nd, nbase, err := m.lookupLocked("rename", newname)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: unwrapPath(err)}
	}
	if old, ok := nd.entries[nbase]; ok && old.dir {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: errIsDir}
	}
	od, obase, _ := m.lookupLocked("rename", oldname)
	delete(od.entries, obase)
	nd.entries[nbase] = n
	return nil
}

// unwrapPath returns the cause inside an *fs.PathError, to re-wrap it in an
// *fs.LinkError as os.Rename does.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// MkdirAll creates dir and its missing parents. New directories are durable
// at once (see the type's doc).
func (m *Mem) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mkdirAllLocked(path.Clean(dir), dir)
}

func (m *Mem) mkdirAllLocked(p, orig string) error {
	if _, ok := m.dirs[p]; ok {
		return nil
	}
	parent := path.Dir(p)
	if err := m.mkdirAllLocked(parent, orig); err != nil {
		return err
	}
	pd := m.dirs[parent]
	base := path.Base(p)
	if n, ok := pd.entries[base]; ok && !n.dir {
		return &fs.PathError{Op: "mkdir", Path: orig, Err: errNotDir}
	}
	n := &memNode{dir: true}
	pd.entries[base] = n
	pd.durable[base] = n
	m.dirs[p] = newMemDir()
	return nil
}

// dirLocked returns the directory dir.
func (m *Mem) dirLocked(op, dir string) (*memDir, error) {
	p := path.Clean(dir)
	d, ok := m.dirs[p]
	if !ok {
		if m.isFileLocked(p) {
			return nil, &fs.PathError{Op: op, Path: dir, Err: errNotDir}
		}
		return nil, &fs.PathError{Op: op, Path: dir, Err: notExistError{}}
	}
	return d, nil
}

// List returns the sorted names of dir's current entries, subdirectories
// included.
func (m *Mem) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.dirLocked("list", dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(d.entries))
	for name := range d.entries {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// SyncDir makes dir's current entries its durable entries.
func (m *Mem) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.dirLocked("syncdir", dir)
	if err != nil {
		return err
	}
	clear(d.durable)
	for name, n := range d.entries {
		d.durable[name] = n
	}
	return nil
}

// UsedBytes returns the total current size of the files reachable by name.
// A file with two names (see the type's doc) counts once; a removed file
// that is still open does not count.
func (m *Mem) UsedBytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := make(map[*memNode]bool)
	var total int64
	for _, d := range m.dirs {
		for _, n := range d.entries {
			if !n.dir && !seen[n] {
				seen[n] = true
				total += int64(len(n.data))
			}
		}
	}
	return total
}

// Crash returns a new Mem holding what a power loss at this instant would
// leave: the durable entries of every directory, each file with its durable
// data. m itself is unchanged, so a test can take many crash images of one
// run.
//
// With a non-nil rng each file additionally keeps a random prefix (possibly
// empty, possibly all) of its current bytes beyond its durable length (with
// the pages a failed Sync dropped holding zeros instead: see the type): the
// writes of an append-only file reach the disk in order but may be cut at
// any byte. Bytes below the durable length are always the durable ones, and
// no byte is ever made up. Directory entries are not randomized: an unsynced
// entry is always lost. Files and directories are visited in sorted order,
// so the same rng seed gives the same image.
func (m *Mem) Crash(rng *rand.Rand) *Mem {
	m.mu.Lock()
	defer m.mu.Unlock()
	image := func(n *memNode) *memNode {
		data := slices.Clone(n.synced)
		if rng != nil && len(n.data) > len(n.synced) {
			// Lost pages were marked clean: writeback never sends them.
			wb := n.writebackLocked()
			extra := len(wb) - len(n.synced)
			k := rng.IntN(extra + 1)
			data = append(data, wb[len(n.synced):len(n.synced)+k]...)
		}
		return &memNode{data: data, synced: slices.Clone(data)}
	}
	return m.copyLocked(func(d *memDir) map[string]*memNode { return d.durable }, image)
}

// Clone returns a new Mem with the current state of m: current entries and
// data, and the same durable state, so that Crash of the clone equals Crash
// of m. Open handles are not carried over.
func (m *Mem) Clone() *Mem {
	m.mu.Lock()
	defer m.mu.Unlock()
	clone := func(n *memNode) *memNode {
		return &memNode{data: slices.Clone(n.data), synced: slices.Clone(n.synced), lost: maps.Clone(n.lost)}
	}
	return m.copyLocked(func(d *memDir) map[string]*memNode { return d.entries }, clone)
}

// copyLocked builds a new Mem whose directories hold, as both current and
// durable entries, the set pick selects from each of m's directories, with
// every file node replaced once by conv (a node with two names stays one
// node). For Clone the durable sets are then filled in from m's durable sets.
func (m *Mem) copyLocked(pick func(*memDir) map[string]*memNode, conv func(*memNode) *memNode) *Mem {
	c := &Mem{dirs: make(map[string]*memDir, len(m.dirs))}
	nodes := make(map[*memNode]*memNode)
	convert := func(n *memNode) *memNode {
		if n.dir {
			return &memNode{dir: true}
		}
		if cn, ok := nodes[n]; ok {
			return cn
		}
		cn := conv(n)
		nodes[n] = cn
		return cn
	}
	paths := make([]string, 0, len(m.dirs))
	for p := range m.dirs {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		src := m.dirs[p]
		cd := newMemDir()
		set := pick(src)
		names := make([]string, 0, len(set))
		for name := range set {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			cd.entries[name] = convert(set[name])
		}
		c.dirs[p] = cd
	}
	// Durable sets: for a crash image the durable set is what was picked;
	// for a clone it is m's durable set, mapped to the same nodes.
	for _, p := range paths {
		src, cd := m.dirs[p], c.dirs[p]
		names := make([]string, 0, len(src.durable))
		for name := range src.durable {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			n := src.durable[name]
			if n.dir {
				cd.durable[name] = cd.entries[name]
				continue
			}
			if _, picked := nodes[n]; !picked {
				nodes[n] = conv(n)
			}
			cd.durable[name] = nodes[n]
		}
	}
	return c
}

// memFile is an open handle on a Mem file.
type memFile struct {
	m      *Mem
	n      *memNode
	name   string
	closed bool // guarded by m.mu
}

func (f *memFile) checkLocked(op string) error {
	if f.closed {
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	}
	return nil
}

// ReadAt reads from the current data; like os.File it returns io.EOF when
// fewer than len(p) bytes are available.
func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: errors.New("negative offset")}
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt writes p at off, zero-filling any gap past the end.
func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("write"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: errors.New("negative offset")}
	}
	end := off + int64(len(p))
	if end > int64(len(f.n.data)) {
		f.n.resizeLocked(end)
	}
	f.n.touchLocked(off, end)
	f.n.mutateLocked(off)
	copy(f.n.data[off:], p)
	return len(p), nil
}

// Close releases the handle; later calls on it fail with fs.ErrClosed.
func (f *memFile) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("close"); err != nil {
		return err
	}
	f.closed = true
	return nil
}

// Sync makes the current data durable, except the pages a failed Sync
// dropped (see the type). Without such pages it is O(1): the durable bytes
// share the current array until one of them is overwritten.
func (f *memFile) Sync() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("sync"); err != nil {
		return err
	}
	if len(f.n.lost) > 0 {
		f.n.synced = f.n.writebackLocked()
		f.n.shared = false
		return nil
	}
	f.n.synced = f.n.data[:len(f.n.data):len(f.n.data)]
	f.n.shared = true
	return nil
}

// dropDirtyPages is called by Faulty instead of Sync when it fails a Sync:
// the dirty pages are marked clean without being made durable.
func (f *memFile) dropDirtyPages() {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if !f.closed {
		f.n.dropDirtyLocked()
	}
}

// Truncate cuts or zero-extends the current data.
func (f *memFile) Truncate(size int64) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("truncate"); err != nil {
		return err
	}
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: errors.New("negative size")}
	}
	f.n.resizeLocked(size)
	return nil
}

// Size returns the current length.
func (f *memFile) Size() (int64, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("stat"); err != nil {
		return 0, err
	}
	return int64(len(f.n.data)), nil
}
