package vfs_test

import (
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

func TestMemConformance(t *testing.T) {
	runConformance(t, func(t *testing.T) (vfs.FS, string) {
		m := vfs.NewMem()
		if err := m.MkdirAll("/db"); err != nil {
			t.Fatal(err)
		}
		return m, "/db"
	})
}
