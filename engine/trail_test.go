package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// trailKinds lists the kinds of a trail, with group and attempt where
// they have one, for comparison.
func trailKindsOf(tr Trail) string {
	var b []string
	for _, ev := range tr.Events {
		s := ev.Kind
		if ev.Group != "" {
			s += fmt.Sprintf("(%s#%d)", ev.Group, ev.Attempt)
		}
		if ev.Reason != "" {
			s += ":" + ev.Reason
		}
		b = append(b, s)
	}
	return strings.Join(b, " ")
}

// waitTrail polls Trace until the trail of id lists want (the loop writes
// nacks and lease expiries a moment after they happen).
func (h *harness) waitTrail(id message.ID, want string) Trail {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tr, err := h.e.Trace(context.Background(), id)
		if err != nil {
			h.t.Fatalf("trace %s: %v", id, err)
		}
		got := trailKindsOf(tr)
		if got == want {
			return tr
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("trail of %s:\n got %s\nwant %s", id, got, want)
		}
		h.e.life.kickLoop()
		time.Sleep(time.Millisecond)
	}
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// TestTraceEveryEventWithItsTime walks one message through every event a
// trail records (and two more through cancel and ack), checks each event's
// time against the fake clock, and checks the same trails on a crash
// image of the disk (kill -9: no close, no checkpoint).
func TestTraceEveryEventWithItsTime(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	if err := h.e.CreateTopic("t", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.CreateGroup("t", "g", GroupConfig{MaxAttempts: 3, BackoffBase: time.Second}); err != nil {
		t.Fatal(err)
	}
	m1 := h.send("t", "one", message.When{Delay: 10 * time.Minute})
	m2 := h.send("t", "two", message.When{Delay: 10 * time.Minute})
	h.clk.Advance(time.Second)
	if _, err := h.e.Reschedule(ctx, m1.ID, message.When{Delay: 5 * time.Minute}, 0); err != nil {
		t.Fatal(err)
	}
	if err := h.e.Cancel(ctx, m2.ID); err != nil {
		t.Fatal(err)
	}
	due := t0.Add(time.Second + 5*time.Minute)
	h.clk.Advance(5 * time.Minute)
	h.settle("t", 1)
	r := h.receiveN("t", "g", 1, 30*time.Second)[0]
	if err := h.e.Nack(ctx, "t", "g", r.Receipt, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	h.waitTrail(m1.ID, "sent rescheduled fell_due visible delivered(g#1) nacked(g#1)")
	h.clk.Advance(2 * time.Second) // the nack's delay
	h.receiveN("t", "g", 1, 30*time.Second)
	h.clk.Advance(30 * time.Second) // the lease runs out
	h.waitTrail(m1.ID, "sent rescheduled fell_due visible delivered(g#1) nacked(g#1) delivered(g#2) lease_expired(g#2)")
	h.clk.Advance(2 * time.Second) // the backoff after attempt 2
	r = h.receiveN("t", "g", 1, 30*time.Second)[0]
	if err := h.e.Nack(ctx, "t", "g", r.Receipt, 0); err != nil {
		t.Fatal(err)
	}
	before := "sent rescheduled fell_due visible delivered(g#1) nacked(g#1) delivered(g#2) lease_expired(g#2) delivered(g#3) nacked(g#3) dead_lettered(g#3):max-attempts fell_due visible"
	tr := h.waitTrail(m1.ID, before)
	dl := tr.Events[10].DeadLetter
	if dl == nil {
		t.Fatalf("dead_lettered names no copy: %+v", tr.Events[10])
	}
	if _, err := h.e.Inspect(*dl); err != nil {
		t.Fatalf("the copy's ID %s does not resolve: %v", dl, err)
	}
	// The redrive moves the copy back; the trail follows the copy.
	h.waitVisible(DeadLetterTopic("t", "g"), 1)
	if n, err := h.e.Redrive(ctx, "t", "g", 10); err != nil || n != 1 {
		t.Fatalf("redrive: %d, %v", n, err)
	}
	full := before + " redriven(g#0)"
	tr = h.waitTrail(m1.ID, full)

	m3 := h.send("t", "three", message.When{})
	h.settle("t", 3)
	r3 := h.receiveN("t", "g", 2, time.Minute) // the redriven copy and m3
	for _, r := range r3 {
		if err := h.e.Ack(ctx, "t", "g", r.Receipt); err != nil {
			t.Fatal(err)
		}
	}
	h.waitTrail(m3.ID, "sent fell_due visible delivered(g#1) acked(g#1)")
	h.waitTrail(m2.ID, "sent cancelled")
	checkTimes(t, tr, due)

	// kill -9: what was synced, no checkpoint.
	c := h.crashOpen()
	c.waitTrail(m1.ID, full)
	c.waitTrail(m2.ID, "sent cancelled")
	tr3 := c.waitTrail(m3.ID, "sent fell_due visible delivered(g#1) acked(g#1)")
	if tr3.Events[4].At != h.e.Now() || tr3.Events[4].At < tr3.Events[3].At {
		t.Fatalf("ack time %d, delivered %d, clock %d", tr3.Events[4].At, tr3.Events[3].At, h.e.Now())
	}
}

// checkTimes checks the times of m1's trail in
// TestTraceEveryEventWithItsTime against the fake clock's steps.
func checkTimes(t *testing.T, tr Trail, due time.Time) {
	t.Helper()
	at := func(i int) int64 { return tr.Events[i].At }
	want := []struct {
		i    int
		at   int64
		what string
	}{
		{0, ms(t0), "sent"},
		{1, ms(t0.Add(time.Second)), "rescheduled"},
		{2, ms(due), "fell due"},
		{3, ms(due), "visible"},
		{4, ms(due), "delivered #1"},
		{5, ms(due), "nacked"},
		{6, ms(due.Add(2 * time.Second)), "delivered #2"},
		{7, ms(due.Add(32 * time.Second)), "lease expired"},
		{8, ms(due.Add(34 * time.Second)), "delivered #3"},
		{9, ms(due.Add(34 * time.Second)), "nacked #3"},
		{10, ms(due.Add(34 * time.Second)), "dead-lettered"},
	}
	for _, w := range want {
		if at(w.i) != w.at {
			t.Errorf("%s at %d, want %d (%s)", w.what, at(w.i), w.at, time.UnixMilli(w.at).UTC())
		}
	}
	if d := tr.Events[1].Due; d != ms(due) {
		t.Errorf("rescheduled to %d, want %d", d, ms(due))
	}
	if u := tr.Events[4].Until; u != ms(due.Add(30*time.Second)) {
		t.Errorf("lease of delivery #1 ends %d, want %d", u, ms(due.Add(30*time.Second)))
	}
	if u := tr.Events[5].Until; u != ms(due.Add(2*time.Second)) {
		t.Errorf("nacked message back at %d, want %d", u, ms(due.Add(2*time.Second)))
	}
	if u := tr.Events[9].Until; u != 0 {
		t.Errorf("last nack says back at %d, want 0 (dead-lettered)", u)
	}
	cp := *tr.Events[10].DeadLetter
	for _, ev := range tr.Events[11:] {
		if ev.Message != cp {
			t.Errorf("event %s is of %s, want the copy %s", ev.Kind, ev.Message, cp)
		}
	}
	if ev := tr.Events[len(tr.Events)-1]; ev.Group != "g" {
		t.Errorf("redriven to %q, want g", ev.Group)
	}
}

// TestTraceForgedIDs: a made-up, forged or stale ID gets NotFound, whatever
// lies at its position, and the answer is the same as for a position past
// the head, so it tells nothing of what exists.
func TestTraceForgedIDs(t *testing.T) {
	h := newHarness(t, nil)
	r := h.send("t", "k", message.When{})
	forged := []message.ID{
		{Pos: r.ID.Pos, Tag: r.ID.Tag ^ 1},
		{Pos: r.ID.Pos + 1, Tag: r.ID.Tag},
		{Pos: 0, Tag: 0},
		{Pos: 1 << 40, Tag: r.ID.Tag},
	}
	for _, id := range forged {
		_, err := h.e.Trace(context.Background(), id)
		if errs.CodeOf(err) != errs.NotFound {
			t.Fatalf("trace of forged %s: %v, want NotFound", id, err)
		}
		if !strings.Contains(err.Error(), id.String()) || strings.Contains(err.Error(), r.ID.String()) {
			t.Fatalf("error %q should name the asked ID only", err)
		}
	}
}

// TestTraceOfALogWrittenBeforeTrails: the format-2 fixture was written
// before trail records existed. It opens, and each trace shows what its
// records say and nothing more: a cancelled, rescheduled or acked message
// of that log has no cancel, reschedule, delivery or ack event (their
// records carried no time), never one made up from its state.
func TestTraceOfALogWrittenBeforeTrails(t *testing.T) {
	man := readFixtureManifest(t)
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(fixtureDir, "data"))); err != nil {
		t.Fatal(err)
	}
	e, err := Open(fixtureOptions(dir, clock.NewFake(time.UnixMilli(man.Now))))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	settleFixture(t, e)
	want := map[string]string{
		"order-4":    "sent",                  // cancelled then
		"order-5":    "sent",                  // rescheduled then
		"seen-acked": "sent fell_due visible", // received and acked then
		"unseen":     "sent fell_due visible",
	}
	for _, m := range man.Messages {
		w, ok := want[m.Key]
		if !ok {
			continue
		}
		delete(want, m.Key)
		id, err := message.ParseID(m.ID)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := e.Trace(context.Background(), id)
		if err != nil {
			t.Fatalf("trace %s: %v", m.Key, err)
		}
		if got := trailKindsOf(tr); got != w {
			t.Errorf("%s (%s): trail %q, want %q", m.Key, m.Role, got, w)
		}
	}
	if len(want) != 0 {
		t.Fatalf("the fixture lacks %v", want)
	}
}
