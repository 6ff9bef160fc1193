package engine

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// threeGroups sets up the case: topic orders with groups billing
// (one attempt), audit and workers; n messages that audit and workers
// receive and ack, and billing nacks into its dead-letter topic.
func threeGroups(h *harness, n int) {
	h.t.Helper()
	if err := h.e.CreateTopic("orders", TopicConfig{Queues: 2}); err != nil {
		h.t.Fatal(err)
	}
	for _, g := range []string{"billing", "audit", "workers"} {
		max := 16
		if g == "billing" {
			max = 1
		}
		if err := h.e.CreateGroup("orders", g, GroupConfig{MaxAttempts: max}); err != nil {
			h.t.Fatal(err)
		}
	}
	for i := range n {
		h.send("orders", fmt.Sprint("order-", i), message.When{})
	}
	h.waitVisible("orders", n)
	for _, g := range []string{"audit", "workers"} {
		if got := h.drain("orders", g); len(got) != n {
			h.t.Fatalf("%s received %d, want %d", g, len(got), n)
		}
	}
	h.nackAllToDeadLetters("orders", "billing", n)
}

// wantCounts checks each group's delivered and acked counters and its
// backlog.
func wantCounts(h *harness, want map[string][3]int) {
	h.t.Helper()
	for g, w := range want {
		gi := groupInfo(h, "orders", g)
		if got := [3]int{int(gi.Delivered), int(gi.Acked), int(gi.Backlog)}; got != w {
			h.t.Errorf("group %s: delivered, acked, backlog = %v, want %v", g, got, w)
		}
	}
}

// TestRedriveOnlyToItsGroup: redriving billing's dead letters delivers
// them to billing again and to no other group of the topic, whose counts
// (deliveries, backlog) do not change, before and after a restart, and
// after a crash. At def821c audit and workers received the 20 again.
func TestRedriveOnlyToItsGroup(t *testing.T) {
	h := newHarness(t, nil)
	ctx := t.Context()
	const n = 20
	threeGroups(h, n)
	wantCounts(h, map[string][3]int{"billing": {n, 0, 0}, "audit": {n, n, 0}, "workers": {n, n, 0}})
	if moved, err := h.e.Redrive(ctx, "orders", "billing", 100); err != nil || moved != n {
		t.Fatalf("redrive: %d, %v", moved, err)
	}
	h.waitVisible("orders", 2*n)
	// The others' backlogs never count the copies, even before a receive.
	wantCounts(h, map[string][3]int{"billing": {n, 0, n}, "audit": {n, n, 0}, "workers": {n, n, 0}})
	h.receiveNone("orders", "audit")
	h.receiveNone("orders", "workers")
	back := h.receiveN("orders", "billing", n, time.Minute)
	keys := map[string]bool{}
	for _, r := range back {
		if r.Message.Properties["hourglass-redriven-from"] == "" || r.Message.ForGroup != "billing" || r.Attempt != 1 {
			t.Fatalf("redriven message %+v, attempt %d", r.Message, r.Attempt)
		}
		keys[r.Message.Key] = true
	}
	if len(keys) != n {
		t.Fatalf("billing got %d distinct messages back, want %d", len(keys), n)
	}
	// Half acked, half still leased across a restart.
	if err := h.e.Ack(ctx, "orders", "billing", receipts(back[:n/2])...); err != nil {
		t.Fatal(err)
	}
	wantCounts(h, map[string][3]int{"billing": {2 * n, n / 2, n / 2}, "audit": {n, n, 0}, "workers": {n, n, 0}})
	h.restart()
	wantCounts(h, map[string][3]int{"billing": {0, 0, n / 2}, "audit": {0, 0, 0}, "workers": {0, 0, 0}})
	h.receiveNone("orders", "audit")
	h.receiveNone("orders", "workers")
	if got := h.drain("orders", "billing"); len(got) != n/2 {
		t.Fatalf("billing after the restart: %d, want the %d not acked", len(got), n/2)
	}
	// A crash (no checkpoint since the restart): the same.
	c := h.crashOpen()
	wantCounts(c, map[string][3]int{"billing": {0, 0, 0}, "audit": {0, 0, 0}, "workers": {0, 0, 0}})
	c.receiveNone("orders", "audit")
	c.receiveNone("orders", "workers")
	if gs, _ := c.e.Groups(DeadLetterTopic("orders", "billing")); len(gs) != 0 {
		t.Fatalf("the dead-letter topic lists groups %+v; the redrive's reader is the engine's own", gs)
	}
}

// TestRedriveHidesItsReader: the redrive's reader group is in no list a
// user sees (Groups, DescribeTopic), does not count against MaxGroups, and
// no client may create, receive as, or redrive it; EngineGroups shows it
// to an operator.
func TestRedriveHidesItsReader(t *testing.T) {
	h := newHarness(t, nil)
	ctx := t.Context()
	threeGroups(h, 3)
	if _, err := h.e.Redrive(ctx, "orders", "billing", 2); err != nil {
		t.Fatal(err)
	}
	dlq := DeadLetterTopic("orders", "billing")
	for _, e := range []*Engine{h.e, func() *Engine { h.restart(); return h.e }()} {
		gs, err := e.Groups(dlq)
		ts, err2 := e.DescribeTopic(dlq)
		if err != nil || err2 != nil || len(gs) != 0 || len(ts.Groups) != 0 {
			t.Fatalf("groups of the dead-letter topic: %+v %+v (%v %v)", gs, ts.Groups, err, err2)
		}
		eg := e.EngineGroups()
		if len(eg) != 1 || eg[0].Topic != dlq || eg[0].Name != "redrive" || eg[0].Backlog != 1 {
			t.Fatalf("engine groups %+v; want the reader with 1 dead letter left", eg)
		}
	}
	if err := h.e.CreateGroup(dlq, "redrive", GroupConfig{}); errs.CodeOf(err) != errs.InvalidArgument {
		t.Fatalf("a client's group named redrive on a dead-letter topic: %v", err)
	}
	if _, err := h.e.Receive(ctx, ReceiveRequest{Topic: dlq, Group: "redrive"}); errs.CodeOf(err) != errs.InvalidArgument {
		t.Fatalf("a client's receive as the redrive's reader: %v", err)
	}
	if _, err := h.e.Redrive(ctx, dlq, "redrive", 1); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("a redrive of the reader itself: %v", err)
	}
	// On a topic of its own, "redrive" is an ordinary name.
	if err := h.e.CreateGroup("orders", "redrive", GroupConfig{}); err != nil {
		t.Fatal(err)
	}
}

// TestRedriveCrashMidway: a redrive whose append fails (a full disk)
// writes neither the copies nor the acks: the dead letters stay, leased
// to nobody, and the next redrive moves each once. A kill -9 right after
// a redrive keeps both halves.
func TestRedriveCrashMidway(t *testing.T) {
	mem := vfs.NewMem()
	ffs := vfs.NewFaulty(mem)
	h := newHarness(t, func(o *Options) { o.FS = ffs })
	h.fs = mem // the crash image below is of the disk under the faults
	ctx := t.Context()
	threeGroups(h, 4)
	if moved, err := h.e.Redrive(ctx, "orders", "billing", 1); moved != 1 || err != nil {
		t.Fatalf("first redrive: %d, %v", moved, err)
	}
	h.waitVisible("orders", 5)
	ffs.FailAfter(vfs.OpWrite, 0, syscall.ENOSPC)
	if moved, err := h.e.Redrive(ctx, "orders", "billing", 100); moved != 0 || errs.CodeOf(err) != errs.ResourceExhausted {
		t.Fatalf("redrive on a full disk: %d, %v", moved, err)
	}
	ffs.Inject(nil)
	if gs := h.e.EngineGroups(); len(gs) != 1 || gs[0].Backlog != 3 || gs[0].InFlight != 0 {
		t.Fatalf("after the failed redrive: %+v; want the 3 dead letters waiting, none leased", gs)
	}
	if moved, err := h.e.Redrive(ctx, "orders", "billing", 100); moved != 3 || err != nil {
		t.Fatalf("redrive after space came back: %d, %v", moved, err)
	}
	h.waitVisible("orders", 8)
	c := h.crashOpen()
	if moved, err := c.e.Redrive(ctx, "orders", "billing", 100); moved != 0 || err != nil {
		t.Fatalf("redrive after the crash: %d, %v; want nothing left", moved, err)
	}
	if got := c.drain("orders", "billing"); len(got) != 4 {
		t.Fatalf("billing received %d after the crash, want the 4 copies once", len(got))
	}
	c.receiveNone("orders", "audit")
	c.receiveNone("orders", "workers")
}

// TestSendForGroup: the public way to deliver to one group (a consumer's
// retry with a delay, as RocketMQ's %RETRY%group): the group must exist;
// a message due beyond the near window, and a group created after the
// message fired, are passed over too, after a restart as well.
func TestSendForGroup(t *testing.T) {
	h := newHarness(t, nil)
	ctx := t.Context()
	h.topicWithGroup("jobs", "a", GroupConfig{})
	if err := h.e.CreateGroup("jobs", "b", GroupConfig{}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []SendRequest{
		{Message: message.Message{Topic: "jobs"}, ForGroup: "nobody"},
		{Message: message.Message{Topic: "nojobs"}, ForGroup: "a"},
	} {
		if _, err := h.e.SendBatch(ctx, []SendRequest{bad}); errs.CodeOf(err) != errs.NotFound {
			t.Fatalf("send for group %q of %q: %v, want not found", bad.ForGroup, bad.Message.Topic, err)
		}
	}
	if _, err := h.e.SendBatch(ctx, []SendRequest{{Message: message.Message{Topic: "jobs", DedupID: "x"}, ForGroup: "bad name!"}}); errs.CodeOf(err) != errs.InvalidArgument {
		t.Fatalf("a malformed group name: %v", err)
	}
	later := message.When{Delay: 2 * time.Hour} // beyond the near window: only deliver's check passes it over
	for _, w := range []message.When{{}, later} {
		if _, err := h.e.SendBatch(ctx, []SendRequest{{Message: message.Message{Topic: "jobs", Body: []byte("for a")}, When: w, ForGroup: "a"}}); err != nil {
			t.Fatal(err)
		}
	}
	h.send("jobs", "all", message.When{})
	h.waitVisible("jobs", 2)
	h.restart()
	h.clk.Advance(3 * time.Hour)
	h.waitVisible("jobs", 3)
	if err := h.e.CreateGroup("jobs", "late", GroupConfig{}); err != nil {
		t.Fatal(err)
	}
	for g, want := range map[string]int{"a": 3, "b": 1, "late": 1} {
		if g == "a" {
			rs := h.receiveN("jobs", "a", 3, time.Minute)
			if info, err := h.e.Inspect(rs[0].ID); err != nil || info.ForGroup != rs[0].Message.ForGroup {
				t.Fatalf("inspect: %+v %v", info, err)
			}
			if err := h.e.Release("jobs", "a", receipts(rs)); err != 3 {
				t.Fatalf("released %d", err)
			}
		}
		got := h.drain("jobs", g)
		if len(got) != want || slices.ContainsFunc(got, func(r Received) bool { return g != "a" && r.Message.ForGroup != "" }) {
			t.Fatalf("group %s received %d, want %d", g, len(got), want)
		}
		if gi := groupInfo(h, "jobs", g); gi.Backlog != 0 || gi.Delivered != uint64(want) {
			t.Fatalf("group %s: %+v", g, gi)
		}
	}
}
