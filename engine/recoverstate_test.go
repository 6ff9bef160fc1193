package engine

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestFiredBeforeCrashStaysVisible: after a restart the dispatcher loads
// timer buckets again from the earliest due time it replayed, which can be
// far behind the times of messages that had already fired. While those
// buckets load, a message that fired before the crash must still say
// visible, and must refuse a cancel or a reschedule: an accepted one would
// be a cancelled message that consumers see, or a second delivery. (Found
// by the kill -9 test: one "visible after an acknowledged cancel" and one
// "visible twice" in about 40 runs of 100 kills.)
func TestFiredBeforeCrashStaysVisible(t *testing.T) {
	// Recovery knows early fired from its fire record after the
	// checkpoint (firedSince), or from the checkpoint's fire frontier.
	t.Run("fire record", func(t *testing.T) { testFiredBeforeCrash(t, false) })
	t.Run("frontier", func(t *testing.T) { testFiredBeforeCrash(t, true) })
}

func testFiredBeforeCrash(t *testing.T, ckptAfterFire bool) {
	img, opts, early, late := firedBeforeCrashImage(t, ckptAfterFire)
	start := t0.UnixMilli()
	if ckptAfterFire {
		checkFiredBeforeCheckpoint(t, img, opts, early, start)
		return
	}
	checkFiredWhileLoading(t, img, opts, early, late, start)
}

// firedBeforeCrashImage sends early (due at t0+5s) and late (t0+9s),
// checkpoints, lets early fire (then checkpoints again if ckptAfterFire),
// sends one message due long ago, and returns the crash image with the
// options to open it.
func firedBeforeCrashImage(t *testing.T, ckptAfterFire bool) (img *vfs.Mem, opts Options, early, late message.ID) {
	t.Helper()
	mem := vfs.NewMem()
	clk := clock.NewFake(t0)
	opts = Options{Dir: "data", FS: mem, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		CheckpointInterval: 1000 * time.Hour, BucketWidth: time.Second}
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	start := t0.UnixMilli()
	ctx := context.Background()
	send := func(e *Engine, at int64) message.ID {
		t.Helper()
		rc, err := e.Send(ctx, message.Message{Topic: "fired", Body: []byte("x")}, message.When{At: at})
		if err != nil {
			t.Fatal(err)
		}
		return rc.ID
	}
	early = send(e, start+5_000)
	late = send(e, start+9_000)
	// Both in their bucket files, then early fires (after the checkpoint,
	// so recovery learns it from the fire record) and late does not.
	if err := e.checkpoint(); err != nil {
		t.Fatal(err)
	}
	waitParked(e, clk)
	clk.Advance(6 * time.Second)
	if !waitSettled(e, clk.Now().UnixMilli(), 5*time.Second) {
		t.Fatalf("did not settle: %s", engineState(e))
	}
	if ckptAfterFire {
		if err := e.checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	// A send due long ago: recovery's replay starts the buckets from it.
	send(e, start-60_000)
	if !waitSettled(e, clk.Now().UnixMilli(), 5*time.Second) {
		t.Fatalf("did not settle: %s", engineState(e))
	}
	if info, err := e.Inspect(early); err != nil || info.State != StateVisible {
		t.Fatalf("before the crash: %v %v", info.State, err)
	}
	img = mem.Crash(nil)
	e.Close()
	return img, opts, early, late
}

// checkFiredBeforeCheckpoint checks, with a checkpoint taken after early
// fired, that early reads as visible while the buckets load from long
// before it.
func checkFiredBeforeCheckpoint(t *testing.T, img *vfs.Mem, opts Options, early message.ID, start int64) {
	t.Helper()
	// Every bucket behind the frontier is gone by now, and the
	// replayed send's bucket is in memory: no read to hold. Put the
	// loader back to where recovery starts it instead, under the lock,
	// and ask for the state then.
	opts.FS = img
	r, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, _, err := r.readStored(early.Pos)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	was := r.disp.setLoadedUntil(r.disp.store().BucketOf(start - 60_000))
	st, _, _ := messageStateLocked(r.ovl, r.disp, early.Pos, s)
	r.disp.setLoadedUntil(was)
	r.mu.Unlock()
	if st != StateVisible {
		t.Errorf("early fired before the checkpoint; with the buckets loading from long before it, it says %v", st)
	}
}

// checkFiredWhileLoading checks, while recovery holds the read of early's
// bucket, that early reads as visible and refuses cancel and reschedule,
// and that late is still pending.
func checkFiredWhileLoading(t *testing.T, img *vfs.Mem, opts Options, early, late message.ID, start int64) {
	t.Helper()
	ctx := context.Background()
	// Recovery reads the timer index's one run file twice (its tail, and
	// its one block, first and last); the loop's read to load early's
	// bucket, the next, is the one held. The forecast's count after Open
	// reads the file too: it is held until the checks are done.
	gate := &gateFS{FS: img, op: vfs.OpRead, skip: 2}
	gate.armFile(".tr")
	opts.FS = gate
	opts.recountGate = make(chan struct{})
	r, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer close(opts.recountGate)
	defer close(gate.release)
	select {
	case <-gate.reached:
	case <-time.After(5 * time.Second):
		t.Fatalf("the loop never read early's bucket: %s", engineState(r))
	}
	if info, err := r.Inspect(early); err != nil || info.State != StateVisible {
		t.Errorf("early fired before the crash; while its bucket loads it says %v (%v)", info.State, err)
	}
	if err := r.Cancel(ctx, early); errs.CodeOf(err) != errs.FailedPrecondition {
		t.Errorf("cancel of a message that fired before the crash: %v, want failed_precondition", err)
	}
	if _, err := r.Reschedule(ctx, early, message.When{Delay: time.Second}, 0); errs.CodeOf(err) != errs.FailedPrecondition {
		t.Errorf("reschedule of a message that fired before the crash: %v, want failed_precondition", err)
	}
	if info, err := r.Inspect(late); err != nil || info.State != StatePending {
		t.Errorf("late has not fired; it says %v (%v)", info.State, err)
	}
}
