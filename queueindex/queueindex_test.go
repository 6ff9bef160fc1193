package queueindex

import (
	"errors"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

func TestAppendReadTruncate(t *testing.T) {
	fs := vfs.NewMem()
	x, err := Open(fs, "q.qi", -1)
	if err != nil {
		t.Fatal(err)
	}
	var in []Entry
	for i := 0; i < 10; i++ {
		in = append(in, Entry{Pos: uint64(i * 100), Due: int64(i), Visible: int64(i + 1), Size: uint32(i)})
	}
	first, err := x.Append(in[:4])
	if err != nil || first != 0 {
		t.Fatal(first, err)
	}
	if first, _ = x.Append(in[4:]); first != 4 || x.Len() != 10 {
		t.Fatalf("second append at %d, len %d", first, x.Len())
	}
	got, err := x.Read(3, 4, x.Len())
	if err != nil || len(got) != 4 || got[0] != in[3] || got[3] != in[6] {
		t.Fatalf("read: %+v %v", got, err)
	}
	if got, _ := x.Read(8, 10, x.Len()); len(got) != 2 {
		t.Fatalf("read past end returned %d", len(got))
	}
	x.Sync()
	x.Close()
	// Recovery cuts to the checkpointed length.
	y, err := Open(fs, "q.qi", 6)
	if err != nil || y.Len() != 6 {
		t.Fatalf("reopen keep 6: %v len %d", err, y.Len())
	}
	if _, err := Open(fs, "q.qi", 7); err == nil {
		t.Fatal("keep beyond the file was accepted")
	}
}

func TestCorruptEntryDetected(t *testing.T) {
	fs := vfs.NewMem()
	x, _ := Open(fs, "q.qi", -1)
	x.Append([]Entry{{Pos: 1, Due: 2, Visible: 3}})
	f, _ := fs.Open("q.qi")
	f.WriteAt([]byte{9}, 0)
	f.Close()
	if _, err := x.Read(0, 1, 1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt entry: %v, want ErrCorrupt", err)
	}
}
