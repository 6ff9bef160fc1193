// Package vfstest holds helpers for tests that must hold on both
// filesystems of package vfs: the operating system's, where the broker
// runs, and the memory model, where a crash can be simulated.
package vfstest

import (
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// Each runs body as two subtests: "os" on vfs.OS with a new temporary
// directory, and "mem" on a new vfs.Mem with the directory "d" (not yet
// created). A body that simulates a crash type-asserts fs to *vfs.Mem.
func Each(t *testing.T, body func(t *testing.T, fs vfs.FS, dir string)) {
	t.Helper()
	t.Run("os", func(t *testing.T) { body(t, vfs.OS, t.TempDir()) })
	t.Run("mem", func(t *testing.T) { body(t, vfs.NewMem(), "d") })
}
