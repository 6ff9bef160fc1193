package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// sendVisible sends n messages due now to topic and waits until they are
// visible.
func (h *harness) sendVisible(topic string, n int) {
	h.t.Helper()
	for range n {
		h.send(topic, "", message.When{})
	}
	h.waitVisible(topic, n)
}

func receipts(rs []Received) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Receipt
	}
	return out
}

// groupCounts returns the group's acked and in-flight counts.
func (h *harness) groupCounts(topic, grp string) (acked uint64, inFlight int64) {
	h.t.Helper()
	g := groupInfo(h, topic, grp)
	return g.Acked, g.InFlight
}

// TestReceiveCarriesAcksInOneAppend: a receive that carries the last
// batch's receipts acks them and leases the next batch, and the ack record
// and the attempt record are one append (adjacent in the log, one fsync;
// the harness has no other writer at that moment). After a
// restart the acked messages stay acked and the leased ones come back with
// their attempt counted.
func TestReceiveCarriesAcksInOneAppend(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	h.sendVisible("t", 6)
	first := h.receiveN("t", "g", 3, time.Minute)
	_, syncsBefore, _ := h.e.stats.FsyncSeconds.Snapshot()
	second, err := h.e.Receive(ctx, ReceiveRequest{Topic: "t", Group: "g", Max: 3, Ack: receipts(first)})
	if err != nil || len(second) != 3 {
		t.Fatalf("receive with acks: %d messages, %v; want 3", len(second), err)
	}
	if _, syncs, _ := h.e.stats.FsyncSeconds.Snapshot(); syncs != syncsBefore+1 {
		t.Errorf("the receive with acks waited for %d fsyncs of the log, want 1", syncs-syncsBefore)
	}
	if acked, inFlight := h.groupCounts("t", "g"); acked != 3 || inFlight != 3 {
		t.Fatalf("acked %d, in flight %d; want 3 and 3", acked, inFlight)
	}
	var kinds []commitlog.Type
	var ends []commitlog.Pos
	if err := h.e.clog.Scan(h.e.clog.Start(), func(pos commitlog.Pos, rec commitlog.Record) error {
		kinds = append(kinds, rec.Type)
		ends = append(ends, pos+commitlog.Pos(commitlog.FrameHeaderSize+len(rec.Payload)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	n := len(kinds)
	// Each state record is followed by the trail record that times it.
	if n < 4 || kinds[n-4] != recAck || kinds[n-3] != recTrail || kinds[n-2] != recAttempt || kinds[n-1] != recTrail {
		t.Fatalf("the log ends with record types %v; want an ack then an attempt record, each with its trail", kinds[max(0, n-4):])
	}
	h.restart()
	again := h.receiveN("t", "g", 3, time.Minute)
	for _, r := range again {
		if r.Attempt != 2 {
			t.Errorf("message at offset %d came back with attempt %d, want 2", r.Offset, r.Attempt)
		}
	}
	for _, r := range first {
		for _, a := range again {
			if a.ID == r.ID {
				t.Errorf("acked message %v delivered again after the restart", r.ID)
			}
		}
	}
}

// TestReceiveWithUnknownAckChangesNothing: one bad receipt among the acks
// fails the call, acks none of them and leases nothing.
func TestReceiveWithUnknownAckChangesNothing(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	h.sendVisible("t", 6)
	first := h.receiveN("t", "g", 3, time.Minute)
	bad := append(receipts(first), "AAIAAAAAAAAAAAAAAAHqZkqPXbDtvQ")
	_, err := h.e.Receive(ctx, ReceiveRequest{Topic: "t", Group: "g", Max: 3, Ack: bad})
	if errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("receive with a forged receipt: %v, want not_found", err)
	}
	if acked, inFlight := h.groupCounts("t", "g"); acked != 0 || inFlight != 3 {
		t.Fatalf("after the refused call: acked %d, in flight %d; want 0 and 3", acked, inFlight)
	}
	if err := h.e.Ack(ctx, "t", "g", receipts(first)...); err != nil {
		t.Fatalf("the receipts of the refused call are still good: %v", err)
	}
}

// TestReceiveAcksBeforeItWaits: with nothing to lease, the acks are made
// before the long poll waits, and a message arriving during the wait is
// answered.
func TestReceiveAcksBeforeItWaits(t *testing.T) {
	h := newHarness(t, nil)
	h.sendVisible("t", 2)
	first := h.receiveN("t", "g", 2, time.Minute)
	type answer struct {
		rs  []Received
		err error
	}
	done := make(chan answer, 1)
	go func() {
		rs, err := h.e.Receive(context.Background(), ReceiveRequest{Topic: "t", Group: "g", Max: 5, Wait: 20 * time.Second, Ack: receipts(first)})
		done <- answer{rs, err}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if acked, _ := h.groupCounts("t", "g"); acked == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the acks were not made while the receive waited")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case a := <-done:
		t.Fatalf("the receive answered %d messages, %v before anything was sent", len(a.rs), a.err)
	default:
	}
	h.send("t", "late", message.When{})
	a := <-done
	if a.err != nil || len(a.rs) != 1 || string(a.rs[0].Message.Body) != "body-late" {
		t.Fatalf("the waiting receive got %d messages, %v; want the late one", len(a.rs), a.err)
	}
}

// TestReceiveAckFailedAppendChangesNothing: when the combined append fails
// (disk full), nothing is acked and nothing leased: the acked leases hold
// again and the messages taken are given back.
func TestReceiveAckFailedAppendChangesNothing(t *testing.T) {
	ffs := vfs.NewFaulty(vfs.NewMem())
	h := newHarness(t, func(o *Options) { o.FS = ffs })
	ctx := context.Background()
	h.sendVisible("t", 6)
	first := h.receiveN("t", "g", 3, time.Minute)
	ffs.SetLimit(ffs.Used())
	_, err := h.e.Receive(ctx, ReceiveRequest{Topic: "t", Group: "g", Max: 3, Ack: receipts(first)})
	if errs.CodeOf(err) != errs.ResourceExhausted {
		t.Fatalf("receive with acks on a full disk: %v, want resource_exhausted", err)
	}
	if acked, inFlight := h.groupCounts("t", "g"); acked != 0 || inFlight != 3 {
		t.Fatalf("after the failed append: acked %d, in flight %d; want 0 and 3", acked, inFlight)
	}
	ffs.SetLimit(-1)
	second, err := h.e.Receive(ctx, ReceiveRequest{Topic: "t", Group: "g", Max: 3, Ack: receipts(first)})
	if err != nil || len(second) != 3 {
		t.Fatalf("once there is room: %d messages, %v; want 3", len(second), err)
	}
	for _, r := range second {
		if r.Attempt != 1 {
			t.Errorf("a message given back came with attempt %d, want 1", r.Attempt)
		}
	}
}

// TestAckCountsALeaseOnce: a receipt given twice, or in another base64
// spelling of the same bytes, acks its message once.
func TestAckCountsALeaseOnce(t *testing.T) {
	h := newHarness(t, nil)
	h.sendVisible("t", 2)
	rs := receipts(h.receiveN("t", "g", 2, time.Minute))
	// The last character of an unpadded base64 text of 22 bytes carries 4
	// bits of data and 2 that decoders ignore: flip one of those.
	r0 := []byte(rs[0])
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, r0[len(r0)-1])
	r0[len(r0)-1] = alphabet[last^1]
	if err := h.e.Ack(context.Background(), "t", "g", rs[0], rs[1], rs[0], string(r0)); err != nil {
		t.Fatal(err)
	}
	if acked, inFlight := h.groupCounts("t", "g"); acked != 2 || inFlight != 0 {
		t.Fatalf("acked %d, in flight %d; want 2 and 0", acked, inFlight)
	}
}
