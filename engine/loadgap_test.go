package engine

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestWheelWaitsForUnloadedBuckets: when the clock jumps over several
// timer buckets, the wheel must not pass a bucket that is not loaded yet.
// The loop loads one bucket per turn; if it advanced the wheel to now as
// soon as the first load ended, the fire frontier would run ahead of the
// timers of the next bucket while it loads, and a checkpoint taken then
// would make recovery skip them as already visible: lost messages.
func TestWheelWaitsForUnloadedBuckets(t *testing.T) {
	mem := vfs.NewMem()
	gate := &gateFS{FS: mem, op: vfs.OpRead}
	clk := clock.NewFake(t0)
	opts := Options{Dir: "data", FS: gate, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		CheckpointInterval: 1000 * time.Hour, BucketWidth: time.Second}
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close() }()
	start := t0.UnixMilli()
	send := func(at int64) message.ID {
		rc, err := e.Send(context.Background(), message.Message{Topic: "gap", Body: []byte("x")}, message.When{At: at})
		if err != nil {
			t.Fatal(err)
		}
		return rc.ID
	}
	send(start + 10_200)
	late := send(start + 11_200) // in the next bucket
	// Write the buckets, so that loading them reads their files.
	if err := e.checkpoint(); err != nil {
		t.Fatal(err)
	}
	// Both buckets are in the one run file the checkpoint wrote: the first
	// read of it after this loads the first bucket, the second is held.
	gate.skip = 1
	gate.armFile(".tr")
	waitParked(e, clk)
	clk.Advance(12 * time.Second)
	select {
	case <-gate.reached:
	case <-time.After(5 * time.Second):
		t.Fatalf("the loop never read the second bucket: %s", engineState(e))
	}
	e.mu.Lock()
	f := e.disp.frontierLocked()
	e.mu.Unlock()
	if f >= start+11_200 {
		t.Errorf("frontier %d passed the unloaded message due %d: %s", f, start+11_200, engineState(e))
	}
	// A checkpoint now, and a power loss right after it.
	if err := e.checkpoint(); err != nil {
		t.Fatal(err)
	}
	img := mem.Crash(nil)
	close(gate.release)
	opts.FS = img
	r, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	now := clk.Now().UnixMilli()
	if !waitSettled(r, now, 5*time.Second) {
		t.Fatalf("recovered engine did not settle: %s", engineState(r))
	}
	r.mu.Lock()
	visible := int64(0)
	for _, q := range r.cat.topic("gap").queues {
		visible += int64(q.Len())
	}
	r.mu.Unlock()
	if visible != 2 {
		info, _ := r.Inspect(late)
		t.Errorf("%d of 2 due messages visible after recovery; the later one is %v: %s", visible, info.State, engineState(r))
	}
}
