package kafkamode

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDeliveryConfig: exactly once is the default, at least once is
// taken, anything else is refused with the two choices named.
func TestDeliveryConfig(t *testing.T) {
	base := Config{Brokers: []string{"k:9092"}, DelayTopic: "d", Group: "g", WorkerID: "w", Partitions: 1, Replication: 1}
	c, err := base.withDefaults()
	if err != nil || c.Delivery != DeliveryExactlyOnce || c.atLeastOnce() {
		t.Fatalf("default: %q %v", c.Delivery, err)
	}
	base.Delivery = DeliveryAtLeastOnce
	if c, err := base.withDefaults(); err != nil || !c.atLeastOnce() {
		t.Fatalf("at-least-once: %q %v", c.Delivery, err)
	}
	base.Delivery = "maybe-once"
	if _, err := base.withDefaults(); err == nil || !strings.Contains(err.Error(), DeliveryAtLeastOnce) {
		t.Fatalf("a bad mode: %v", err)
	}
}

// TestMayRedeliver: only a record that was in the partition at its
// assignment and due by then (give or take the clock margin) may repeat
// a forward of the previous owner.
func TestMayRedeliver(t *testing.T) {
	pp := &partProgress{catchUp: 100, assignedAt: 1_000_000}
	margin := redeliveryMargin.Milliseconds()
	for _, c := range []struct {
		offset, due int64
		want        bool
	}{
		{99, 999_000, true},
		{99, 1_000_000 + margin, true},
		{99, 1_000_001 + margin, false}, // due after the take-over: never forwarded before
		{100, 999_000, false},           // written after the assignment
	} {
		if got := mayRedeliver(&entry{pp: pp, offset: c.offset, due: c.due}); got != c.want {
			t.Errorf("offset %d due %d: %v, want %v", c.offset, c.due, got, c.want)
		}
	}
}

// TestCollectForwardsLeavesCancelsAndCopies: while a transaction's end
// runs on another goroutine (at least once), the loop collects forwards
// only. A cancel stops the batch, so it cannot reach an entry of the
// transaction in flight, and copies forward wait; collectDue, once the
// end is applied, takes all of them. Neither is early: what waits is late
// by the end's duration.
func TestCollectForwardsLeavesCancelsAndCopies(t *testing.T) {
	s := &copyScene{t: t, now: 1_800_000_000_000}
	cfg := DefaultConfig()
	cfg.Brokers = []string{"127.0.0.1:1"}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.w = w
	w.parts.parts[0] = newPartProgress(0, nil)
	s.index(s.rec(0, s.now-5, "", nil))
	if b := w.idx.collectForwards(s.now); len(b) != 1 || b[0].offset != 0 || !b[0].inBatch {
		t.Fatalf("a due forward: collected %d, want it", len(b))
	}
	s.index(s.rec(1, s.now+time.Hour.Milliseconds(), "", nil))
	s.index(s.rec(2, 0, "offset:1", nil))
	s.index(s.rec(3, s.now-1, "", nil))
	copied := &entry{pp: w.parts.parts[0], offset: 9, due: s.now + time.Hour.Milliseconds(), rec: &kgo.Record{}, copy: true}
	w.idx.copyReady = append(w.idx.copyReady, copied)
	if b := w.idx.collectForwards(s.now); len(b) != 0 {
		t.Fatalf("behind a cancel: collected %v, want nothing", describe(b))
	}
	for _, e := range w.idx.due {
		if e.inBatch || e.cancelled {
			t.Fatalf("entry at %d touched by collectForwards: %+v", e.offset, e)
		}
	}
	got := describe(w.idx.collectDue(s.now))
	if len(got) != 4 || got[2] != "cancel " || got[1] != "cancelled " || got[3] != "other " || got[9] != "copied " {
		t.Fatalf("after the end: %v, want the cancel, its target, the forward behind it and the copy", got)
	}
}
