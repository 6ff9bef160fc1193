package commitlogtest

import (
	"testing"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/vfs"
)

// writeLog appends n records of type 1 to a new log in small segments and
// closes it.
func writeLog(t *testing.T, fs vfs.FS, segmentBytes int64, n int) {
	t.Helper()
	l, err := commitlog.Open(commitlog.Options{FS: fs, Dir: "/log", SegmentBytes: segmentBytes})
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, err := l.Append(commitlog.Record{Type: 1, Payload: make([]byte, 100)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDamageSealed: the damage lands in the named record of the sealed
// first segment, where Verify finds it; a record outside a sealed segment
// is an error, and nothing is written.
func TestDamageSealed(t *testing.T) {
	fs := vfs.NewMem()
	writeLog(t, fs, 1<<20, 10) // one segment: nothing sealed
	if _, _, err := DamageSealed(fs, "/log", 1, 3, 20, []byte{1, 2, 3, 4}); err == nil {
		t.Fatal("damage planted in a log with one segment")
	}
	if rep, err := commitlog.Verify(fs, "/log", nil); err != nil || len(rep.Damage) != 0 {
		t.Fatalf("a refused plant changed the log: %+v %v", rep.Damage, err)
	}

	fs = vfs.NewMem()
	writeLog(t, fs, 4096, 60)
	pos, seg, err := DamageSealed(fs, "/log", 1, 9, 20, []byte{0xde, 0xad, 0xbe, 0xef})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := commitlog.Verify(fs, "/log", nil)
	if err != nil || len(rep.Damage) != 1 || rep.Damage[0].Segment != seg || rep.Damage[0].Pos != pos {
		t.Fatalf("damage at %d in %s; Verify found %+v (%v)", pos, seg, rep.Damage, err)
	}
	if _, _, err := DamageSealed(fs, "/log", 1, 1000, 20, []byte{1}); err == nil {
		t.Fatal("a record past the end was damaged")
	}
}
