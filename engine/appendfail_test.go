package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/vfs"
)

// waitFailedBy waits (up to 5 s) for the engine to stop, and fails the
// test unless it stopped on a failed commit log.
func waitFailedBy(t *testing.T, e *Engine, what string) {
	t.Helper()
	select {
	case <-e.Failed():
	case <-time.After(5 * time.Second):
		t.Fatalf("the engine did not stop when %s met the failed commit log", what)
	}
	if !errors.Is(e.Err(), commitlog.ErrFailed) {
		t.Fatalf("stopped by %v, want the commit log's failure", e.Err())
	}
}

// TestTrailWriteOnFailedLogStops: the trail record of a nack is the first
// append to meet a failed fdatasync of the log. The engine stops, as it
// does whichever append meets the failure, rather than go on as healthy
// with a log that takes no more writes.
func TestTrailWriteOnFailedLogStops(t *testing.T) {
	ff := vfs.NewFaulty(vfs.NewMem())
	h := newHarness(t, func(o *Options) { o.FS = ff })
	h.sendVisible("t", 1)
	rs := h.receiveN("t", "g", 1, time.Minute)
	if err := h.e.Sync(); err != nil {
		t.Fatal(err)
	}
	eioOnSync(ff, ".log", 1)
	if err := h.e.Nack(context.Background(), "t", "g", rs[0].Receipt, time.Hour); err != nil {
		t.Fatal(err)
	}
	waitFailedBy(t, h.e, "a nack's trail record")
}
