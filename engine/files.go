package engine

import (
	"errors"
	"fmt"
	"io"
	"path"

	"github.com/hourglass-mq/hourglass/vfs"
)

// writeSynced writes data at off of the file name (created when create is
// true, or when it does not exist), syncs and closes it.
func writeSynced(fs vfs.FS, name string, off int64, data []byte, create bool) error {
	var f vfs.File
	var err error
	if !create {
		f, err = fs.Open(name)
	}
	if create || vfs.IsNotExist(err) {
		f, err = fs.Create(name)
	}
	if err != nil {
		return err
	}
	// A checkpoint is hundreds of KiB: its writeback starts as it is
	// written, so the Sync below has little left to write.
	if err := vfs.WritePaced(f, data, off); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeFileAtomic replaces dir/name with data: temp file, sync, rename,
// sync the directory.
func writeFileAtomic(fs vfs.FS, dir, name string, data []byte) error {
	tmp := path.Join(dir, name+".tmp")
	if err := writeSynced(fs, tmp, 0, data, true); err != nil {
		return err
	}
	if err := fs.Rename(tmp, path.Join(dir, name)); err != nil {
		return err
	}
	return fs.SyncDir(dir)
}

// lockDir takes the data directory's lock: one process at a time, since a
// second broker, or repair, on a directory in use would corrupt it.
func lockDir(fs vfs.FS, dir string) (io.Closer, error) {
	lock, err := vfs.Lock(fs, path.Join(dir, LockFile))
	switch {
	case errors.Is(err, vfs.ErrLocked):
		return nil, fmt.Errorf("engine: data directory %s is in use by another process (%w)", dir, err)
	case err != nil:
		return nil, fmt.Errorf("engine: lock the data directory: %w", err)
	}
	return lock, nil
}

// LockFile is the name of the data directory's lock file: a broker holds
// an exclusive lock on it while open (flock(2): released by the kernel when
// the process ends, kill -9 included).
const LockFile = "LOCK"
