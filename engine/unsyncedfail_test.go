package engine

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestFireFdatasyncFailsAfterItsAnswer (invariant E21): a fire record is
// answered before its fdatasync, and that fdatasync fails (EIO; the pages
// it covered are dropped, as Linux does). The message was visible, but
// nothing that follows the fire is acknowledged: a receive's attempt
// record is refused, the engine stops, Sync reports the failure, and
// after a power loss the message is pending again, fires again at or
// after its due time, and is delivered once.
func TestFireFdatasyncFailsAfterItsAnswer(t *testing.T) {
	mem := vfs.NewMem()
	ff := vfs.NewFaulty(mem)
	h := newHarness(t, func(o *Options) { o.FS = ff })
	r := h.send("t", "k", message.When{Delay: time.Second})
	if err := h.e.CreateGroup("t", "g", GroupConfig{}); err != nil {
		t.Fatal(err)
	}
	waitParked(h.e, h.clk)
	eioOnSync(ff, ".log", 1) // the fire record's fdatasync
	h.clk.Advance(time.Second)
	vs := h.waitVisible("t", 1)
	if vs[0].ID != r.ID || vs[0].Visible < vs[0].Due {
		t.Fatalf("visible %+v, want %v at or after its due time", vs[0], r.ID)
	}
	// Whatever the timing of the failed fdatasync, nothing after the fire
	// is acknowledged: a receive leases nothing once the log has failed.
	for deadline := time.Now().Add(5 * time.Second); ; {
		rs, err := h.e.Receive(context.Background(), ReceiveRequest{Topic: "t", Group: "g", Max: 1, Invisible: time.Minute})
		if err != nil {
			break
		}
		if len(rs) != 0 {
			if err := h.e.Ack(context.Background(), "t", "g", rs[0].Receipt); err == nil {
				t.Fatalf("ack of a delivery whose fire record's fdatasync failed succeeded")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("receive neither delivered nor failed")
		}
	}
	if err := h.e.Sync(); err == nil {
		t.Fatal("Sync succeeded after the fire record's fdatasync failed")
	}
	select {
	case <-h.e.Failed():
	case <-time.After(5 * time.Second):
		t.Fatal("the engine did not stop after its log's fdatasync failed")
	}

	h.powerLossRestart(mem)
	info, err := h.e.Inspect(r.ID)
	if err != nil {
		t.Fatalf("message lost: %v", err)
	}
	if info.Due != r.Due {
		t.Fatalf("after recovery: %+v, want due %d", info, r.Due)
	}
	rs := h.receiveN("t", "g", 1, time.Minute)
	if rs[0].ID != r.ID || rs[0].Visible.Visible < rs[0].Due {
		t.Fatalf("after recovery received %+v, want %v at or after its due time", rs[0], r.ID)
	}
	if err := h.e.Ack(context.Background(), "t", "g", rs[0].Receipt); err != nil {
		t.Fatal(err)
	}
	h.receiveNone("t", "g")
}

// TestCancelAfterFireFdatasyncFailedStops: a fire record's fdatasync
// fails with nothing else waiting on the log, so the engine learns of it
// only at the next append: a cancel's, refused under the engine's lock.
// The engine stops (it hung on its own lock before), the cancel is
// refused, and after a power loss the message it named is still pending.
func TestCancelAfterFireFdatasyncFailedStops(t *testing.T) {
	mem := vfs.NewMem()
	ff := vfs.NewFaulty(mem)
	h := newHarness(t, func(o *Options) { o.FS = ff })
	later := h.send("t", "later", message.When{Delay: time.Hour})
	h.send("t", "soon", message.When{Delay: time.Second})
	waitParked(h.e, h.clk)
	eioOnSync(ff, ".log", 1) // the fire record's fdatasync
	h.clk.Advance(time.Second)
	h.waitVisible("t", 1)
	done := make(chan error, 1)
	go func() { done <- h.e.Cancel(context.Background(), later.ID) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a cancel after the log's fdatasync failed succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancel hung after the log's fdatasync failed")
	}
	select {
	case <-h.e.Failed():
	case <-time.After(5 * time.Second):
		t.Fatal("the engine did not stop after its log's fdatasync failed")
	}
	h.powerLossRestart(mem)
	if info, err := h.e.Inspect(later.ID); err != nil || info.State != StatePending || info.Due != later.Due {
		t.Fatalf("the message the refused cancel named: %+v %v, want pending due %d", info, err, later.Due)
	}
	h.waitVisible("t", 1) // the lost fire fires again
}
