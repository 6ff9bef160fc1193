package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
)

func TestRetentionDeletesDeliveredSegmentsButNotPendingOnes(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.SegmentBytes = 16 << 10
		o.Retention = time.Hour
		o.CompactMaxPending = -1 // compaction has its own test
	})
	long := h.send("t", "long", message.When{Delay: 48 * time.Hour}) // pins the first segment
	var first Receipt
	for i := 0; i < 300; i++ {
		r, err := h.e.Send(t.Context(), message.Message{Topic: "t", Body: make([]byte, 200)}, message.When{})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = r
		}
	}
	h.waitVisible("t", 300)
	if n := len(h.e.clog.Segments()); n < 4 {
		t.Fatalf("only %d segments; the test needs several", n)
	}
	h.clk.Advance(2 * time.Hour)
	if err := h.e.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if got := h.e.Stats().SegmentsDeleted.Load(); got != 0 {
		t.Fatalf("%d segments deleted while the first one holds a pending message", got)
	}
	if _, err := h.e.Inspect(long.ID); err != nil {
		t.Fatalf("pending message lost its record: %v", err)
	}
	// Once the long-pending message is visible and retention passed, the
	// old segments go.
	h.clk.Advance(47 * time.Hour)
	h.waitVisible("t", 301)
	h.clk.Advance(2 * time.Hour)
	if err := h.e.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if got := h.e.Stats().SegmentsDeleted.Load(); got == 0 {
		t.Fatal("no segment deleted after everything was delivered and retention passed")
	}
	if _, err := h.e.Inspect(first.ID); !IsNotFound(err) || !strings.Contains(err.Error(), "retention") {
		t.Fatalf("inspect of a deleted message: %v", err)
	}
	// The engine still works and recovers after deletion.
	h.restart()
	after := h.send("t", "after", message.When{})
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := h.e.Inspect(after.ID)
		if err == nil && info.State == StateVisible {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("message sent after retention and restart not visible: %+v %v", info, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRetentionSkipsAreNotDeliveries: a group that reads only after
// retention removed what it had not received skips those messages, and
// says so (a stat, a log line); its counts show no delivery. They were
// counted as delivered.
func TestRetentionSkipsAreNotDeliveries(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.SegmentBytes = 16 << 10
		o.Retention = time.Hour
		o.CompactMaxPending = -1
	})
	for i := 0; i < 200; i++ {
		if _, err := h.e.Send(t.Context(), message.Message{Topic: "t", Body: make([]byte, 200)}, message.When{}); err != nil {
			t.Fatal(err)
		}
	}
	h.waitVisible("t", 200)
	h.clk.Advance(2 * time.Hour)
	if err := h.e.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if h.e.Stats().SegmentsDeleted.Load() == 0 {
		t.Fatal("no segment deleted; the test needs retention to remove some")
	}
	rs, err := h.e.Receive(t.Context(), ReceiveRequest{Topic: "t", Group: "late", Max: 1000})
	if err != nil {
		t.Fatal(err)
	}
	skipped := h.e.Stats().RetentionSkipped.Load()
	gi := groupInfo(h, "t", "late")
	if skipped == 0 || gi.Delivered != uint64(len(rs)) || uint64(len(rs))+skipped != 200 {
		t.Fatalf("received %d, skipped %d, group counts %d delivered; want the 200 split between them, and only what was received delivered", len(rs), skipped, gi.Delivered)
	}
}
