// Package vfs is the small filesystem interface that every durable part of
// hourglass writes through.
//
// It exists so that durability can be tested without root and without a
// real power cut: the OS implementation (OS) is what the broker runs on, and
// the memory implementation (NewMem) keeps apart what was written and what
// was made durable by Sync or SyncDir, so a test can take the image a power
// loss would leave behind (Mem.Crash). A fault-injecting wrapper (Faulty)
// makes chosen operations fail, for example with ENOSPC, to test disk full.
// A Sync it fails behaves as a failed fsync on Linux: the dirty pages are
// marked clean without reaching the disk, so a retried Sync succeeds and
// the data is still lost at the next power loss (Faulty.SetSyncFailure).
//
// The interface is deliberately narrow: positional reads and writes, sync,
// truncate, and the directory operations an append-only store needs.
package vfs

import (
	"errors"
	"io"
)

// File is an open file. Writes are positional so that a writer keeps its own
// offset and a reader never disturbs it; callers may read and write the same
// file from different goroutines as long as regions do not overlap.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Sync makes the file's data durable (fdatasync on the OS).
	Sync() error
	// Truncate cuts or extends the file to size bytes. It is not durable
	// until Sync.
	Truncate(size int64) error
	// Size returns the file's current length in bytes.
	Size() (int64, error)
}

// FS is a filesystem. Names are slash-separated paths as the OS takes them.
//
// Durability contract (what Mem enforces and the OS provides): file data is
// durable only after File.Sync; a created, renamed or removed directory entry
// is durable only after SyncDir on its parent directory.
type FS interface {
	// Create creates name, or truncates it if it exists, opened read-write.
	Create(name string) (File, error)
	// Open opens an existing file read-write.
	Open(name string) (File, error)
	// Remove deletes a file.
	Remove(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// MkdirAll creates dir and its parents; existing ones are fine.
	MkdirAll(dir string) error
	// List returns the names (not paths) of the entries of dir, sorted.
	List(dir string) ([]string, error)
	// SyncDir makes dir's entries durable (fsync on the directory).
	SyncDir(dir string) error
}

// ErrNotExist is returned (possibly wrapped) when a file or directory does
// not exist. Implementations wrap io/fs.ErrNotExist so errors.Is works with
// either.
var ErrNotExist = errors.New("vfs: file does not exist")

// BatchSyncer is an optional feature of an FS: making the data of many
// files of one directory durable in one call. A checkpoint may have to sync
// tens of thousands of timer-bucket files; one fsync each costs a journal
// commit each, which saturates a disk for seconds and stalls every other
// fsync behind it. SyncFiles makes the data of every named file durable
// (it may make more durable: never less); names are relative to dir. Its
// failure is a failed fsync of every named file.
type BatchSyncer interface {
	SyncFiles(dir string, names []string) error
}

// SyncFiles makes the named files of dir durable: with one call when fs is
// a BatchSyncer, else with one Sync per file.
func SyncFiles(fsys FS, dir string, names []string) error {
	if bs, ok := fsys.(BatchSyncer); ok {
		return bs.SyncFiles(dir, names)
	}
	return syncEach(fsys, dir, names)
}

// syncEach syncs the named files of dir one by one.
func syncEach(fsys FS, dir string, names []string) error {
	for _, n := range names {
		if err := syncOne(fsys, dir+"/"+n); err != nil {
			return err
		}
	}
	return nil
}

func syncOne(fsys FS, name string) error {
	f, err := fsys.Open(name)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Locker is an optional feature of an FS: an exclusive, advisory lock on a
// file, held until the returned Closer is closed or the process ends. A
// broker holds one on its data directory so that a second broker, or an
// offline tool such as repair, does not work on a directory in use.
type Locker interface {
	Lock(name string) (io.Closer, error)
}

// ErrLocked is returned (wrapped) by Lock when another holder has the lock.
var ErrLocked = errors.New("vfs: locked by another process")

// Lock takes the exclusive lock on name when fsys is a Locker; otherwise it
// does nothing (a filesystem without locks cannot tell).
func Lock(fsys FS, name string) (io.Closer, error) {
	if l, ok := fsys.(Locker); ok {
		return l.Lock(name)
	}
	return io.NopCloser(nil), nil
}
