package engine

import (
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestReadErrorSurfaces: one transient EIO while a receive reads the
// message. The review found the message silently marked done for the
// group, with receive returning no error. It must surface as unavailable,
// and the message must stay in place: the next receive gets it, as its
// first delivery.
func TestReadErrorSurfaces(t *testing.T) {
	ff := vfs.NewFaulty(vfs.NewMem())
	h := newHarness(t, func(o *Options) { o.FS = ff })
	r := h.send("t", "k", message.When{})
	h.waitVisible("t", 1)
	var fail atomic.Int32
	fail.Store(1)
	ff.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpRead && strings.Contains(name, "log") && fail.Add(-1) >= 0 {
			return syscall.EIO
		}
		return nil
	})
	_, err := h.e.Receive(t.Context(), ReceiveRequest{Topic: "t", Group: "g", Max: 10})
	if errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("receive over a read error: %v, want unavailable", err)
	}
	if _, err := h.e.Inspect(r.ID); err != nil {
		t.Fatalf("inspect after the fault: %v", err)
	}
	rs := h.receiveN("t", "g", 1, time.Minute)
	if rs[0].ID != r.ID || rs[0].Attempt != 1 {
		t.Fatalf("after the fault got %v attempt %d, want %v attempt 1", rs[0].ID, rs[0].Attempt, r.ID)
	}
	if n := h.e.Stats().ReadErrors.Load(); n != 1 {
		t.Fatalf("read errors counted: %d", n)
	}
}

// TestInspectReadErrorIsUnavailable: a read error while inspecting is not
// "not found".
func TestInspectReadErrorIsUnavailable(t *testing.T) {
	ff := vfs.NewFaulty(vfs.NewMem())
	h := newHarness(t, func(o *Options) { o.FS = ff })
	r := h.send("t", "k", message.When{Delay: time.Hour})
	ff.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpRead && strings.Contains(name, "log") {
			return syscall.EIO
		}
		return nil
	})
	if _, err := h.e.Inspect(r.ID); errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("inspect over a read error: %v, want unavailable", err)
	}
	if _, err := h.e.LookupKey("t", "k"); errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("lookup over a read error: %v, want unavailable", err)
	}
	ff.Inject(nil)
}
