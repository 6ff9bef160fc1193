package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// StartWriteback is sync_file_range(2) with SYNC_FILE_RANGE_WRITE only: it
// queues the write-out of the range's dirty pages and returns; it neither
// waits for them nor writes any metadata, so it makes nothing durable.
func (o osFile) StartWriteback(off, n int64) error {
	rc, err := o.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE); serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "sync_file_range", Path: o.f.Name(), Err: serr}
	}
	return nil
}
