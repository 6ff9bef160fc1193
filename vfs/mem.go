package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	// locks are the names held by Lock, in this process only.
	locks map[string]bool
}

// memDir is a directory's current and durable entries. A subdirectory is an
// entry whose node has dir set; it is in both sets from its creation on.
type memDir struct {
	entries map[string]*memNode // current namespace
	durable map[string]*memNode // namespace as of the last SyncDir
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

// SyncFiles syncs each named file of dir, as a batch sync would: Mem keeps
// the durability model per file, so batching changes nothing here.
func (m *Mem) SyncFiles(dir string, names []string) error { return syncEach(m, dir, names) }

// Lock takes an in-process exclusive lock on name: a second Lock of the
// same name fails with ErrLocked until the first is closed. A crash image
// (Crash, Clone) starts with no locks, as a rebooted machine does.
func (m *Mem) Lock(name string) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.locks == nil {
		m.locks = map[string]bool{}
	}
	if m.locks[name] {
		return nil, fmt.Errorf("%w: %s", ErrLocked, name)
	}
	m.locks[name] = true
	return memLock{m: m, name: name}, nil
}

type memLock struct {
	m    *Mem
	name string
}

func (l memLock) Close() error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	delete(l.m.locks, l.name)
	return nil
}
