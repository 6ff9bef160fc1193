package vfs

import "os"

// datasync is os.File.Sync (FlushFileBuffers) on Windows.
func datasync(f *os.File) error { return f.Sync() }

// syncDir only checks that dir is a directory: Windows cannot flush a
// directory handle, so entries there are as durable as the filesystem's own
// metadata journal makes them, which this package does not control.
func syncDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return &os.PathError{Op: "syncdir", Path: dir, Err: os.ErrInvalid}
	}
	return nil
}
