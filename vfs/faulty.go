package vfs

import (
	"fmt"
	"io/fs"
	"path"
	"sync"
	"syscall"
)

// Op names an operation of FS or File, for Faulty's fault hooks.
type Op uint8

// The operations a Faulty hook sees. File.Close and File.Size are not
// hooked: callers cannot do anything useful about their failure.
const (
	OpCreate   Op = iota + 1 // FS.Create
	OpOpen                   // FS.Open
	OpRemove                 // FS.Remove
	OpRename                 // FS.Rename; the hook gets the new name
	OpMkdirAll               // FS.MkdirAll
	OpList                   // FS.List
	OpSyncDir                // FS.SyncDir
	OpRead                   // File.ReadAt
	OpWrite                  // File.WriteAt
	OpSync                   // File.Sync
	OpTruncate               // File.Truncate
)

var opNames = [...]string{
	OpCreate: "create", OpOpen: "open", OpRemove: "remove", OpRename: "rename",
	OpMkdirAll: "mkdirall", OpList: "list", OpSyncDir: "syncdir",
	OpRead: "read", OpWrite: "write", OpSync: "sync", OpTruncate: "truncate",
}

// String returns the lower-case name of the operation, as used in the Op
// field of the *fs.PathError that carries an injected error.
func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Faulty wraps an FS and makes chosen operations fail, for the failures a
// test cannot get from a real disk on demand: a full disk (SetLimit), a
// failing fsync, a rename that does not happen (Inject, FailAfter).
//
// A failed operation is not passed to the inner FS at all, so the inner
// state shows exactly what a caller that saw the error may rely on, with
// one exception that is the point of the model: a failed File.Sync does
// what a failed fsync does on Linux and drops the dirty data it covered
// (see SetSyncFailure). Files opened through a Faulty wrap the inner files
// and are subject to the same faults. Faulty is safe for concurrent use.
type Faulty struct {
	inner FS

	// hookMu serializes calls of the hook, so a hook may keep counters
	// without locking. Lock order: hookMu before mu (a hook may call
	// Inject or SetLimit); hookMu is never taken while mu is held.
	hookMu sync.Mutex

	mu struct {
		sync.Mutex
		hook  func(op Op, name string) error
		sync  SyncFailure
		limit int64 // < 0: no limit
		used  int64 // sum of size over files
		// files maps the cleaned name of each file opened or created
		// through this Faulty to its accounted size. Open handles share
		// the record, so a write through any of them is counted once.
		files map[string]*fileUsage
	}
}

// SyncFailure says what an injected File.Sync failure does to the data the
// sync was to make durable.
type SyncFailure uint8

const (
	// SyncDropsPages is the default and what Linux does: when writeback
	// of a page fails, the kernel reports the error to fsync and marks the
	// page clean anyway. Reads in this process still return the new bytes
	// (page cache), a later Sync succeeds without writing them, and a power
	// loss reverts them to their last durable content (Mem.Crash). So
	// retrying a failed fsync proves nothing. The model needs the inner FS
	// to be a Mem (or a Faulty over one); over the OS the kernel does
	// whatever it does.
	SyncDropsPages SyncFailure = iota
	// SyncKeepsDirty leaves the data dirty, so that a later successful
	// Sync still makes it durable: the behaviour of some other systems and
	// of this package before it modelled Linux. It hides the bugs of a
	// caller that retries a failed fsync; use it only in a test that says
	// why it needs it.
	SyncKeepsDirty
)

// SetSyncFailure sets what an injected Sync failure does to the file's
// dirty data; the default is SyncDropsPages. A failed SyncDir never drops
// anything: the directory's entries stay as durable as they were, and the
// next successful SyncDir makes them durable.
func (f *Faulty) SetSyncFailure(m SyncFailure) {
	f.mu.Lock()
	f.mu.sync = m
	f.mu.Unlock()
}

// pageDropper is a file that can model a failed fsync: its dirty pages are
// marked clean without being made durable. Mem's files implement it, and
// Faulty's forward it to the file they wrap.
type pageDropper interface {
	dropDirtyPages()
}

// fileUsage is the accounted size of one file. Guarded by Faulty.mu.
type fileUsage struct {
	size int64
	// gone is set when the file's name is removed or replaced: its bytes
	// were subtracted from used, and writes through handles still open
	// are no longer counted.
	gone bool
}

// NewFaulty returns a Faulty over inner that injects nothing and has no
// size limit until told otherwise.
func NewFaulty(inner FS) *Faulty {
	f := &Faulty{inner: inner}
	f.mu.limit = -1
	f.mu.files = make(map[string]*fileUsage)
	return f
}

// Inject installs fn, replacing any hook before it; nil removes it. fn is
// called before every hooked operation with the operation and the name it
// acts on (for File operations, the name the file was opened with; for
// Rename, the new name). When fn returns an error the operation is not
// performed and fails with that error wrapped in an *fs.PathError, so
// errors.Is finds it. Calls of fn are serialized; fn may call the Faulty's
// methods (Inject included) but must not perform FS operations through it.
func (f *Faulty) Inject(fn func(op Op, name string) error) {
	f.mu.Lock()
	f.mu.hook = fn
	f.mu.Unlock()
}

// FailAfter installs a hook (replacing any other) that lets the first n
// operations of kind op succeed and fails every later one with err, like a
// disk that died: the failure is sticky, since that is what callers must
// survive. Other operations are not affected.
func (f *Faulty) FailAfter(op Op, n int, err error) {
	seen := 0
	f.Inject(func(o Op, _ string) error {
		if o != op {
			return nil
		}
		seen++
		if seen > n {
			return err
		}
		return nil
	})
}

// SetLimit sets the disk capacity: a WriteAt or Truncate that would make
// the total size of the files exceed bytes fails with an error wrapping
// syscall.ENOSPC and writes nothing (no partial write), so a caller sees
// the simplest honest failure. Overwrites within a file's size always
// succeed. A negative limit removes it.
//
// The total counts the files opened or created through this Faulty (a file
// that existed before counts from its size when first opened); a removed or
// replaced file frees its bytes at once, even if a handle is still open,
// and writes through such a handle are not counted.
func (f *Faulty) SetLimit(bytes int64) {
	f.mu.Lock()
	f.mu.limit = bytes
	f.mu.Unlock()
}

// Used returns the total size of the files SetLimit counts.
func (f *Faulty) Used() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.used
}

// check runs the hook for op on name and wraps its error.
func (f *Faulty) check(op Op, name string) error {
	f.mu.Lock()
	hook := f.mu.hook
	f.mu.Unlock()
	if hook == nil {
		return nil
	}
	f.hookMu.Lock()
	err := hook(op, name)
	f.hookMu.Unlock()
	if err != nil {
		return &fs.PathError{Op: op.String(), Path: name, Err: err}
	}
	return nil
}

// Create creates or truncates name through the inner FS.
func (f *Faulty) Create(name string) (File, error) {
	if err := f.check(OpCreate, name); err != nil {
		return nil, err
	}
	inner, err := f.inner.Create(name)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := path.Clean(name)
	u, ok := f.mu.files[key]
	if ok {
		f.mu.used -= u.size
		u.size = 0
	} else {
		u = &fileUsage{}
		f.mu.files[key] = u
	}
	return &faultyFile{fs: f, inner: inner, name: name, usage: u}, nil
}

// Open opens name through the inner FS.
func (f *Faulty) Open(name string) (File, error) {
	if err := f.check(OpOpen, name); err != nil {
		return nil, err
	}
	inner, err := f.inner.Open(name)
	if err != nil {
		return nil, err
	}
	size, err := inner.Size()
	if err != nil {
		inner.Close()
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := path.Clean(name)
	u, ok := f.mu.files[key]
	if !ok {
		u = &fileUsage{size: size}
		f.mu.files[key] = u
		f.mu.used += size
	}
	return &faultyFile{fs: f, inner: inner, name: name, usage: u}, nil
}

// forgetLocked stops counting the file at key, if it is counted.
func (f *Faulty) forgetLocked(key string) {
	if u, ok := f.mu.files[key]; ok {
		f.mu.used -= u.size
		u.gone = true
		delete(f.mu.files, key)
	}
}

// Remove removes name through the inner FS and frees its counted bytes.
func (f *Faulty) Remove(name string) error {
	if err := f.check(OpRemove, name); err != nil {
		return err
	}
	if err := f.inner.Remove(name); err != nil {
		return err
	}
	f.mu.Lock()
	f.forgetLocked(path.Clean(name))
	f.mu.Unlock()
	return nil
}

// Rename renames through the inner FS; the replaced file's bytes are freed.
func (f *Faulty) Rename(oldname, newname string) error {
	if err := f.check(OpRename, newname); err != nil {
		return err
	}
	if err := f.inner.Rename(oldname, newname); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	oldKey, newKey := path.Clean(oldname), path.Clean(newname)
	if oldKey == newKey {
		return nil
	}
	f.forgetLocked(newKey)
	if u, ok := f.mu.files[oldKey]; ok {
		delete(f.mu.files, oldKey)
		f.mu.files[newKey] = u
	}
	return nil
}

// MkdirAll creates dir through the inner FS.
func (f *Faulty) MkdirAll(dir string) error {
	if err := f.check(OpMkdirAll, dir); err != nil {
		return err
	}
	return f.inner.MkdirAll(dir)
}

// List lists dir through the inner FS.
func (f *Faulty) List(dir string) ([]string, error) {
	if err := f.check(OpList, dir); err != nil {
		return nil, err
	}
	return f.inner.List(dir)
}

// SyncDir syncs dir through the inner FS.
func (f *Faulty) SyncDir(dir string) error {
	if err := f.check(OpSyncDir, dir); err != nil {
		return err
	}
	return f.inner.SyncDir(dir)
}

// faultyFile is a file opened through a Faulty.
type faultyFile struct {
	fs    *Faulty
	inner File
	name  string
	usage *fileUsage // guarded by fs.mu
}

// ReadAt reads through the inner file unless a fault is injected.
func (ff *faultyFile) ReadAt(p []byte, off int64) (int, error) {
	if err := ff.fs.check(OpRead, ff.name); err != nil {
		return 0, err
	}
	return ff.inner.ReadAt(p, off)
}

// WriteAt writes through the inner file unless a fault is injected or the
// write would grow the files beyond the limit. The Faulty's mutex is held
// across the inner write so that the accounting matches what was written.
func (ff *faultyFile) WriteAt(p []byte, off int64) (int, error) {
	if err := ff.fs.check(OpWrite, ff.name); err != nil {
		return 0, err
	}
	f := ff.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := ff.reserveLocked("write", off+int64(len(p))); err != nil {
		return 0, err
	}
	n, err := ff.inner.WriteAt(p, off)
	if n > 0 {
		ff.growLocked(off + int64(n))
	}
	return n, err
}

// reserveLocked fails with ENOSPC if growing the file to end would exceed
// the limit.
func (ff *faultyFile) reserveLocked(op string, end int64) error {
	f, u := ff.fs, ff.usage
	if f.mu.limit < 0 || u.gone || end <= u.size {
		return nil
	}
	if f.mu.used+(end-u.size) > f.mu.limit {
		return &fs.PathError{Op: op, Path: ff.name, Err: syscall.ENOSPC}
	}
	return nil
}

// growLocked records that the file now extends at least to end.
func (ff *faultyFile) growLocked(end int64) {
	u := ff.usage
	if end > u.size {
		if !u.gone {
			ff.fs.mu.used += end - u.size
		}
		u.size = end
	}
}

// Close closes the inner file; it is never injected.
func (ff *faultyFile) Close() error { return ff.inner.Close() }

// Sync syncs the inner file unless a fault is injected. An injected
// failure drops the inner file's dirty pages under SyncDropsPages.
func (ff *faultyFile) Sync() error {
	if err := ff.fs.check(OpSync, ff.name); err != nil {
		ff.fs.mu.Lock()
		mode := ff.fs.mu.sync
		ff.fs.mu.Unlock()
		if mode == SyncDropsPages {
			ff.dropDirtyPages()
		}
		return err
	}
	return ff.inner.Sync()
}

// dropDirtyPages passes a failed sync's effect on to the inner file, so
// that a Faulty over a Faulty over a Mem models it too.
func (ff *faultyFile) dropDirtyPages() {
	if d, ok := ff.inner.(pageDropper); ok {
		d.dropDirtyPages()
	}
}

// Truncate resizes the inner file unless a fault is injected or growing it
// would exceed the limit (a sparse extension counts in full, which is the
// pessimistic reading of what the disk must hold).
func (ff *faultyFile) Truncate(size int64) error {
	if err := ff.fs.check(OpTruncate, ff.name); err != nil {
		return err
	}
	f := ff.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := ff.reserveLocked("truncate", size); err != nil {
		return err
	}
	if err := ff.inner.Truncate(size); err != nil {
		return err
	}
	u := ff.usage
	if !u.gone {
		f.mu.used += size - u.size
	}
	u.size = size
	return nil
}

// Size returns the inner file's size; it is never injected.
func (ff *faultyFile) Size() (int64, error) { return ff.inner.Size() }
