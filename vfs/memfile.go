package vfs

import (
	"errors"
	"io"
	"io/fs"
)

// memFile is an open handle on a Mem file.
type memFile struct {
	m      *Mem
	n      *memNode
	name   string
	closed bool // guarded by m.mu
}

func (f *memFile) checkLocked(op string) error {
	if f.closed {
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	}
	return nil
}

// ReadAt reads from the current data; like os.File it returns io.EOF when
// fewer than len(p) bytes are available.
func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: errors.New("negative offset")}
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt writes p at off, zero-filling any gap past the end.
func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("write"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: errors.New("negative offset")}
	}
	end := off + int64(len(p))
	if end > int64(len(f.n.data)) {
		f.n.resizeLocked(end)
	}
	f.n.touchLocked(off, end)
	f.n.mutateLocked(off)
	copy(f.n.data[off:], p)
	return len(p), nil
}

// Close releases the handle; later calls on it fail with fs.ErrClosed.
func (f *memFile) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("close"); err != nil {
		return err
	}
	f.closed = true
	return nil
}

// Sync makes the current data durable, except the pages a failed Sync
// dropped (see the type). Without such pages it is O(1): the durable bytes
// share the current array until one of them is overwritten.
func (f *memFile) Sync() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("sync"); err != nil {
		return err
	}
	if len(f.n.lost) > 0 {
		f.n.synced = f.n.writebackLocked()
		f.n.shared = false
		return nil
	}
	f.n.synced = f.n.data[:len(f.n.data):len(f.n.data)]
	f.n.shared = true
	return nil
}

// dropDirtyPages is called by Faulty instead of Sync when it fails a Sync:
// the dirty pages are marked clean without being made durable.
func (f *memFile) dropDirtyPages() {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if !f.closed {
		f.n.dropDirtyLocked()
	}
}

// Truncate cuts or zero-extends the current data.
func (f *memFile) Truncate(size int64) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("truncate"); err != nil {
		return err
	}
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: errors.New("negative size")}
	}
	f.n.resizeLocked(size)
	return nil
}

// Size returns the current length.
func (f *memFile) Size() (int64, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.checkLocked("stat"); err != nil {
		return 0, err
	}
	return int64(len(f.n.data)), nil
}
