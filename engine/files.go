package engine

import (
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
