package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestReadOnlyRefusesEveryWrite: every operation that would change the
// filesystem fails with ErrReadOnly, reads work, and on the OS the file is
// opened O_RDONLY (a read-only file opens).
func TestReadOnlyRefusesEveryWrite(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	if err := os.WriteFile(name, []byte("hello"), 0o444); err != nil {
		t.Fatal(err)
	}
	ro := ReadOnly(OS)
	f, err := ro.Open(name)
	if err != nil {
		t.Fatalf("open a read-only file: %v", err)
	}
	defer f.Close()
	b := make([]byte, 5)
	if _, err := f.ReadAt(b, 0); err != nil || string(b) != "hello" {
		t.Fatalf("read: %q %v", b, err)
	}
	for what, err := range map[string]error{
		"write":    func() error { _, err := f.WriteAt([]byte("x"), 0); return err }(),
		"truncate": f.Truncate(0),
		"sync":     f.Sync(),
		"create":   func() error { _, err := ro.Create(name + "2"); return err }(),
		"remove":   ro.Remove(name),
		"rename":   ro.Rename(name, name+"3"),
		"mkdir":    ro.MkdirAll(filepath.Join(dir, "d")),
		"syncdir":  ro.SyncDir(dir),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s: %v, want ErrReadOnly", what, err)
		}
	}
}

// TestSharedLockConflictsWithExclusive: the read-only view's lock fails
// while a broker's exclusive lock is held, works after, and creates no
// file when there is none.
func TestSharedLockConflictsWithExclusive(t *testing.T) {
	name := filepath.Join(t.TempDir(), "LOCK")
	ro := ReadOnly(OS)
	l, err := Lock(ro, name)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Fatalf("the shared lock created the file: %v", err)
	}
	ex, err := Lock(OS, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(ro, name); !errors.Is(err, ErrLocked) {
		t.Fatalf("shared lock while held exclusively: %v, want ErrLocked", err)
	}
	ex.Close()
	sh, err := Lock(ro, name)
	if err != nil {
		t.Fatalf("shared lock after release: %v", err)
	}
	sh.Close()
}
