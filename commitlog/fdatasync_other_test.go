//go:build !linux

package commitlog

import "os"

// fdatasync falls back to fsync where fdatasync is not available, as
// vfs.OS does.
func fdatasync(f *os.File) error { return f.Sync() }
