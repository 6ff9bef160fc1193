package engine

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// TestGroupCreateBeforeTopicAndSetPolicyLater: a group with its policy is
// created before any message (its topic with it); a group a receive made
// with the defaults gets its policy set later; both survive a kill -9,
// and the policy rules the next failures. Bad input changes nothing.
func TestGroupCreateBeforeTopicAndSetPolicyLater(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	adm := h.e.GroupAdmin()
	if err := adm.Create("jobs", "workers", GroupConfig{MaxAttempts: 2}); err != nil {
		t.Fatalf("create a group before its topic exists: %v", err)
	}
	if err := adm.Create("jobs", "workers", GroupConfig{}); errs.CodeOf(err) != errs.AlreadyExists {
		t.Fatalf("second create: %v", err)
	}
	h.send("jobs", "a", message.When{})
	h.settle("jobs", 1)
	h.receiveN("jobs", "other", 1, time.Minute) // made with the defaults
	if gi := adminGroup(t, h, "jobs", "other"); gi.Config.MaxAttempts != 16 {
		t.Fatalf("default group %+v", gi.Config)
	}
	one, zero, big := 1, 0, 2*time.Hour
	for _, bad := range []PolicyChange{{MaxAttempts: &zero}, {BackoffBase: &big}} {
		if _, err := adm.SetPolicy("jobs", "other", bad); errs.CodeOf(err) != errs.InvalidArgument {
			t.Fatalf("bad policy %+v: %v", bad, err)
		}
	}
	if _, err := adm.SetPolicy("jobs", "nobody", PolicyChange{MaxAttempts: &one}); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("policy of a missing group: %v", err)
	}
	gi, err := adm.SetPolicy("jobs", "other", PolicyChange{MaxAttempts: &one})
	if err != nil || gi.Config.MaxAttempts != 1 || gi.Config.BackoffBase != time.Second {
		t.Fatalf("set policy: %+v, %v", gi.Config, err)
	}
	c := h.crashOpen()
	if gi := adminGroup(t, c, "jobs", "workers"); gi.Config.MaxAttempts != 2 {
		t.Fatalf("after kill -9, workers has %+v", gi.Config)
	}
	if gi := adminGroup(t, c, "jobs", "other"); gi.Config.MaxAttempts != 1 {
		t.Fatalf("after kill -9, other has %+v", gi.Config)
	}
	// The lowered policy rules: one failure dead-letters.
	r := c.receiveN("jobs", "other", 1, time.Minute)[0]
	if err := c.e.Nack(ctx, "jobs", "other", r.Receipt, 0); err != nil {
		t.Fatal(err)
	}
	c.waitVisible(DeadLetterTopic("jobs", "other"), 1)
}

func adminGroup(t *testing.T, h *harness, topic, name string) GroupInfo {
	t.Helper()
	gs, err := h.e.Groups(topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		if g.Name == name {
			return g
		}
	}
	t.Fatalf("no group %s of %s in %+v", name, topic, gs)
	return GroupInfo{}
}

// TestGroupCreateWithoutAutoCreate: with NoAutoCreate a group of a missing
// topic is refused, saying how to create the topic, and nothing is made.
func TestGroupCreateWithoutAutoCreate(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.NoAutoCreate = true })
	err := h.e.GroupAdmin().Create("jobs", "workers", GroupConfig{})
	if errs.CodeOf(err) != errs.NotFound || len(h.e.Topics()) != 0 {
		t.Fatalf("create without the topic: %v, topics %v", err, h.e.Topics())
	}
}

// TestGroupPauseResume: a paused group's receives hand out nothing while
// another group goes on; a long poll open across the resume gets the
// message; the pause survives a checkpoint and a kill -9.
func TestGroupPauseResume(t *testing.T) {
	h := newHarness(t, nil)
	adm := h.e.GroupAdmin()
	if err := adm.Create("t", "g", GroupConfig{}); err != nil {
		t.Fatal(err)
	}
	gi, err := adm.SetPaused("t", "g", true)
	if err != nil || !gi.Paused {
		t.Fatalf("pause: %+v, %v", gi, err)
	}
	h.send("t", "a", message.When{})
	h.settle("t", 1)
	h.receiveNone("t", "g")
	h.receiveN("t", "other", 1, time.Minute)
	if err := h.e.checkpoint(); err != nil {
		t.Fatal(err)
	}
	c := h.crashOpen()
	if !adminGroup(t, c, "t", "g").Paused {
		t.Fatal("the pause did not survive a checkpoint and kill -9")
	}
	c.receiveNone("t", "g")
	got := make(chan int, 1)
	go func() {
		rs, err := c.e.Receive(context.Background(), ReceiveRequest{Topic: "t", Group: "g", Max: 1, Wait: MaxReceiveWait})
		if err != nil {
			t.Error(err)
		}
		got <- len(rs)
	}()
	if gi, err := c.e.GroupAdmin().SetPaused("t", "g", false); err != nil || gi.Paused {
		t.Fatalf("resume: %+v, %v", gi, err)
	}
	if n := <-got; n != 1 {
		t.Fatalf("the long poll open across the resume got %d messages", n)
	}
	d := c.crashOpen()
	if adminGroup(t, d, "t", "g").Paused {
		t.Fatal("the resume did not survive kill -9")
	}
}

// TestGroupSeek: a group moved to a time gets again the messages made
// visible at or after it, acked or not, with attempts from 1, skips those
// before it, and loses its leases; the seek survives a kill -9.
func TestGroupSeek(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.DefaultQueues = 1 })
	ctx := context.Background()
	var ids []message.ID
	for i := range 3 {
		ids = append(ids, h.send("t", string(rune('a'+i)), message.When{}).ID)
		h.settle("t", i+1)
		h.clk.Advance(time.Minute)
	}
	mid := t0.Add(time.Minute).UnixMilli() // b's visible time
	rs := h.receiveN("t", "g", 3, time.Minute)
	for _, r := range rs[:2] {
		if err := h.e.Ack(ctx, "t", "g", r.Receipt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.e.GroupAdmin().Seek(ctx, "t", "g", -1); errs.CodeOf(err) != errs.InvalidArgument {
		t.Fatalf("seek to a negative time: %v", err)
	}
	res, err := h.e.GroupAdmin().Seek(ctx, "t", "g", mid)
	if err != nil || len(res.To) != 1 || res.To[0] != 1 || res.From[0] != 2 {
		t.Fatalf("seek: %+v, %v", res, err)
	}
	if err := h.e.Ack(ctx, "t", "g", rs[2].Receipt); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("a lease from before the seek still acks: %v", err)
	}
	c := h.crashOpen()
	again := c.receiveN("t", "g", 2, time.Minute)
	if again[0].ID != ids[1] || again[1].ID != ids[2] || again[0].Attempt != 1 {
		t.Fatalf("after the seek and kill -9: %v (attempt %d), want b and c", []message.ID{again[0].ID, again[1].ID}, again[0].Attempt)
	}
	c.receiveNone("t", "g")
	// To the future: the backlog is skipped.
	if _, err := c.e.GroupAdmin().Seek(ctx, "t", "g", c.e.Now()+1); err != nil {
		t.Fatal(err)
	}
	if gi := adminGroup(t, c, "t", "g"); gi.Backlog != 0 || gi.InFlight != 0 {
		t.Fatalf("after a seek past everything: %+v", gi)
	}
}
