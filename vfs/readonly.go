package vfs

import (
	"errors"
	"fmt"
	"io"
)

// ErrReadOnly is returned (wrapped) by every operation of a ReadOnly view
// that would change the filesystem.
var ErrReadOnly = errors.New("vfs: read-only view")

// ReadOnlyOpener is an optional feature of an FS: opening an existing file
// for reading only. The OS implements it with O_RDONLY, so that a tool
// that must not write (hourglass check) also works on a directory it may
// not write, such as a backup on read-only media.
type ReadOnlyOpener interface {
	OpenReadOnly(name string) (File, error)
}

// SharedLocker is an optional feature of an FS: a shared lock on an
// existing file, which conflicts with the exclusive lock of Locker and
// creates nothing. A missing file means that no process holds the lock.
type SharedLocker interface {
	LockShared(name string) (io.Closer, error)
}

// ReadOnly returns a view of fsys that can read it and cannot change it:
// Create, Remove, Rename, MkdirAll and SyncDir fail with ErrReadOnly, and
// so do WriteAt, Truncate and Sync of the files it opens. Files are opened
// read-only where fsys supports it (ReadOnlyOpener). Its Lock takes a
// shared lock where fsys supports it (SharedLocker) and otherwise fsys's
// own lock, which must not create the file (Mem's does not).
//
// It is what proves an offline checker never writes: every write it could
// attempt is an error, never a silent change.
func ReadOnly(fsys FS) FS { return roFS{fsys} }

type roFS struct{ fs FS }

func roErr(op, name string) error { return fmt.Errorf("%w: %s %s", ErrReadOnly, op, name) }

func (r roFS) Create(name string) (File, error) { return nil, roErr("create", name) }
func (r roFS) Remove(name string) error         { return roErr("remove", name) }
func (r roFS) Rename(oldname, newname string) error {
	return roErr("rename", oldname)
}
func (r roFS) MkdirAll(dir string) error              { return roErr("mkdir", dir) }
func (r roFS) SyncDir(dir string) error               { return roErr("sync", dir) }
func (r roFS) List(dir string) ([]string, error)      { return r.fs.List(dir) }
func (r roFS) OpenReadOnly(name string) (File, error) { return r.Open(name) }

// Open opens name for reading.
func (r roFS) Open(name string) (File, error) {
	var f File
	var err error
	if o, ok := r.fs.(ReadOnlyOpener); ok {
		f, err = o.OpenReadOnly(name)
	} else {
		f, err = r.fs.Open(name)
	}
	if err != nil {
		return nil, err
	}
	return roFile{f: f, name: name}, nil
}

// Lock takes a shared lock where the FS has one, else its own lock.
func (r roFS) Lock(name string) (io.Closer, error) {
	if s, ok := r.fs.(SharedLocker); ok {
		return s.LockShared(name)
	}
	return Lock(r.fs, name)
}

// roFile is a file of a ReadOnly view.
type roFile struct {
	f    File
	name string
}

func (o roFile) ReadAt(p []byte, off int64) (int, error) { return o.f.ReadAt(p, off) }
func (o roFile) WriteAt(p []byte, off int64) (int, error) {
	return 0, roErr("write", o.name)
}
func (o roFile) Close() error              { return o.f.Close() }
func (o roFile) Sync() error               { return roErr("sync", o.name) }
func (o roFile) Truncate(size int64) error { return roErr("truncate", o.name) }
func (o roFile) Size() (int64, error)      { return o.f.Size() }
