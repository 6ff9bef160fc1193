package engine

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
)

func TestCompactionFreesSegmentsPinnedByLongPendingMessages(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.SegmentBytes = 16 << 10
		o.Retention = time.Hour
	})
	ctx := context.Background()
	long, cancelled, moved := sendPinnedAndCompact(t, h)
	// The moved messages keep their IDs, keys and operations.
	info, err := h.e.InspectKey("t", "long")
	if err != nil || info.ID != long.ID || info.State != StatePending || info.Due != long.Due || info.BodyBytes != len("body-long") {
		t.Fatalf("inspect moved message: %+v %v", info, err)
	}
	nd, err := h.e.Reschedule(ctx, moved.ID, message.When{Delay: 40 * 24 * time.Hour}, 0)
	if err != nil {
		t.Fatalf("reschedule a moved message: %v", err)
	}
	if _, err := h.e.Inspect(cancelled.ID); !IsNotFound(err) {
		t.Fatalf("the cancelled message should be gone with its segment: %v", err)
	}
	h.restart()
	info, err = h.e.Inspect(long.ID)
	if err != nil || info.State != StatePending {
		t.Fatalf("moved message after restart: %+v %v", info, err)
	}
	// Both fire at their due times, once, with their bodies, under their original IDs.
	h.clk.Advance(30*24*time.Hour - 2*time.Hour)
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err = h.e.Inspect(long.ID)
		if err == nil && info.State == StateVisible {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("moved message never became visible: %+v %v", info, err)
		}
		time.Sleep(time.Millisecond)
	}
	// Most of the 300 immediate messages went with their segments; take
	// whatever is left and look for the moved one.
	var found bool
	for _, r := range h.drain("t", "g") {
		if r.ID == long.ID {
			found = string(r.Message.Body) == "body-long"
		}
		if r.ID == moved.ID {
			t.Fatal("the rescheduled message fired at its old time")
		}
	}
	if !found {
		t.Fatal("the moved message was not delivered under its original ID with its body")
	}
	h.clk.Advance(11 * 24 * time.Hour)
	got := h.receiveN("t", "g", 1, time.Minute)
	if got[0].ID != moved.ID || got[0].Due != nd {
		t.Fatalf("rescheduled moved message: %+v", got[0])
	}
}

// sendPinnedAndCompact sends three messages due in 30 days (cancelling
// one) and 300 due now that fill segments, lets retention pass, and checks
// that checkpoints compact the two pending ones out of their segment and
// delete it.
func sendPinnedAndCompact(t *testing.T, h *harness) (long, cancelled, moved Receipt) {
	t.Helper()
	ctx := context.Background()
	long = h.send("t", "long", message.When{Delay: 30 * 24 * time.Hour})
	cancelled = h.send("t", "gone", message.When{Delay: 30 * 24 * time.Hour})
	moved = h.send("t", "moved", message.When{Delay: 30 * 24 * time.Hour})
	if err := h.e.Cancel(ctx, cancelled.ID); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i++ {
		if _, err := h.e.Send(ctx, message.Message{Topic: "t", Body: make([]byte, 200)}, message.When{}); err != nil {
			t.Fatal(err)
		}
	}
	h.waitVisible("t", 300)
	h.clk.Advance(2 * time.Hour)
	// First checkpoint moves the two pending messages, the next deletes the segment.
	for i := 0; i < 3; i++ {
		if err := h.e.checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.e.Stats().Compacted.Load(); got != 2 {
		t.Fatalf("compacted %d messages, want 2", got)
	}
	if got := h.e.Stats().SegmentsDeleted.Load(); got == 0 {
		t.Fatal("the pinned segment was not deleted after compaction")
	}
	if uint64(h.e.clog.Start()) <= long.ID.Pos {
		t.Fatalf("log start %d still holds the original record at %d", h.e.clog.Start(), long.ID.Pos)
	}
	return long, cancelled, moved
}

// drain receives and acks until a receive returns nothing.
func (h *harness) drain(topic, grp string) []Received {
	h.t.Helper()
	var out []Received
	for {
		rs, err := h.e.Receive(context.Background(), ReceiveRequest{Topic: topic, Group: grp, Max: 1000, Invisible: time.Hour})
		if err != nil {
			h.t.Fatal(err)
		}
		if len(rs) == 0 {
			return out
		}
		for _, r := range rs {
			if err := h.e.Ack(context.Background(), topic, grp, r.Receipt); err != nil {
				h.t.Fatal(err)
			}
		}
		out = append(out, rs...)
	}
}
