package kafkamode

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
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

// TestWorkerIDLength: a worker ID too long to name the worker's Kafka
// client is refused before the worker starts, saying how long it may be;
// one that just fits is taken.
func TestWorkerIDLength(t *testing.T) {
	base := Config{Brokers: []string{"k:9092"}, DelayTopic: "d", Group: "g", Partitions: 1, Replication: 1}
	most := maxClientID - len("g-~") - nonceLen
	base.WorkerID = strings.Repeat("w", most)
	if _, err := base.withDefaults(); err != nil {
		t.Fatalf("a worker ID of %d bytes: %v", most, err)
	}
	base.WorkerID += "w"
	if _, err := base.withDefaults(); err == nil || !strings.Contains(err.Error(), "worker ID") ||
		!strings.Contains(err.Error(), fmt.Sprintf("at most %d", most+1)) {
		t.Fatalf("a worker ID of %d bytes: %v, want refused, at most %d with the group", most+1, err, most+1)
	}
}

// TestWorkerIDPlain: a worker ID or group with a control character, invalid
// UTF-8 or white space at an end is refused, naming the setting; inner
// spaces, dots and non-ASCII letters are taken.
func TestWorkerIDPlain(t *testing.T) {
	base := Config{Brokers: []string{"k:9092"}, DelayTopic: "d", Group: "g", Partitions: 1, Replication: 1}
	for _, id := range []string{"w1", "pod-7.example", "wörker", "worker 1"} {
		base.WorkerID = id
		if _, err := base.withDefaults(); err != nil {
			t.Errorf("worker ID %q: %v", id, err)
		}
	}
	for _, id := range []string{" ", "w1 ", " w1", "a\nb", "a\x1b[31mb", "\xff", "a\tb", "a\u2028b"} {
		base.WorkerID = id
		if _, err := base.withDefaults(); err == nil || !strings.Contains(err.Error(), "worker ID") {
			t.Errorf("worker ID %q: %v, want refused naming the worker ID", id, err)
		}
	}
	base.WorkerID, base.Group = "w1", "g\n"
	if _, err := base.withDefaults(); err == nil || !strings.Contains(err.Error(), "group") {
		t.Errorf("group %q: %v, want refused naming the group", base.Group, err)
	}
}

// TestCollectForwardable: while a transaction ends beside the loop, only
// plain due entries with their bodies are taken, in due order, and the
// first entry that is anything else stops the collection with its slot
// still in the due heap: an entry of the transaction in flight (which an
// aborted end puts back, and which must then still have its slot) and a
// cancel (whose targets may be in that transaction). After the end,
// collectDue takes them as before.
func TestCollectForwardable(t *testing.T) {
	s := newCopyScene(t, time.Hour, false)
	w := s.w
	now := s.now
	s.index(s.rec(10, now-30, "", nil))
	s.index(s.rec(11, now-20, "", nil))
	s.index(s.rec(12, now-10, "", nil))
	s.index(s.rec(13, now-5, "", nil))
	s.index(s.rec(14, now+50, "", nil))
	byOffset := map[int64]*entry{}
	for _, e := range w.idx.due {
		byOffset[e.offset] = e
	}
	inFlight := byOffset[12]
	inFlight.inBatch = true // taken by the transaction whose end runs
	got := w.idx.collectForwardable(now)
	if len(got) != 2 || got[0].offset != 10 || got[1].offset != 11 {
		t.Fatalf("collected %v, want offsets 10 and 11", offsets(got))
	}
	for _, e := range got {
		if !e.inBatch {
			t.Errorf("offset %d collected but not marked in a batch", e.offset)
		}
	}
	if head := w.idx.due.peek(); head != inFlight {
		t.Fatalf("the head after collecting is %v, want the entry of the transaction in flight (offset 12) in its slot", head)
	}
	if again := w.idx.collectForwardable(now); len(again) != 0 {
		t.Fatalf("collected %v behind an entry in flight", offsets(again))
	}
	if _, ok := w.idx.nextForwardable(); ok {
		t.Error("with an entry of the transaction in flight at the head, the loop would wake for it")
	}
	if forwardableBeside(byOffset[14], now) {
		t.Error("an entry due 50 ms from now is forwardable now")
	}
	inFlight.inBatch = false // an aborted end put it back
	rest := w.idx.collectDue(now)
	if len(rest) != 2 || rest[0] != inFlight || rest[1].offset != 13 {
		t.Fatalf("after the end collectDue took %v, want offsets 12 and 13", offsets(rest))
	}
	if due, ok := w.idx.nextForwardable(); !ok || due != now+50 {
		t.Fatalf("next forwardable due %d (%v), want offset 14's, %d", due, ok, now+50)
	}
	s.index(s.rec(20, 0, "key", nil)) // a cancel by key, due when written (now)
	if c := w.idx.due.peek(); c == nil || !c.isCancel() {
		t.Fatalf("the head is %v, want the cancel", c)
	}
	if got := w.idx.collectForwardable(now); len(got) != 0 {
		t.Fatalf("a cancel at the head let %v be collected beside an end", offsets(got))
	}
}

func offsets(es []*entry) []int64 {
	var out []int64
	for _, e := range es {
		out = append(out, e.offset)
	}
	return out
}

// TestEndBesideStopsOnFailedForwards: at SIGTERM the session's context is
// cancelled while a transaction ends beside the loop, and every forward
// then fails at once and goes back to the index. endBeside must not take
// the same entry again and again (a livelock that kept the worker from
// ever stopping, found by a review): it waits for the end, returns its
// outcome, and leaves the entry in the index for the stop's last
// transaction or the next owner.
func TestEndBesideStopsOnFailedForwards(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Brokers = []string{"127.0.0.1:1"}
	cfg.Delivery = DeliveryAtLeastOnce
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.ses.dialForwarder(w.forwarderOptions()); err != nil {
		t.Fatal(err)
	}
	defer w.ses.closeForwarder()
	w.parts.parts[0] = newPartProgress(0, nil)
	now := time.Now().UnixMilli()
	s := &copyScene{t: t, w: w, now: now}
	s.index(s.rec(10, now-5, "", nil))
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // SIGTERM
	release := make(chan struct{})
	type out struct {
		committed bool
		err       error
	}
	done := make(chan out, 1)
	go func() {
		c, err := w.endBeside(ctx, func() (bool, error) {
			<-release
			return false, ctx.Err()
		})
		done <- out{c, err}
	}()
	close(release)
	select {
	case o := <-done:
		if o.committed || !errors.Is(o.err, context.Canceled) {
			t.Errorf("endBeside returned %v, %v; want the end's outcome: not committed, context canceled", o.committed, o.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("endBeside has not returned 10 s after the end did (forwarded_while_ending %d)", w.stats.ForwardedWhileEnding.Load())
	}
	if e := w.idx.due.peek(); e == nil || e.offset != 10 || e.inBatch {
		t.Fatalf("the entry whose forward failed is not back at the head of the index: %+v", e)
	}
}

// TestTakeForwardedLeavesRevoked: forwards kept for the next transaction
// whose partition was revoked meanwhile are not committed by it; those
// of partitions still owned are.
func TestTakeForwardedLeavesRevoked(t *testing.T) {
	kept, gone := newPartProgress(0, nil), newPartProgress(1, nil)
	a, b, c := &entry{pp: kept, offset: 1}, &entry{pp: gone, offset: 2}, &entry{pp: kept, offset: 3}
	var x loopIndex
	x.stashForwarded([]*entry{a, b, c})
	gone.dropped.Store(true) // revoked after the forwards
	got := x.takeForwarded()
	if len(got) != 2 || got[0] != a || got[1] != c {
		t.Fatalf("took %v, want offsets 1 and 3 (offset 2's partition was revoked)", offsets(got))
	}
	if x.hasForwarded() {
		t.Fatal("the stash still holds entries after takeForwarded")
	}
}
