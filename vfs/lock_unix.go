//go:build !windows

package vfs

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// Lock takes flock(2) LOCK_EX|LOCK_NB on name (created if missing). The
// kernel drops the lock when the process ends, kill -9 included, so a
// crashed broker never leaves a stale lock behind.
func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, markNotExist(err)
	}
	if err := flock(f, syscall.LOCK_EX); err != nil {
		return nil, err
	}
	return f, nil
}

// flock takes the lock how (LOCK_EX or LOCK_SH) on f without waiting,
// retrying on EINTR; on failure it closes f, and a lock held by another
// process is ErrLocked.
func flock(f *os.File, how int) error {
	var err error
	for {
		err = syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		if err == syscall.EWOULDBLOCK {
			return fmt.Errorf("%w: %s", ErrLocked, f.Name())
		}
		return &os.PathError{Op: "flock", Path: f.Name(), Err: err}
	}
	return nil
}
