//go:build !windows

package vfs

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// LockShared takes flock(2) LOCK_SH|LOCK_NB on name, opened read-only and
// never created. It fails with ErrLocked while a process holds the
// exclusive lock (a broker); a missing file means none does, and the
// returned Closer then does nothing.
func (osFS) LockShared(name string) (io.Closer, error) {
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return io.NopCloser(nil), nil
	}
	if err != nil {
		return nil, err
	}
	if err := flock(f, syscall.LOCK_SH); err != nil {
		return nil, err
	}
	return f, nil
}
