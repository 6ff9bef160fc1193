package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// SyncFiles makes the named files durable with one syncfs(2) on the
// filesystem holding dir: one journal commit for all of them instead of
// one per file. syncfs writes back every dirty page of that filesystem and
// waits for it; since Linux 5.8 it reports a writeback error that occurred
// on the filesystem and was not yet reported (errseq), like fsync does for
// one file, and the caller treats it as a failed fsync of every file.
func (osFS) SyncFiles(dir string, names []string) error {
	if len(names) == 0 {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return markNotExist(err)
	}
	defer d.Close()
	rc, err := d.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = unix.Syncfs(int(fd)); serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "syncfs", Path: dir, Err: serr}
	}
	return nil
}
