package vfs_test

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
	"github.com/hourglass-mq/hourglass/vfs/vfstest"
)

// TestWritePaced: a write of several pace steps and a short tail reads
// back whole on the OS (where the steps start their writeback) and, after
// Sync, survives a crash of the memory model (where they do nothing);
// without a Sync the model's crash keeps none of it, so the hint is never
// taken for durability.
func TestWritePaced(t *testing.T) {
	data := make([]byte, 3*vfs.PaceBytes+123)
	for i := range data {
		data[i] = byte(i * 7)
	}
	vfstest.Each(t, func(t *testing.T, fs vfs.FS, dir string) {
		if err := fs.MkdirAll(dir); err != nil {
			t.Fatal(err)
		}
		f, err := fs.Create(dir + "/f")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, ok := f.(vfs.WritebackStarter); ok != (fs == vfs.OS) && runtime.GOOS == "linux" {
			t.Fatalf("a file of %T: WritebackStarter %v", fs, ok)
		}
		if err := vfs.WritePaced(f, data, 10); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(data))
		if _, err := f.ReadAt(got, 10); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read back: equal %v, err %v", bytes.Equal(got, data), err)
		}
		m, ok := fs.(*vfs.Mem)
		if !ok {
			return
		}
		if err := m.SyncDir(dir); err != nil {
			t.Fatal(err)
		}
		if n := crashSize(t, m, dir+"/f"); n != 0 {
			t.Fatalf("unsynced paced write: %d bytes survive a crash, want 0", n)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if n := crashSize(t, m, dir+"/f"); n != int64(len(data))+10 {
			t.Fatalf("synced paced write: %d bytes survive a crash, want %d", n, len(data)+10)
		}
	})
}

// crashSize is the size of name in the image a crash of m leaves.
func crashSize(t *testing.T, m *vfs.Mem, name string) int64 {
	t.Helper()
	f, err := m.Crash(nil).Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
