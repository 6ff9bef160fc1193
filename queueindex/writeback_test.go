package queueindex

import (
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
	"github.com/hourglass-mq/hourglass/vfs/vfstest"
)

// TestStartWritebackIsNotDurability: starting the write-out of appended
// entries, on the OS and on the memory model, reports nothing durable and
// leaves them readable; only Sync makes them durable, and after a crash of
// the model only what Sync covered survives.
func TestStartWritebackIsNotDurability(t *testing.T) {
	vfstest.Each(t, func(t *testing.T, fs vfs.FS, dir string) {
		if err := fs.MkdirAll(dir); err != nil {
			t.Fatal(err)
		}
		file := dir + "/q"
		x, err := Open(fs, file, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		es := make([]Entry, 20000) // several pace steps
		for i := range es {
			es[i] = Entry{Pos: uint64(i + 1), Due: int64(i), Visible: int64(i), Size: 1}
		}
		if _, err := x.Append(es[:10000]); err != nil {
			t.Fatal(err)
		}
		if err := x.Sync(); err != nil {
			t.Fatal(err)
		}
		if _, err := x.Append(es[10000:]); err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second call has nothing new to start
			if err := x.StartWriteback(); err != nil {
				t.Fatal(err)
			}
		}
		if d := x.Durable(); d != 10000 {
			t.Fatalf("Durable after StartWriteback = %d, want 10000", d)
		}
		got, err := x.Read(0, len(es), x.Len())
		if err != nil || len(got) != len(es) || got[len(es)-1] != es[len(es)-1] {
			t.Fatalf("read back %d entries, err %v", len(got), err)
		}
		if m, ok := fs.(*vfs.Mem); ok {
			y, err := Open(m.Crash(nil), file, -1)
			if err != nil {
				t.Fatal(err)
			}
			if n := y.Len(); n != 10000 {
				t.Fatalf("after a crash %d entries, want the 10000 synced", n)
			}
			y.Close()
		}
	})
}
