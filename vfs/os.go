package vfs

import (
	"io/fs"
	"os"
)

// OS is the FS of the operating system, what the broker runs on. Names are
// passed to the os package unchanged. File.Sync is fdatasync on Linux (the
// file's size and data, not its timestamps, which recovery never reads) and
// os.File.Sync elsewhere; SyncDir fsyncs the directory, which is what makes
// a create, remove or rename in it survive a power loss. Errors are the os
// package's, except that not-exist errors also match ErrNotExist.
//
// OS has no state; it is a variable only so that callers can pass it where
// an FS is wanted.
var OS FS = osFS{}

// osFS implements OS.
type osFS struct{}

// Create opens name read-write, creating it with mode 0600 or truncating
// it. A data directory holds message bodies and the key that seals message
// IDs and receipts (IDENTITY): its files are its owner's alone.
func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, markNotExist(err)
	}
	return osFile{f}, nil
}

// Open opens an existing file read-write.
func (osFS) Open(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, markNotExist(err)
	}
	return osFile{f}, nil
}

// Remove deletes name.
func (osFS) Remove(name string) error { return markNotExist(os.Remove(name)) }

// Rename replaces newname with oldname (rename(2), atomic on POSIX).
func (osFS) Rename(oldname, newname string) error {
	return markNotExist(os.Rename(oldname, newname))
}

// MkdirAll creates dir and its parents with mode 0700 (see Create).
func (osFS) MkdirAll(dir string) error { return markNotExist(os.MkdirAll(dir, 0o700)) }

// List returns the sorted names of dir's entries (os.ReadDir sorts them).
func (osFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, markNotExist(err)
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

// SyncDir fsyncs dir so that changes to its entries are durable.
func (osFS) SyncDir(dir string) error { return markNotExist(syncDir(dir)) }

// osFile is an open OS file. It wraps *os.File rather than embedding it so
// that only the File methods are reachable.
type osFile struct{ f *os.File }

// ReadAt is pread.
func (o osFile) ReadAt(p []byte, off int64) (int, error) { return o.f.ReadAt(p, off) }

// WriteAt is pwrite.
func (o osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }

// Close closes the file; a second Close fails with fs.ErrClosed.
func (o osFile) Close() error { return o.f.Close() }

// Sync makes the file's data durable; see datasync for the system call.
func (o osFile) Sync() error {
	if err := datasync(o.f); err != nil {
		return &fs.PathError{Op: "sync", Path: o.f.Name(), Err: err}
	}
	return nil
}

// Truncate is ftruncate.
func (o osFile) Truncate(size int64) error { return o.f.Truncate(size) }

// Size returns the length from fstat.
func (o osFile) Size() (int64, error) {
	fi, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
