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
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, markNotExist(err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		if err == syscall.EWOULDBLOCK {
			return nil, fmt.Errorf("%w: %s", ErrLocked, name)
		}
		return nil, &os.PathError{Op: "flock", Path: name, Err: err}
	}
	return f, nil
}
