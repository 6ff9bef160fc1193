package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// Two (topic, group) pairs that spell one dead-letter topic: the second
// group is refused, so a redrive can never move one topic's dead letters
// into another topic. The review reproduced a dead letter of topic "a"
// (group "b.c") redriven into topic "a.b" (group "c").
func TestDeadLetterNamesDoNotCollide(t *testing.T) {
	h := newHarness(t, nil)
	for _, name := range []string{"a", "a.b"} {
		if err := h.e.CreateTopic(name, TopicConfig{Queues: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.e.CreateGroup("a.b", "c", GroupConfig{}); err != nil {
		t.Fatal(err)
	}
	err := h.e.CreateGroup("a", "b.c", GroupConfig{})
	if errs.CodeOf(err) != errs.FailedPrecondition || !strings.Contains(err.Error(), "dead-letter topic") {
		t.Fatalf("CreateGroup of a colliding dead-letter name: %v, want failed_precondition", err)
	}
	// A receive auto-creates its group: refused the same way.
	_, err = h.e.Receive(context.Background(), ReceiveRequest{Topic: "a", Group: "b.c", Max: 1})
	if errs.CodeOf(err) != errs.FailedPrecondition {
		t.Fatalf("Receive creating a colliding group: %v, want failed_precondition", err)
	}
	h.restart()
	if err := h.e.CreateGroup("a", "b.c", GroupConfig{}); errs.CodeOf(err) != errs.FailedPrecondition {
		t.Fatalf("after a restart: %v, want failed_precondition", err)
	}
	if err := h.e.CreateGroup("a", "b-c", GroupConfig{}); err != nil {
		t.Fatalf("a group with a name of its own: %v", err)
	}
}

// The dead-letter namespace is the broker's: a client can neither send to
// a dead-letter topic (whose origin properties a redrive trusts) nor
// create one; it can still receive from one.
func TestDeadLetterNamespaceIsReserved(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	dlq := DeadLetterTopic("jobs", "w")
	_, err := h.e.Send(ctx, message.Message{Topic: dlq, Body: []byte("forged"), Properties: map[string]string{"hourglass-origin-topic": "jobs"}}, message.When{})
	if errs.CodeOf(err) != errs.InvalidArgument || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("send to a dead-letter topic that does not exist: %v, want invalid_argument", err)
	}
	if err := h.e.CreateTopic("%DLQ%mine", TopicConfig{}); errs.CodeOf(err) != errs.InvalidArgument {
		t.Fatalf("CreateTopic in the reserved namespace: %v, want invalid_argument", err)
	}
	dl := h.deadLetterOne("jobs", "w") // the broker created it; a client receives from it
	_, err = h.e.Send(ctx, message.Message{Topic: dlq, Body: []byte("forged")}, message.When{})
	if errs.CodeOf(err) != errs.InvalidArgument {
		t.Fatalf("send to an existing dead-letter topic: %v, want invalid_argument", err)
	}
	// The redrive sends with the engine's own hand.
	if err := h.e.Ack(ctx, dlq, "ops", dl.Receipt); err != nil {
		t.Fatal(err)
	}
	if n, err := h.e.Redrive(ctx, "jobs", "w", 10); err != nil || n != 1 {
		t.Fatalf("redrive: %d %v", n, err)
	}
}

// A refused request creates nothing: not the topic it names, nor the
// topics of the requests before it in its batch. The review found refused
// sends that used up MaxTopics.
func TestRefusedSendCreatesNoTopic(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxTopics = 2 })
	ctx := context.Background()
	_, err := h.e.Send(ctx, message.Message{Topic: "ghost1", DedupID: strings.Repeat("d", 257)}, message.When{})
	if errs.CodeOf(err) != errs.InvalidArgument {
		t.Fatalf("send with a dedup ID too long: %v", err)
	}
	_, err = h.e.SendBatch(ctx, []SendRequest{
		{Message: message.Message{Topic: "ghost2"}, When: message.When{Delay: time.Hour}},
		{Message: message.Message{Topic: "ghost3"}, When: message.When{Delay: time.Hour, Deadline: t0.Add(time.Minute).UnixMilli()}},
	})
	if errs.CodeOf(err) != errs.InvalidArgument || !strings.Contains(err.Error(), "message 1") {
		t.Fatalf("batch whose second message has a deadline before its due time: %v", err)
	}
	h.restart()
	for _, ti := range h.e.Topics() {
		t.Errorf("a refused send left topic %q", ti.Name)
	}
	for _, name := range []string{"real1", "real2"} {
		if _, err := h.e.Send(ctx, message.Message{Topic: name}, message.When{}); err != nil {
			t.Fatalf("a valid send to a new topic within the limit: %v", err)
		}
	}
	if _, err := h.e.Send(ctx, message.Message{Topic: "real3"}, message.When{}); errs.CodeOf(err) != errs.ResourceExhausted {
		t.Fatalf("a third topic past MaxTopics 2: %v, want resource_exhausted", err)
	}
}

// MaxGroups bounds the groups (their number sets every checkpoint's
// capture), for CreateGroup and for a receive's auto-create alike, across
// a restart.
func TestMaxGroups(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxGroups = 2 })
	ctx := context.Background()
	if err := h.e.CreateTopic("t", TopicConfig{Queues: 1}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.CreateGroup("t", "g1", GroupConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.e.Receive(ctx, ReceiveRequest{Topic: "t", Group: "g2", Max: 1}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.CreateGroup("t", "g3", GroupConfig{}); errs.CodeOf(err) != errs.ResourceExhausted || !strings.Contains(err.Error(), "limit is 2") {
		t.Fatalf("a third group: %v, want resource_exhausted", err)
	}
	h.restart()
	if _, err := h.e.Receive(ctx, ReceiveRequest{Topic: "t", Group: "g3", Max: 1}); errs.CodeOf(err) != errs.ResourceExhausted {
		t.Fatalf("a third group by receive after a restart: %v, want resource_exhausted", err)
	}
	if _, err := h.e.Receive(ctx, ReceiveRequest{Topic: "t", Group: "g1", Max: 1}); err != nil {
		t.Fatalf("an existing group at the limit: %v", err)
	}
}

// At MaxTopics a group's dead letters still have somewhere to go:
// dead-letter topics do not count against the limit (MaxGroups bounds
// them). The review found them retried forever.
func TestDeadLettersAtMaxTopics(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxTopics = 1 })
	h.deadLetterOne("jobs", "w")
	if err := h.e.CreateTopic("more", TopicConfig{}); errs.CodeOf(err) != errs.ResourceExhausted {
		t.Fatalf("a second topic past MaxTopics 1: %v, want resource_exhausted", err)
	}
}

// A stopped engine answers no send, not even a duplicate with the first
// send's receipt (fail-stop: every call returns unavailable).
func TestDuplicateSendOnFailedEngine(t *testing.T) {
	mem := vfs.NewMem()
	ff := vfs.NewFaulty(mem)
	h := newHarness(t, func(o *Options) { o.FS = ff })
	ctx := context.Background()
	m := message.Message{Topic: "t", Body: []byte("x"), DedupID: "order-1"}
	if _, err := h.e.Send(ctx, m, message.When{Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if r, err := h.e.Send(ctx, m, message.When{Delay: time.Hour}); err != nil || !r.Duplicate {
		t.Fatalf("duplicate on a running engine: %+v %v", r, err)
	}
	eioOnSync(ff, "log", 1)
	if _, err := h.e.Send(ctx, message.Message{Topic: "t", Body: []byte("y")}, message.When{Delay: time.Hour}); errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("send whose fsync failed: %v, want unavailable", err)
	}
	<-h.e.Failed()
	if r, err := h.e.Send(ctx, m, message.When{Delay: time.Hour}); errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("duplicate on a failed engine: %+v %v, want unavailable", r, err)
	}
}

// Group creation names the part of its input that is wrong.
func TestGroupNameErrors(t *testing.T) {
	h := newHarness(t, nil)
	cases := []struct{ topic, group, want string }{
		{"jobs", "g/x", "group"},
		{"a/b", "g", "topic"},
		{"", "g", "topic"},
		{"jobs", "", "group"},
	}
	for _, c := range cases {
		err := h.e.CreateGroup(c.topic, c.group, GroupConfig{})
		if errs.CodeOf(err) != errs.InvalidArgument || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("CreateGroup(%q, %q): %v, want invalid_argument about the %s", c.topic, c.group, err, c.want)
		}
	}
}

// deadLetterOne creates topic and group (one attempt), sends one message
// keyed "k", nacks it into the dead-letter topic, and returns it as a
// client receives it there (group "ops").
func (h *harness) deadLetterOne(topic, group string) Received {
	h.t.Helper()
	h.topicWithGroup(topic, group, GroupConfig{MaxAttempts: 1})
	h.send(topic, "k", message.When{})
	got := h.receiveN(topic, group, 1, time.Minute)
	if err := h.e.Nack(context.Background(), topic, group, got[0].Receipt, 0); err != nil {
		h.t.Fatal(err)
	}
	dl := h.receiveDLQ(DeadLetterTopic(topic, group))
	if string(dl.Message.Body) != "body-k" {
		h.t.Fatalf("dead letter %+v", dl.Message)
	}
	return dl
}

// A redrive reads the dead-letter topic through the engine's own group,
// which neither MaxGroups nor a client's colliding group name can refuse:
// dead letters are never stranded (a review found both).
func TestRedriveNeverRefusedByGroupRules(t *testing.T) {
	t.Run("at MaxGroups", func(t *testing.T) {
		h := newHarness(t, func(o *Options) { o.MaxGroups = 2 })
		h.deadLetterOne("jobs", "w") // groups jobs/w and the dead-letter topic's "ops": the limit
		if n, err := h.e.Redrive(context.Background(), "jobs", "w", 10); err != nil || n != 1 {
			t.Fatalf("redrive at MaxGroups: %d %v", n, err)
		}
	})
	t.Run("a client's group takes the redrive group's dead-letter name", func(t *testing.T) {
		h := newHarness(t, nil)
		ctx := context.Background()
		if err := h.e.CreateTopic("a", TopicConfig{Queues: 1}); err != nil {
			t.Fatal(err)
		}
		for _, g := range []string{"b", "b.c"} {
			if err := h.e.CreateGroup("a", g, GroupConfig{MaxAttempts: 1}); err != nil {
				t.Fatal(err)
			}
		}
		h.send("a", "k", message.When{})
		for _, g := range []string{"b", "b.c"} {
			got := h.receiveN("a", g, 1, time.Minute)
			if err := h.e.Nack(ctx, "a", g, got[0].Receipt, 0); err != nil {
				t.Fatal(err)
			}
			h.receiveDLQ(DeadLetterTopic("a", g))
		}
		// "c.redrive" on %DLQ%a.b dead-letters into %DLQ%%DLQ%a.b.c.redrive,
		// the name of the redrive group of a/b.c.
		if err := h.e.CreateGroup(DeadLetterTopic("a", "b"), "c.redrive", GroupConfig{}); err != nil {
			t.Fatal(err)
		}
		if n, err := h.e.Redrive(ctx, "a", "b.c", 10); err != nil || n != 1 {
			t.Fatalf("redrive with a colliding client group: %d %v", n, err)
		}
	})
}

// A batch naming more new topics than MaxTopics leaves room for creates
// none of them, and its error names the first request that does not fit.
func TestBatchOfNewTopicsPastMaxTopics(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxTopics = 2 })
	ctx := context.Background()
	if err := h.e.CreateTopic("old", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	_, err := h.e.SendBatch(ctx, []SendRequest{
		{Message: message.Message{Topic: "old"}},
		{Message: message.Message{Topic: "new1"}},
		{Message: message.Message{Topic: "new2"}},
	})
	if errs.CodeOf(err) != errs.ResourceExhausted || !strings.Contains(err.Error(), "message 2:") {
		t.Fatalf("a batch with 2 new topics and room for 1: %v, want resource_exhausted naming message 2", err)
	}
	if got := len(h.e.Topics()); got != 1 {
		t.Fatalf("%d topics after the refused batch, want 1", got)
	}
}

// A topic another sender creates between a batch's check and its creation
// of new topics is not counted twice against MaxTopics: a send to the
// topic that just took the last slot succeeds (a review found it refused).
func TestCreateMissingCountsATopicMadeMeanwhile(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxTopics = 2 })
	if err := h.e.CreateTopic("old", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	reqs := []SendRequest{{Message: message.Message{Topic: "x", Body: []byte("b")}}}
	s, top, err := h.e.checkRequest(&reqs[0], h.e.Now(), h.e.Now(), false, nil)
	if err != nil || top != nil {
		t.Fatalf("check: %v %v", top, err)
	}
	if err := h.e.CreateTopic("x", TopicConfig{}); err != nil { // the other sender
		t.Fatal(err)
	}
	stored, tops := []*message.Stored{s}, []*topic{nil}
	if err := h.e.cat.createMissing(reqs, stored, tops, []string{"x"}); err != nil {
		t.Fatalf("the batch's topic, made meanwhile at the last slot: %v", err)
	}
	if tops[0] == nil || tops[0].name != "x" {
		t.Fatalf("the batch's request got topic %+v", tops[0])
	}
}

// A redrive works for a group whose names leave no room for the redrive
// group's own dead-letter name (a review found such dead letters stranded).
func TestRedriveOfALongGroupName(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	topicName, group := strings.Repeat("t", 100), strings.Repeat("g", 94)
	if err := h.e.CreateTopic(topicName, TopicConfig{Queues: 1}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.CreateGroup(topicName, group, GroupConfig{MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	h.send(topicName, "k", message.When{})
	got := h.receiveN(topicName, group, 1, time.Minute)
	if err := h.e.Nack(ctx, topicName, group, got[0].Receipt, 0); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if gs, _ := h.e.Groups(topicName); len(gs) == 1 && gs[0].DeadLettered == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not dead-lettered")
		}
	}
	// The dead letter's copy is counted when it is moved and becomes
	// visible when it fires, a moment later: a redrive before that finds
	// nothing yet (it failed so under load), and one after must find it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		n, err := h.e.Redrive(context.Background(), topicName, group, 10)
		if err != nil || n > 1 {
			t.Fatalf("redrive of a long-named group: %d %v", n, err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("redrive of a long-named group found no dead letter in 10 s")
		}
	}
}

// A redrive is not refused by limits its dead letters respect: more dead
// letters than MaxBatch are moved a batch at a time, and a message at the

// dead letter's four and the redrive's source). Both were refused as too
// large, and the failed attempt kept the dead letters leased for a minute.
func TestRedriveWithinTheLimits(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxBatch = 3 })
	ctx := context.Background()
	h.topicWithGroup("jobs", "w", GroupConfig{MaxAttempts: 1})
	props := map[string]string{}
	for i := range h.e.opts.Limits.MaxProperties {
		props[fmt.Sprint("p", i)] = "v"
	}
	for i := range 5 {
		if _, err := h.e.Send(ctx, message.Message{Topic: "jobs", Properties: props, Body: []byte(fmt.Sprint(i))}, message.When{}); err != nil {
			t.Fatal(err)
		}
	}
	h.nackAllToDeadLetters("jobs", "w", 5)
	if n, err := h.e.Redrive(ctx, "jobs", "w", 10); err != nil || n != 3 {
		t.Fatalf("first redrive: %d, %v; want a batch of 3", n, err)
	}
	if n, err := h.e.Redrive(ctx, "jobs", "w", 10); err != nil || n != 2 {
		t.Fatalf("second redrive: %d, %v; want the other 2", n, err)
	}
	back := h.receiveN("jobs", "w", 5, time.Minute)
	if p := back[0].Message.Properties; len(p) != len(props)+4 || p["hourglass-redriven-from"] == "" || p["hourglass-origin-topic"] != "jobs" {
		t.Fatalf("a redriven message has %d properties: %v", len(p), p)
	}
}

// A dead letter that today's limits refuse (its body over a lowered
// -max-body-bytes) does not hold back the others: they move, it stays in
// the dead-letter topic, and a redrive of it alone says why. It used to
// fail every redrive batch that held it.
func TestRedriveMovesAroundARefusedDeadLetter(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Limits.MaxBodyBytes = 4 << 10 })
	ctx := context.Background()
	h.topicWithGroup("jobs", "w", GroupConfig{MaxAttempts: 1})
	for _, n := range []int{10, 3000, 10, 10} {
		if _, err := h.e.Send(ctx, message.Message{Topic: "jobs", Body: make([]byte, n)}, message.When{}); err != nil {
			t.Fatal(err)
		}
	}
	h.nackAllToDeadLetters("jobs", "w", 4)
	h.opt.Limits.MaxBodyBytes = 1 << 10
	h.restart()
	if n, err := h.e.Redrive(ctx, "jobs", "w", 10); err != nil || n != 3 {
		t.Fatalf("redrive: %d, %v; want the 3 the limits allow", n, err)
	}
	if n, err := h.e.Redrive(ctx, "jobs", "w", 10); n != 0 || errs.CodeOf(err) != errs.TooLarge {
		t.Fatalf("redrive of the refused one: %d, %v; want 0 and too large", n, err)
	}
	if gs := h.e.EngineGroups(); len(gs) != 1 || gs[0].Topic != DeadLetterTopic("jobs", "w") || gs[0].Backlog != 1 || gs[0].InFlight != 0 {
		t.Fatalf("the redrive's reader: %+v; want the refused one waiting, not leased", gs)
	}
}

// nackAllToDeadLetters receives the n messages of topic in group, whose
// MaxAttempts is 1, nacks them all, and waits until the n are visible in
// the dead-letter topic.
func (h *harness) nackAllToDeadLetters(topic, group string, n int) {
	h.t.Helper()
	h.waitVisible(topic, n)
	for _, r := range h.receiveN(topic, group, n, time.Minute) {
		if err := h.e.Nack(context.Background(), topic, group, r.Receipt, 0); err != nil {
			h.t.Fatal(err)
		}
	}
	h.waitVisible(DeadLetterTopic(topic, group), n)
}

// topicWithGroup creates a topic of one queue and a group of it.
func (h *harness) topicWithGroup(topic, group string, cfg GroupConfig) {
	h.t.Helper()
	if err := h.e.CreateTopic(topic, TopicConfig{Queues: 1}); err != nil {
		h.t.Fatal(err)
	}
	if err := h.e.CreateGroup(topic, group, cfg); err != nil {
		h.t.Fatal(err)
	}
}
