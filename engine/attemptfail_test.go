package engine

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestReceiveAttemptRecordOnFullDiskHandsOutNothing: a receive whose
// attempt record cannot be written (disk full) hands out nothing and says
// so; the leases are given back, so the next receive, once there is room,
// gets the same messages as first deliveries.
func TestReceiveAttemptRecordOnFullDiskHandsOutNothing(t *testing.T) {
	ffs := vfs.NewFaulty(vfs.NewMem())
	h := newHarness(t, func(o *Options) { o.FS = ffs })
	h.topicWithGroup("t", "g", GroupConfig{}) // before the disk fills
	h.sendVisible("t", 3)
	ffs.SetLimit(ffs.Used())
	rs, err := h.e.Receive(context.Background(), ReceiveRequest{Topic: "t", Group: "g", Max: 3, Invisible: time.Minute})
	if errs.CodeOf(err) != errs.ResourceExhausted || len(rs) != 0 {
		t.Fatalf("receive whose attempt record found the disk full: %d messages, %v; want none and resource_exhausted", len(rs), err)
	}
	if _, inFlight := h.groupCounts("t", "g"); inFlight != 0 {
		t.Fatalf("%d in flight after the failed receive, want 0", inFlight)
	}
	select {
	case <-h.e.Failed():
		t.Fatalf("a full disk stopped the engine: %v", h.e.Err())
	default:
	}
	ffs.SetLimit(-1)
	for _, r := range h.receiveN("t", "g", 3, time.Minute) {
		if r.Attempt != 1 {
			t.Errorf("a message given back came with attempt %d, want 1", r.Attempt)
		}
	}
}

// TestReceiveAttemptRecordOnFailedLogStops: when the commit log fails for
// good under a receive's attempt record (a failed fdatasync), the receive
// hands out nothing and gets unavailable, and the engine stops (Failed)
// as it does for any other append: no later receive hands out a message
// whose attempt no record counts. After a power loss the messages are
// there for a first delivery.
func TestReceiveAttemptRecordOnFailedLogStops(t *testing.T) {
	mem := vfs.NewMem()
	ff := vfs.NewFaulty(mem)
	h := newHarness(t, func(o *Options) { o.FS = ff })
	h.topicWithGroup("t", "g", GroupConfig{})
	h.sendVisible("t", 3)
	eioOnSync(ff, "log", 1)
	req := ReceiveRequest{Topic: "t", Group: "g", Max: 3, Invisible: time.Minute}
	rs, err := h.e.Receive(context.Background(), req)
	if errs.CodeOf(err) != errs.Unavailable || len(rs) != 0 {
		t.Fatalf("receive whose attempt record's fdatasync failed: %d messages, %v; want none and unavailable", len(rs), err)
	}
	select {
	case <-h.e.Failed():
	default:
		t.Fatal("the engine did not stop after the commit log failed under an attempt record")
	}
	if rs, err := h.e.Receive(context.Background(), req); errs.CodeOf(err) != errs.Unavailable || len(rs) != 0 {
		t.Fatalf("receive after the failure: %d messages, %v; want none and unavailable", len(rs), err)
	}
	h.powerLossRestart(mem)
	for _, r := range h.receiveN("t", "g", 3, time.Minute) {
		if r.Attempt != 1 {
			t.Errorf("after the restart a message came with attempt %d, want 1", r.Attempt)
		}
	}
}
