package engine

import (
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// TestDataDirectoryIsLocked: a second broker on a directory in use is
// refused with a message that says so; once the first closes, it opens.
func TestDataDirectoryIsLocked(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   vfs.FS
		dir  string
	}{{"mem", vfs.NewMem(), "data"}, {"os", vfs.OS, t.TempDir()}} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{Dir: tc.dir, FS: tc.fs}
			e, err := Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			if e2, err := Open(opts); err == nil || !strings.Contains(err.Error(), "in use") {
				if e2 != nil {
					e2.Close()
				}
				t.Fatalf("a second Open of a directory in use: %v", err)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e, err = Open(opts)
			if err != nil {
				t.Fatalf("Open after Close: %v", err)
			}
			e.Close()
		})
	}
}
