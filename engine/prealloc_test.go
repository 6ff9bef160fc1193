package engine

import (
	"path"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestPreallocFailureIsCountedNotFatal: with preallocation on and every
// write of the spare segment failing as on a full disk, sends go on across
// segment rolls, and each failed preallocation is counted.
func TestPreallocFailureIsCountedNotFatal(t *testing.T) {
	ffs := vfs.NewFaulty(vfs.NewMem())
	ffs.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpWrite && path.Base(name) == commitlog.SpareName {
			return syscall.ENOSPC
		}
		return nil
	})
	h := newHarness(t, func(o *Options) { o.FS = ffs; o.Preallocate = true; o.SegmentBytes = 4096 })
	for i := 0; i < 200; i++ {
		h.send("t", "x", message.When{})
	}
	if segs := h.e.clog.Segments(); len(segs) < 3 {
		t.Fatalf("%d segments: the sends did not roll the log", len(segs))
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.e.Stats().PreallocErrors.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no failed preallocation was counted")
		}
		time.Sleep(time.Millisecond)
	}
}
