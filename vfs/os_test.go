package vfs_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

func TestOSConformance(t *testing.T) {
	runConformance(t, func(t *testing.T) (vfs.FS, string) {
		return vfs.OS, filepath.ToSlash(t.TempDir())
	})
}

// TestOSSyncAfterClose checks that the fdatasync path reports a closed file
// as fs.ErrClosed like every other method, not as a raw poll error.
func TestOSSyncAfterClose(t *testing.T) {
	f, err := vfs.OS.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("Sync after Close = %v, want fs.ErrClosed", err)
	}
}

// TestOSNotExistKeepsPathError checks that marking an OS error as
// ErrNotExist keeps the *fs.PathError (and its path) reachable.
func TestOSNotExistKeepsPathError(t *testing.T) {
	name := filepath.Join(t.TempDir(), "missing")
	_, err := vfs.OS.Open(name)
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != name {
		t.Fatalf("Open error %v does not carry *fs.PathError for %s", err, name)
	}
	mustNotExist(t, "Open", err)
	if got := err.Error(); got != pe.Error() {
		t.Fatalf("message changed: %q, want %q", got, pe.Error())
	}
}

// TestOSSyncDirSeesEntries checks that SyncDir of a directory with new
// entries succeeds and that List returns them sorted.
func TestOSSyncDirSeesEntries(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b", "a"} {
		writeFile(t, vfs.OS, filepath.Join(dir, n), []byte(n))
	}
	if err := vfs.OS.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	names, err := vfs.OS.List(dir)
	if err != nil || !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("List = %v, %v", names, err)
	}
}

// TestOSFilesArePrivate: what the broker creates (message bodies, the
// IDENTITY key) is readable by its owner alone, whatever the umask.
func TestOSFilesArePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "queues")
	if err := vfs.OS.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	f, err := vfs.OS.Create(filepath.Join(dir, "IDENTITY"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, p := range []string{dir, filepath.Dir(dir), filepath.Join(dir, "IDENTITY")} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v: others may read it", p, st.Mode().Perm())
		}
	}
}
