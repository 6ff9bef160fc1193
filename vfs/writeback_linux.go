package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// StartWriteback is sync_file_range(2) with SYNC_FILE_RANGE_WRITE only: it
// queues the write-out of the range's dirty pages and returns; it neither
// waits for them nor writes any metadata, so it makes nothing durable.
func (o osFile) StartWriteback(off, n int64) error {
	return o.syncFileRange(off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// WriteOut is sync_file_range(2) with SYNC_FILE_RANGE_WAIT_BEFORE, _WRITE
// and _WAIT_AFTER: it writes the range's dirty pages out and waits until
// the device has them. Like StartWriteback it writes no metadata and makes
// nothing durable.
func (o osFile) WriteOut(off, n int64) error {
	return o.syncFileRange(off, n, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
}

func (o osFile) syncFileRange(off, n int64, flags int) error {
	rc, err := o.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = unix.SyncFileRange(int(fd), off, n, flags); serr != unix.EINTR {
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
