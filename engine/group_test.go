package engine

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// receiveN polls Receive until n messages arrived in total or a real-time
// deadline passes.
func (h *harness) receiveN(topic, grp string, n int, invisible time.Duration) []Received {
	h.t.Helper()
	var out []Received
	deadline := time.Now().Add(5 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		rs, err := h.e.Receive(context.Background(), ReceiveRequest{Topic: topic, Group: grp, Max: n - len(out), Invisible: invisible})
		if err != nil {
			h.t.Fatalf("receive: %v", err)
		}
		out = append(out, rs...)
		if len(rs) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if len(out) != n {
		h.t.Fatalf("received %d, want %d", len(out), n)
	}
	return out
}

func (h *harness) receiveNone(topic, grp string) {
	h.t.Helper()
	// Whatever is due by the engine's time has been dispatched once it has
	// settled: a message that should not be received would be by then.
	if !waitSettled(h.e, h.e.Now(), 5*time.Second) {
		h.t.Fatalf("engine did not settle: %s", engineState(h.e))
	}
	rs, err := h.e.Receive(context.Background(), ReceiveRequest{Topic: topic, Group: grp, Max: 100})
	if err != nil || len(rs) != 0 {
		h.t.Fatalf("expected nothing, got %d messages, err %v", len(rs), err)
	}
}

func TestGroupReceiveAckAndIndependentGroups(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		h.send("t", "", message.When{})
	}
	a := h.receiveN("t", "a", 10, time.Minute)
	seen := map[message.ID]bool{}
	var receipts []string
	for _, r := range a {
		if seen[r.ID] || r.Attempt != 1 {
			t.Fatalf("duplicate or wrong attempt: %+v", r)
		}
		seen[r.ID] = true
		receipts = append(receipts, r.Receipt)
	}
	h.receiveNone("t", "a")
	// Another group gets every message too.
	h.receiveN("t", "b", 10, time.Minute)
	if err := h.e.Ack(ctx, "t", "a", receipts...); err != nil {
		t.Fatal(err)
	}
	if err := h.e.Ack(ctx, "t", "a", receipts[0]); !IsNotFound(err) {
		t.Fatalf("second ack of a receipt: %v", err)
	}
	if err := h.e.Ack(ctx, "t", "a", "not-a-receipt"); errs.CodeOf(err) != errs.InvalidArgument {
		t.Fatalf("malformed receipt: %v", err)
	}
	gs, err := h.e.Groups("t")
	if err != nil || len(gs) != 2 || gs[0].Acked != 10 || gs[0].Backlog != 0 || gs[1].InFlight != 10 {
		t.Fatalf("groups: %+v %v", gs, err)
	}
}

func TestLeaseExpiryRedeliversWithBackoffThenDeadLetters(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	if err := h.e.CreateTopic("jobs", TopicConfig{Queues: 1}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.CreateGroup("jobs", "w", GroupConfig{MaxAttempts: 3, BackoffBase: time.Second, BackoffMax: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	r := h.send("jobs", "k", message.When{})
	got := h.receiveN("jobs", "w", 1, 10*time.Second)
	if got[0].ID != r.ID || got[0].Attempt != 1 {
		t.Fatalf("first delivery %+v", got[0])
	}
	// Lease ends at +10s, backoff 1s: not before +11s.
	h.clk.Advance(10*time.Second + 500*time.Millisecond)
	h.receiveNone("jobs", "w")
	h.clk.Advance(600 * time.Millisecond)
	got = h.receiveN("jobs", "w", 1, 10*time.Second)
	if got[0].Attempt != 2 {
		t.Fatalf("second delivery attempt %d", got[0].Attempt)
	}
	// A nack with a delay brings it back after that delay.
	if err := h.e.Nack(ctx, "jobs", "w", got[0].Receipt, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(4 * time.Second)
	h.receiveNone("jobs", "w")
	h.clk.Advance(2 * time.Second)
	got = h.receiveN("jobs", "w", 1, 10*time.Second)
	if got[0].Attempt != 3 {
		t.Fatalf("third delivery attempt %d", got[0].Attempt)
	}
	// Third failure: dead-lettered.
	if err := h.e.Nack(ctx, "jobs", "w", got[0].Receipt, 0); err != nil {
		t.Fatal(err)
	}
	dlq := DeadLetterTopic("jobs", "w")
	deadline := time.Now().Add(5 * time.Second)
	for {
		gs, _ := h.e.Groups("jobs")
		if gs[0].DeadLettered == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not dead-lettered: %+v", gs[0])
		}
		time.Sleep(time.Millisecond)
	}
	dl := h.receiveN(dlq, "ops", 1, time.Minute)
	if dl[0].Message.Properties["hourglass-origin-id"] != r.ID.String() || string(dl[0].Message.Body) != "body-k" {
		t.Fatalf("dead letter %+v", dl[0].Message)
	}
	h.clk.Advance(time.Hour)
	h.receiveNone("jobs", "w")
	gs, _ := h.e.Groups("jobs")
	if gs[0].DeadLettered != 1 || gs[0].Redelivered != 2 {
		t.Fatalf("group counters %+v", gs[0])
	}
	// Redrive sends it back to the topic as a new message.
	n, err := h.e.Redrive(ctx, "jobs", "w", 10)
	if err != nil || n != 1 {
		t.Fatalf("redrive: %d %v", n, err)
	}
	again := h.receiveN("jobs", "w", 1, time.Minute)
	if string(again[0].Message.Body) != "body-k" || again[0].Attempt != 1 {
		t.Fatalf("redriven %+v", again[0])
	}
}

func TestChangeInvisibilityExtendsLease(t *testing.T) {
	h := newHarness(t, nil)
	h.send("t", "", message.When{})
	got := h.receiveN("t", "g", 1, 5*time.Second)
	if err := h.e.ChangeInvisibility(context.Background(), "t", "g", got[0].Receipt, time.Minute); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(30 * time.Second)
	h.receiveNone("t", "g")
	if err := h.e.Ack(context.Background(), "t", "g", got[0].Receipt); err != nil {
		t.Fatalf("ack after extension: %v", err)
	}
}

func TestFIFOGroupOrder(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	if err := h.e.CreateTopic("f", TopicConfig{Queues: 2, FIFO: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.e.Send(ctx, message.Message{Topic: "f"}, message.When{}); errs.CodeOf(err) != errs.InvalidArgument {
		t.Fatalf("FIFO send without group: %v", err)
	}
	var want []message.ID
	for i := 0; i < 5; i++ {
		r, err := h.e.Send(ctx, message.Message{Topic: "f", Group: "order-1", Body: []byte{byte(i)}}, message.When{})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, r.ID)
	}
	h.waitVisible("f", 5)
	for i := 0; i < 5; i++ {
		got := h.receiveN("f", "g", 1, time.Minute)
		if got[0].ID != want[i] {
			t.Fatalf("FIFO position %d: got %v want %v", i, got[0].ID, want[i])
		}
		h.receiveNone("f", "g") // the next waits for the ack
		if err := h.e.Ack(ctx, "f", "g", got[0].Receipt); err != nil {
			t.Fatal(err)
		}
	}
}

func TestGroupProgressSurvivesRestart(t *testing.T) {
	h := newHarness(t, nil)
	for i := 0; i < 6; i++ {
		h.send("t", "", message.When{})
	}
	got := h.receiveN("t", "g", 6, time.Minute)
	var acked []string
	ackedIDs := map[message.ID]bool{}
	for _, r := range got[:4] {
		acked = append(acked, r.Receipt)
		ackedIDs[r.ID] = true
	}
	if err := h.e.Ack(context.Background(), "t", "g", acked...); err != nil {
		t.Fatal(err)
	}
	h.restart()
	again := h.receiveN("t", "g", 2, time.Minute)
	for _, r := range again {
		if ackedIDs[r.ID] {
			t.Fatalf("acked message %v redelivered after restart", r.ID)
		}
		if r.Attempt != 2 {
			t.Fatalf("attempt after restart = %d, want 2", r.Attempt)
		}
	}
	h.receiveNone("t", "g")
}

func TestDeadLetterWithoutAutoCreate(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.NoAutoCreate = true })
	ctx := context.Background()
	if err := h.e.CreateTopic("jobs", TopicConfig{Queues: 1}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.CreateGroup("jobs", "w", GroupConfig{MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	h.send("jobs", "k", message.When{})
	got := h.receiveN("jobs", "w", 1, time.Minute)
	if err := h.e.Nack(ctx, "jobs", "w", got[0].Receipt, 0); err != nil {
		t.Fatal(err)
	}
	dl := h.receiveDLQ(DeadLetterTopic("jobs", "w"))
	if string(dl.Message.Body) != "body-k" {
		t.Fatalf("dead letter %+v", dl.Message)
	}
}

// receiveDLQ waits for the dead-letter topic to exist and returns its first message.
func (h *harness) receiveDLQ(topic string) Received {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		rs, err := h.e.Receive(context.Background(), ReceiveRequest{Topic: topic, Group: "ops", Max: 1})
		if err == nil && len(rs) == 1 {
			return rs[0]
		}
		time.Sleep(time.Millisecond)
	}
	h.t.Fatalf("nothing arrived in %s", topic)
	return Received{}
}

func TestFIFOLongPollWakesOnAck(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	if err := h.e.CreateTopic("f", TopicConfig{Queues: 1, FIFO: true}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := h.e.Send(ctx, message.Message{Topic: "f", Group: "g1"}, message.When{}); err != nil {
			t.Fatal(err)
		}
	}
	h.waitVisible("f", 2)
	first := h.receiveN("f", "c", 1, time.Minute)
	got := make(chan []Received, 1)
	parked := h.clk.Waiters()
	go func() {
		rs, _ := h.e.Receive(ctx, ReceiveRequest{Topic: "f", Group: "c", Max: 1, Wait: 10 * time.Second})
		got <- rs
	}()
	// The long poll parks on the injected clock: wait for its timer.
	for h.clk.Waiters() <= parked {
		runtime.Gosched()
	}
	start := time.Now()
	if err := h.e.Ack(ctx, "f", "c", first[0].Receipt); err != nil {
		t.Fatal(err)
	}
	rs := <-got
	if len(rs) != 1 || time.Since(start) > 5*time.Second {
		t.Fatalf("long poll after ack: %d messages after %v", len(rs), time.Since(start))
	}
}

// TestUnackedSpanBoundsGroupState: behind a stuck message a group queue
// hands out at most MaxUnackedSpan messages, so its state (done offsets,
// attempts) stays bounded in memory and in every checkpoint.
func TestUnackedSpanBoundsGroupState(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxUnackedSpan = 10 })
	if err := h.e.CreateTopic("s", TopicConfig{Queues: 1}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		h.send("s", "", message.When{})
	}
	h.waitVisible("s", 30)
	rs := h.receiveN("s", "g", 10, time.Hour)
	var rest []string
	for _, r := range rs[1:] {
		rest = append(rest, r.Receipt)
	}
	if err := h.e.Ack(t.Context(), "s", "g", rest...); err != nil {
		t.Fatal(err)
	}
	h.receiveNone("s", "g") // the first is stuck: nothing past the span
	h.e.mu.Lock()
	gq := h.e.cons.group("s", "g").queues[0]
	done, chunks := gq.nDone, len(gq.slots.chunks)
	h.e.mu.Unlock()
	if done > 10 || chunks > 2 {
		t.Fatalf("%d done offsets behind the stuck one in %d chunks, the span is 10", done, chunks)
	}
	if err := h.e.Ack(t.Context(), "s", "g", rs[0].Receipt); err != nil {
		t.Fatal(err)
	}
	h.receiveN("s", "g", 10, time.Hour)
}

// TestGroupLookupTakesNoLock: a receive's lookup of an existing group
// does not queue for the engine's lock (consumers.groups), also for a
// group recovered from the log at open; a group not known yet still goes
// the locked way, and an existing group is still refused to CreateGroup.
func TestGroupLookupTakesNoLock(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.e.CreateTopic("jobs", TopicConfig{Queues: 1}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.CreateGroup("jobs", "w", GroupConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.CreateGroup("jobs", "w", GroupConfig{}); errs.CodeOf(err) != errs.AlreadyExists {
		t.Fatalf("CreateGroup of an existing group: %v, want AlreadyExists", err)
	}
	for _, phase := range []string{"created", "recovered"} {
		var g *group
		runHoldingLock(t, h.e, phase+": the lookup of an existing group", func() {
			var err error
			if g, err = h.e.cons.createGroup("jobs", "w", GroupConfig{}, true, false); err != nil {
				t.Error(err)
			}
		})
		if g == nil || g.name != "w" || g.topic.name != "jobs" {
			t.Errorf("%s: lookup found %+v", phase, g)
		}
		h.restart()
	}
	if h.e.cons.group("jobs", "other") != nil {
		t.Fatal("a group never created is known")
	}
	// The lookup skips the engine's state checks; the receive's next step
	// makes them: a closed engine refuses, with or without acks.
	h.send("jobs", "k", message.When{})
	e := h.e
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	h.e = nil
	if err := e.CreateGroup("jobs", "w", GroupConfig{}); errs.CodeOf(err) != errs.Unavailable {
		t.Errorf("CreateGroup of an existing group on a closed engine: %v, want Unavailable", err)
	}
	for _, ack := range [][]string{nil, {"AAEAAAAAAAAAKgAAAAEAAAAAAAAAAA"}} {
		got, err := e.Receive(context.Background(), ReceiveRequest{Topic: "jobs", Group: "w", Max: 1, Ack: ack})
		if errs.CodeOf(err) != errs.Unavailable || len(got) != 0 {
			t.Errorf("receive (acks %v) on a closed engine: %d messages, %v; want Unavailable", ack, len(got), err)
		}
	}
}

// TestConcurrentReceivesCreateOneGroup: receives that create their group
// on first use, racing each other and a CreateGroup, make one group, and
// the one message sent before goes to exactly one of them.
func TestConcurrentReceivesCreateOneGroup(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.e.CreateTopic("jobs", TopicConfig{Queues: 1}); err != nil {
		t.Fatal(err)
	}
	h.send("jobs", "k", message.When{})
	// Dispatched before the race starts: the receives do not wait.
	if !waitSettled(h.e, h.e.Now(), 5*time.Second) {
		t.Fatalf("engine did not settle: %s", engineState(h.e))
	}
	const receivers = 16
	got := make(chan int, receivers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ms, err := h.e.Receive(context.Background(), ReceiveRequest{Topic: "jobs", Group: "w", Max: 10})
			if err != nil {
				t.Error(err)
			}
			got <- len(ms)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-start
		if err := h.e.CreateGroup("jobs", "w", GroupConfig{}); err != nil && errs.CodeOf(err) != errs.AlreadyExists {
			t.Error(err)
		}
	}()
	close(start)
	wg.Wait()
	close(got)
	total := 0
	for n := range got {
		total += n
	}
	if total != 1 {
		t.Errorf("the message was delivered %d times across the racing receives, want once", total)
	}
	gs, err := h.e.Groups("jobs")
	if err != nil || len(gs) != 1 {
		t.Fatalf("groups after the race: %+v (%v), want one", gs, err)
	}
}
