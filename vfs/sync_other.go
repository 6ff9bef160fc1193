//go:build !linux && !windows

package vfs

import "os"

// datasync falls back to os.File.Sync where fdatasync is not available
// through the syscall package (on macOS it issues F_FULLFSYNC, which is
// what reaching the platter takes there).
func datasync(f *os.File) error { return f.Sync() }
