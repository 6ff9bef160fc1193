package commitlog

import (
	"os"
	"syscall"
)

// fdatasync is the raw baseline's sync: the same system call vfs.OS makes.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
