package engine

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// TestDeadlineDeadLetters: a message handed out after its deadline goes to
// the group's dead-letter topic with reason expired, and the consumer never
// sees it; one within its deadline is delivered.
func TestDeadlineDeadLetters(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.e.CreateTopic("offers", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.CreateGroup("offers", "g", GroupConfig{}); err != nil {
		t.Fatal(err)
	}
	fresh := h.send("offers", "fresh", message.When{Delay: time.Minute, TTL: time.Hour})
	stale := h.send("offers", "stale", message.When{Delay: time.Minute, Deadline: h.e.Now() + 90_000})
	h.clk.Advance(3 * time.Minute) // past stale's deadline before anything fired
	got := h.receiveN("offers", "g", 1, time.Minute)
	if got[0].ID != fresh.ID {
		t.Fatalf("received %v, want only %v", got[0].ID, fresh.ID)
	}
	h.receiveNone("offers", "g")
	dl := h.receiveDLQ(DeadLetterTopic("offers", "g"))
	if dl.Message.Properties[DeadReasonProperty] != ReasonExpired || dl.Message.Properties["hourglass-origin-id"] != stale.ID.String() {
		t.Fatalf("dead letter %+v", dl.Message.Properties)
	}
	if n := h.e.stats.Expired.Load(); n != 1 {
		t.Fatalf("expired counter %d", n)
	}
}

// TestDeadlineAfterDowntime: the broker is down past a message's deadline;
// after the restart it is dead-lettered, not delivered.
func TestDeadlineAfterDowntime(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.e.CreateTopic("offers", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.CreateGroup("offers", "g", GroupConfig{}); err != nil {
		t.Fatal(err)
	}
	r := h.send("offers", "o", message.When{Delay: time.Minute, TTL: 2 * time.Minute})
	h.send("offers", "late-ok", message.When{Delay: time.Minute})
	h.e.Close()
	h.e = nil
	h.clk.Advance(time.Hour)
	h.open()
	got := h.receiveN("offers", "g", 1, time.Minute)
	if got[0].ID == r.ID {
		t.Fatal("an expired message was delivered after the downtime")
	}
	h.receiveNone("offers", "g")
	dl := h.receiveDLQ(DeadLetterTopic("offers", "g"))
	if dl.Message.Properties["hourglass-origin-id"] != r.ID.String() || dl.Message.Properties[DeadReasonProperty] != ReasonExpired {
		t.Fatalf("dead letter %+v", dl.Message.Properties)
	}
}

func TestDeadlineValidation(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	now := h.e.Now()
	bad := []message.When{
		{Delay: time.Hour, Deadline: now + 60_000},
		{Delay: time.Hour, TTL: time.Minute},
		{Deadline: now + 1, TTL: time.Hour},
		{TTL: -time.Second},
		{Window: -time.Millisecond},
		{Window: 500 * 24 * time.Hour},
		{Deadline: now + int64(500*24*time.Hour/time.Millisecond)},
	}
	for _, w := range bad {
		if _, err := h.e.Send(ctx, message.Message{Topic: "t"}, w); errs.CodeOf(err) != errs.InvalidArgument {
			t.Errorf("%+v: %v", w, err)
		}
	}
	r := h.send("t", "", message.When{Delay: time.Minute, TTL: 2 * time.Minute})
	if _, err := h.e.Reschedule(ctx, r.ID, message.When{Delay: 3 * time.Minute}, 0); errs.CodeOf(err) != errs.FailedPrecondition {
		t.Fatalf("reschedule past the deadline: %v", err)
	}
	if _, err := h.e.Reschedule(ctx, r.ID, message.When{Delay: 90 * time.Second}, 0); err != nil {
		t.Fatalf("reschedule within the deadline: %v", err)
	}
}
