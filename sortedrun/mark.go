package sortedrun

import (
	"path"

	"github.com/hourglass-mq/hourglass/vfs"
)

// DamageMark is the file a user of runs leaves in its directory when a
// check after Open finds damage in a run Open did not read whole (Open
// trusted the run's checked tail for the rest). The next Open of a state
// sees it and refuses, so that the owner rebuilds the index from its
// source; the rebuild deletes it.
const DamageMark = "DAMAGED"

// WriteDamageMark writes the damage mark in dir, durably (the file, then
// the directory entry), saying what was found.
func WriteDamageMark(fs vfs.FS, dir string, damage error) error {
	f, err := fs.Create(path.Join(dir, DamageMark))
	if err != nil {
		return err
	}
	_, err = f.WriteAt([]byte(damage.Error()), 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.SyncDir(dir)
	}
	return err
}

// ReadDamageMark reports whether dir holds the damage mark and what it says
// (at most 4 KiB of it). A mark that cannot be read is still a mark: what
// then says why it could not be read.
func ReadDamageMark(fs vfs.FS, dir string) (what string, found bool, err error) {
	f, err := fs.Open(path.Join(dir, DamageMark))
	if vfs.IsNotExist(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	size, err := f.Size()
	b := make([]byte, min(max(size, 0), 4096))
	if err == nil {
		var n int
		n, err = f.ReadAt(b, 0)
		b = b[:n]
	}
	if err != nil && len(b) == 0 {
		return err.Error(), true, nil
	}
	return string(b), true, nil
}
