package queueindex

import (
	"errors"
	"syscall"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// A failed Append keeps its entries and writes them, in order, before the
// next Append's; Len counts only written entries, so readers never see a
// gap.
func TestFailedAppendIsWrittenLater(t *testing.T) {
	ffs := vfs.NewFaulty(vfs.NewMem())
	x, err := Open(ffs, "q.qi", -1)
	if err != nil {
		t.Fatal(err)
	}
	e := func(i int) Entry { return Entry{Pos: uint64(i), Due: int64(i), Visible: int64(i), Size: 1} }
	if _, err := x.Append([]Entry{e(0)}); err != nil {
		t.Fatal(err)
	}
	ffs.FailAfter(vfs.OpWrite, 0, syscall.ENOSPC)
	if _, err := x.Append([]Entry{e(1), e(2)}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v", err)
	}
	if err := x.Retry(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("retry on a full disk: %v", err)
	}
	if _, err := x.Append([]Entry{e(3)}); err == nil {
		t.Fatal("append on a full disk succeeded")
	}
	if x.Len() != 1 || x.Unwritten() != 3 {
		t.Fatalf("len %d, unwritten %d; want 1 and 3", x.Len(), x.Unwritten())
	}
	ffs.Inject(nil)
	first, err := x.Append([]Entry{e(4)})
	if err != nil || first != 4 {
		t.Fatalf("append after space is back: first %d, %v; want 4", first, err)
	}
	if x.Len() != 5 || x.Unwritten() != 0 {
		t.Fatalf("len %d, unwritten %d; want 5 and 0", x.Len(), x.Unwritten())
	}
	got, err := x.Read(0, 10, x.Len())
	if err != nil || len(got) != 5 {
		t.Fatalf("read: %v %v", got, err)
	}
	for i, g := range got {
		if g != e(i) {
			t.Fatalf("entry %d is %+v, want %+v", i, g, e(i))
		}
	}
	if err := x.Retry(); err != nil {
		t.Fatalf("retry with nothing to write: %v", err)
	}
}
