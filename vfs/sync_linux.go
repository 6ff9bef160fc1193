package vfs

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// datasync calls fdatasync(2): it flushes the data and the metadata needed to
// read it back (the size), skipping timestamps, which saves a journal write
// per commit on most filesystems. A closed file reports fs.ErrClosed, as
// the other methods of os.File do.
func datasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		// Control reports a closed file with an internal error value;
		// fstat (only on this error path) gives the documented fs.ErrClosed.
		if _, serr := f.Stat(); errors.Is(serr, fs.ErrClosed) {
			return fs.ErrClosed
		}
		return err
	}
	return serr
}
