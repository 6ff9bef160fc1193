package engine

import (
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestDeadLetterNow: a consumer gives up on a leased message: it is copied
// to the group's dead-letter topic with the reason and acked in the group.
// The same receipt again succeeds and copies nothing more (a client retries
// a forward until it succeeds); an ack of it fails. A restart keeps both.
func TestDeadLetterNow(t *testing.T) {
	h := newHarness(t, nil)
	ctx := t.Context()
	if _, err := h.e.Send(ctx, message.Message{Topic: "t", Key: "k", Body: []byte("body")}, message.When{}); err != nil {
		t.Fatal(err)
	}
	h.waitVisible("t", 1)
	r := h.receiveN("t", "g", 1, time.Minute)[0]
	if err := h.e.DeadLetterAttempts(ctx, "t", "g", r.Receipt, 0); err != nil {
		t.Fatalf("dead-letter: %v", err)
	}
	if err := h.e.DeadLetterAttempts(ctx, "t", "g", r.Receipt, 0); err != nil {
		t.Fatalf("the same receipt again: %v, want success (the message is done)", err)
	}
	if err := h.e.Ack(ctx, "t", "g", r.Receipt); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("ack of a dead-lettered receipt: %v, want not found", err)
	}
	check := func(dead uint64) {
		t.Helper()
		dl := h.receiveDLQ(DeadLetterTopic("t", "g"))
		p := dl.Message.Properties
		if string(dl.Message.Body) != "body" || p[DeadReasonProperty] != ReasonGivenUp || p["hourglass-attempts"] != "1" || p["hourglass-origin-id"] != r.ID.String() {
			t.Fatalf("dead letter %+v", dl.Message)
		}
		if gi := groupInfo(h, "t", "g"); gi.DeadLettered != dead || gi.InFlight != 0 || gi.Backlog != 0 {
			t.Fatalf("group: %+v; want %d dead-lettered, none in flight or waiting", gi, dead)
		}
	}
	check(1)
	h.receiveNone(DeadLetterTopic("t", "g"), "ops") // one copy only
	h.restart()
	h.clk.Advance(2 * time.Minute) // past the first lease: nothing comes back
	h.receiveNone("t", "g")
	check(0) // the counters start again at a restart
}

// TestDeadLetterRefusesBadReceipts: a receipt that names no live lease of
// the group moves nothing.
func TestDeadLetterRefusesBadReceipts(t *testing.T) {
	h := newHarness(t, nil)
	ctx := t.Context()
	h.sendVisible("t", 1)
	r := h.receiveN("t", "g", 1, time.Minute)[0]
	for _, c := range []struct{ topic, group, receipt string }{
		{"t", "g", "not-a-receipt"},
		{"t", "g", strings.Repeat("A", len(r.Receipt))},
		{"t", "other", r.Receipt},
		{"nope", "g", r.Receipt},
	} {
		if err := h.e.DeadLetterAttempts(ctx, c.topic, c.group, c.receipt, 0); err == nil {
			t.Fatalf("dead-letter %+v accepted", c)
		}
	}
	if err := h.e.Ack(ctx, "t", "g", r.Receipt); err != nil {
		t.Fatalf("the lease did not survive the refusals: %v", err)
	}
	if _, err := h.e.DescribeTopic(DeadLetterTopic("t", "g")); err == nil {
		t.Fatal("a dead-letter topic was created by refused requests")
	}
}

// TestDeadLetterReadErrorKeepsMessage: a read error while copying a
// message to the dead-letter topic used to ack it with no copy made, so
// the message was gone from both. It must stay, and be moved once the
// read succeeds.
func TestDeadLetterReadErrorKeepsMessage(t *testing.T) {
	ff := vfs.NewFaulty(vfs.NewMem())
	h := newHarness(t, func(o *Options) { o.FS = ff })
	ctx := t.Context()
	if _, err := h.e.Send(ctx, message.Message{Topic: "t", Body: []byte("keep me")}, message.When{}); err != nil {
		t.Fatal(err)
	}
	h.waitVisible("t", 1)
	r := h.receiveN("t", "g", 1, time.Minute)[0]
	var fail atomic.Bool
	fail.Store(true)
	ff.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpRead && strings.Contains(name, "log") && fail.Load() {
			return syscall.EIO
		}
		return nil
	})
	if err := h.e.DeadLetterAttempts(ctx, "t", "g", r.Receipt, 0); errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("dead-letter over a read error: %v, want unavailable", err)
	}
	if gi := groupInfo(h, "t", "g"); gi.DeadLettered != 0 {
		t.Fatalf("%d dead-lettered with no copy made", gi.DeadLettered)
	}
	fail.Store(false)
	h.clk.Advance(2 * time.Second) // the loop retries the move after a pause
	dl := h.receiveDLQ(DeadLetterTopic("t", "g"))
	if string(dl.Message.Body) != "keep me" || dl.Message.Properties[DeadReasonProperty] != ReasonGivenUp {
		t.Fatalf("dead letter %+v", dl.Message)
	}
	if gi := groupInfo(h, "t", "g"); gi.DeadLettered != 1 {
		t.Fatalf("%d dead-lettered after the move", gi.DeadLettered)
	}
}

// groupInfo returns the counts of a group that must exist.
func groupInfo(h *harness, topic, grp string) GroupInfo {
	h.t.Helper()
	gs, err := h.e.Groups(topic)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, g := range gs {
		if g.Name == grp {
			return g
		}
	}
	h.t.Fatalf("group %s of %s not found", grp, topic)
	return GroupInfo{}
}

// TestDeadLetterRacesAck: a forward and an ack of one receipt, and a second
// forward, at once: each message ends either acked or with exactly one
// copy in the dead-letter topic, never both and never twice.
func TestDeadLetterRacesAck(t *testing.T) {
	h := newHarness(t, nil)
	ctx := t.Context()
	const n = 50
	h.sendVisible("t", n)
	rs := h.receiveN("t", "g", n, time.Minute)
	var acked atomic.Int32
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Add(3)
		go func() { defer wg.Done(); _ = h.e.DeadLetterAttempts(ctx, "t", "g", r.Receipt, 0) }()
		go func() { defer wg.Done(); _ = h.e.DeadLetterAttempts(ctx, "t", "g", r.Receipt, 0) }()
		go func() {
			defer wg.Done()
			if h.e.Ack(ctx, "t", "g", r.Receipt) == nil {
				acked.Add(1)
			}
		}()
	}
	wg.Wait()
	copies := 0
	if int(acked.Load()) < n {
		copies = len(h.receiveN(DeadLetterTopic("t", "g"), "ops", n-int(acked.Load()), time.Minute))
	}
	t.Logf("%d acked, %d dead-lettered", acked.Load(), copies)
	h.receiveNone(DeadLetterTopic("t", "g"), "ops") // no second copy
	gi := groupInfo(h, "t", "g")
	if int(acked.Load())+copies != n || int(gi.DeadLettered) != copies || gi.InFlight != 0 || gi.Backlog != 0 {
		t.Fatalf("%d acked, %d copies, group %+v; want %d in all, one way each", acked.Load(), copies, gi, n)
	}
}

// TestDeadLetterRecordsConsumerAttempts: a consumer that retried a message
// itself under one lease (a RocketMQ push consumer with a FIFO message)
// reports its attempts with the forward, and the dead letter records them,
// not the broker's one delivery; a report below the broker's deliveries
// records the broker's; one out of range is refused and moves nothing.
func TestDeadLetterRecordsConsumerAttempts(t *testing.T) {
	h := newHarness(t, nil)
	ctx := t.Context()
	for _, k := range []string{"a", "b"} {
		h.send("t", k, message.When{})
	}
	h.waitVisible("t", 2)
	rs := h.receiveN("t", "g", 2, time.Minute)
	for _, bad := range []int{-1, MaxReportedAttempts + 1} {
		if err := h.e.DeadLetterAttempts(ctx, "t", "g", rs[0].Receipt, bad); errs.CodeOf(err) != errs.InvalidArgument {
			t.Fatalf("forward reporting %d attempts: %v, want invalid argument", bad, err)
		}
	}
	if err := h.e.DeadLetterAttempts(ctx, "t", "g", rs[0].Receipt, 5); err != nil {
		t.Fatal(err)
	}
	// Its lease ends unacked, and the second delivery is forwarded with a
	// stale count of 1: the group made 2 deliveries.
	if err := h.e.Nack(ctx, "t", "g", rs[1].Receipt, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(time.Second)
	again := h.receiveN("t", "g", 1, time.Minute)[0]
	if again.Attempt != 2 {
		t.Fatalf("second delivery is attempt %d", again.Attempt)
	}
	if err := h.e.DeadLetterAttempts(ctx, "t", "g", again.Receipt, 1); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"body-a": "5", "body-b": "2"}
	for range want {
		dl := h.receiveDLQ(DeadLetterTopic("t", "g"))
		if got := dl.Message.Properties["hourglass-attempts"]; got != want[string(dl.Message.Body)] {
			t.Errorf("dead letter of %s records %s attempts, want %s", dl.Message.Body, got, want[string(dl.Message.Body)])
		}
	}
	h.receiveNone(DeadLetterTopic("t", "g"), "ops") // the refused forwards moved nothing
}
