package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/vfs"
)

// TestDegradedWhileFiresFail is issue 29's defect 8: on a full disk the
// fire records of due messages fail and are retried, and the engine said
// nothing but a log line and a counter (/healthz answered ok). Now
// Degraded names the failure and since when, until a fire record is
// written again.
func TestDegradedWhileFiresFail(t *testing.T) {
	ffs := vfs.NewFaulty(vfs.NewMem())
	h := newHarness(t, func(o *Options) { o.FS = ffs })
	e := h.e
	if d := e.Degraded(); len(d) != 0 {
		t.Fatalf("degraded before any failure: %q", d)
	}
	sendHerd(t, e, "t", 10, e.Now()+1000)
	waitParked(e, h.clk)
	ffs.SetLimit(ffs.Used())
	h.clk.Advance(time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for e.Stats().FireErrors.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	d := e.Degraded()
	if len(d) != 1 || !strings.Contains(d[0], "due messages are not being made visible") || !strings.Contains(d[0], "disk full") ||
		!strings.Contains(d[0], msTime(t0.UnixMilli()+1000)) {
		t.Fatalf("degraded while fires fail: %q", d)
	}
	ffs.SetLimit(-1)
	h.clk.Advance(time.Second)
	if n := waitVisible(h, "t", 10); n != 10 {
		t.Fatalf("%d of 10 visible after space came back", n)
	}
	if d := e.Degraded(); len(d) != 0 {
		t.Fatalf("still degraded after the fire went through: %q", d)
	}
}

// TestDegradedWhileCheckpointsFail: a checkpoint that fails (a full disk)
// is reported by Degraded until one succeeds.
func TestDegradedWhileCheckpointsFail(t *testing.T) {
	ffs := vfs.NewFaulty(vfs.NewMem())
	h := newHarness(t, func(o *Options) { o.FS = ffs; o.CheckpointInterval = time.Second })
	e := h.e
	h.sendVisible("t", 3)
	ffs.SetLimit(ffs.Used())
	deadline := time.Now().Add(5 * time.Second)
	for e.Stats().CheckpointErrors.Load() == 0 && time.Now().Before(deadline) {
		h.clk.Advance(time.Second)
		time.Sleep(time.Millisecond)
	}
	d := e.Degraded()
	if len(d) != 1 || !strings.Contains(d[0], "checkpoints fail") || !strings.Contains(d[0], "no space left") {
		t.Fatalf("degraded while checkpoints fail: %q", d)
	}
	ffs.SetLimit(-1)
	done := e.Stats().Checkpoints.Load()
	for e.Stats().Checkpoints.Load() == done && time.Now().Before(deadline) {
		h.clk.Advance(time.Second)
		time.Sleep(time.Millisecond)
	}
	if d := e.Degraded(); len(d) != 0 {
		t.Fatalf("still degraded after a checkpoint succeeded: %q", d)
	}
}
