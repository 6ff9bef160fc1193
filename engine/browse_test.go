package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// listAll pages through a listing with req and returns every item, failing
// on a page over the limit or a listing that does not end.
func listAll(t *testing.T, e *Engine, kind ListKind, req ListRequest) []Listed {
	t.Helper()
	b := NewBrowser(e)
	var out []Listed
	for range 10_000 {
		page, err := listPage(b, kind, req)
		if err != nil {
			t.Fatalf("%s %+v: %v", kind, req, err)
		}
		if lim := max(req.Limit, 1); req.Limit != 0 && len(page.Items) > lim {
			t.Fatalf("page of %d items, limit %d", len(page.Items), req.Limit)
		}
		out = append(out, page.Items...)
		if page.Next == "" {
			return out
		}
		req.Cursor = page.Next
	}
	t.Fatal("the listing did not end")
	return nil
}

// listPage asks b for one page of the kind's listing.
func listPage(b *Browser, kind ListKind, req ListRequest) (ListPage, error) {
	switch kind {
	case ListInFlight:
		return b.InFlight(req)
	case ListDead:
		return b.Dead(req)
	}
	return b.Pending(req)
}

func keysOf(ls []Listed) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Key
	}
	return out
}

// TestBrowsePendingPagesInDueOrder: pending messages of two topics, some
// in the timer index's runs (a checkpoint) and some in its memtable, one
// cancelled and one moved, one unkeyed, page in fire order with every
// page size, each once; the filters (topic, key prefix, tag, due range)
// keep what they should; the unkeyed one is reachable by its ID.
func TestBrowsePendingPagesInDueOrder(t *testing.T) {
	h := newHarness(t, nil)
	ctx := t.Context()
	var ids []message.ID
	send := func(topic, key, tag string, delay time.Duration) message.ID {
		r, err := h.e.Send(ctx, message.Message{Topic: topic, Key: key, Tag: tag, Body: []byte("b")}, message.When{Delay: delay})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
		return r.ID
	}
	for i := range 30 {
		tag := "odd"
		if i%2 == 0 {
			tag = "even"
		}
		send("orders", fmt.Sprintf("order-%02d", i), tag, time.Duration(30-i)*time.Hour)
	}
	if err := h.e.checkpoint(); err != nil { // the first 30 go to a run
		t.Fatal(err)
	}
	for i := range 10 {
		send("mail", fmt.Sprintf("mail-%02d", i), "", time.Duration(i+1)*time.Minute)
	}
	unkeyed := send("mail", "", "", 90*time.Minute)
	if err := h.e.Cancel(ctx, ids[0]); err != nil { // order-00, due in 30 h
		t.Fatal(err)
	}
	if _, err := h.e.Reschedule(ctx, ids[1], message.When{Delay: 2 * time.Second}, 0); err != nil { // order-01 first
		t.Fatal(err)
	}
	all := listAll(t, h.e, ListPending, ListRequest{})
	if len(all) != 40 {
		t.Fatalf("%d pending listed, want 40 (41 sent, 1 cancelled): %v", len(all), keysOf(all))
	}
	if all[0].Key != "order-01" || all[0].State != StatePending {
		t.Fatalf("first listed %+v, want the moved order-01", all[0])
	}
	if !slices.IsSortedFunc(all, func(a, b Listed) int { return int(a.FireAt - b.FireAt) }) {
		t.Fatalf("not in fire order: %v", keysOf(all))
	}
	for _, limit := range []int{1, 3, 7, 500} {
		if got := listAll(t, h.e, ListPending, ListRequest{Limit: limit}); !slices.Equal(keysOf(got), keysOf(all)) {
			t.Fatalf("limit %d: %v, want %v", limit, keysOf(got), keysOf(all))
		}
	}
	found := false
	for _, l := range all {
		found = found || l.ID == unkeyed
	}
	if !found {
		t.Fatal("the unkeyed message is not listed")
	}
	if info, err := h.e.Inspect(unkeyed); err != nil || info.Key != "" {
		t.Fatalf("the unkeyed message by its ID: %+v %v", info, err)
	}
	mail := listAll(t, h.e, ListPending, ListRequest{Topic: "mail", Limit: 4})
	even := listAll(t, h.e, ListPending, ListRequest{Topic: "orders", Tag: "even"})
	prefix := listAll(t, h.e, ListPending, ListRequest{KeyPrefix: "order-1"})
	now := h.e.Now()
	window := listAll(t, h.e, ListPending, ListRequest{DueFrom: now + 3*time.Minute.Milliseconds(), DueTo: now + 6*time.Minute.Milliseconds()})
	if len(mail) != 11 || len(even) != 14 || len(prefix) != 10 || !slices.Equal(keysOf(window), []string{"mail-02", "mail-03", "mail-04"}) {
		t.Fatalf("filters: mail %d, even %d, prefix %d, window %v", len(mail), len(even), len(prefix), keysOf(window))
	}
	for _, l := range even {
		if l.Tag != "even" || l.Topic != "orders" || l.Key == "order-00" {
			t.Fatalf("tag filter let through %+v", l)
		}
	}
	// After a restart the same, from the index on disk.
	h.restart()
	if got := listAll(t, h.e, ListPending, ListRequest{Limit: 6}); !slices.Equal(keysOf(got), keysOf(all)) {
		t.Fatalf("after a restart: %v, want %v", keysOf(got), keysOf(all))
	}
}

// TestBrowseRefusesBadRequests: every malformed request gets a clear
// InvalidArgument (or NotFound for what does not exist) and no page.
func TestBrowseRefusesBadRequests(t *testing.T) {
	h := newHarness(t, nil)
	h.topicWithGroup("jobs", "workers", GroupConfig{})
	b := NewBrowser(h.e)
	pendingCursor := encodeCursor(ListPending, 1, 2)
	cases := []struct {
		name string
		kind ListKind
		req  ListRequest
		code errs.Code
		says string
	}{
		{"limit over the max", ListPending, ListRequest{Limit: MaxListLimit + 1}, errs.InvalidArgument, "limit 501 is not in [1, 500]"},
		{"negative limit", ListPending, ListRequest{Limit: -1}, errs.InvalidArgument, "limit"},
		{"malformed cursor", ListPending, ListRequest{Cursor: "!!"}, errs.InvalidArgument, "cursor"},
		{"short cursor", ListPending, ListRequest{Cursor: "AAAA"}, errs.InvalidArgument, "malformed"},
		{"another listing's cursor", ListDead, ListRequest{Topic: "jobs", Group: "workers", Cursor: pendingCursor}, errs.InvalidArgument, "belongs to the pending listing"},
		{"due range backwards", ListPending, ListRequest{DueFrom: 10, DueTo: 5}, errs.InvalidArgument, "due_to"},
		{"negative due", ListPending, ListRequest{DueFrom: -1}, errs.InvalidArgument, "negative"},
		{"bad topic", ListPending, ListRequest{Topic: "a b"}, errs.InvalidArgument, "character"},
		{"unknown topic", ListPending, ListRequest{Topic: "nope"}, errs.NotFound, "does not exist"},
		{"in flight without a group", ListInFlight, ListRequest{Topic: "jobs"}, errs.InvalidArgument, "needs a topic and a group"},
		{"unknown group", ListDead, ListRequest{Topic: "jobs", Group: "nope"}, errs.NotFound, "does not exist"},
		{"key prefix not UTF-8", ListPending, ListRequest{KeyPrefix: "\xff"}, errs.InvalidArgument, "UTF-8"},
	}
	for _, c := range cases {
		_, err := listPage(b, c.kind, c.req)
		if errs.CodeOf(err) != c.code || !strings.Contains(fmt.Sprint(err), c.says) {
			t.Errorf("%s: %v, want %s saying %q", c.name, err, c.code, c.says)
		}
	}
	// A cursor past the end, forged or stale, is an empty last page.
	for _, kind := range []ListKind{ListInFlight, ListDead} {
		req := ListRequest{Topic: "jobs", Group: "workers", Cursor: encodeCursor(kind, 1<<63, 1<<63)}
		page, err := listPage(b, kind, req)
		if err != nil || len(page.Items) != 0 || page.Next != "" {
			t.Errorf("%s past the end: %+v, %v", kind, page, err)
		}
	}
}

// TestBrowseInFlight lists a group's leases with their attempt and lease
// end, page by page, and not what was acked or never received.
func TestBrowseInFlight(t *testing.T) {
	h := newHarness(t, nil)
	ctx := t.Context()
	h.topicWithGroup("jobs", "workers", GroupConfig{})
	for i := range 12 {
		h.send("jobs", fmt.Sprintf("job-%02d", i), message.When{})
	}
	h.waitVisible("jobs", 12)
	got := h.receiveN("jobs", "workers", 12, time.Minute)
	start := h.e.Now()
	if err := h.e.Ack(ctx, "jobs", "workers", got[0].Receipt, got[1].Receipt); err != nil {
		t.Fatal(err)
	}
	// The third is nacked and received again: its second attempt.
	if err := h.e.Nack(ctx, "jobs", "workers", got[2].Receipt, time.Second); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(2 * time.Second)
	again := h.receiveN("jobs", "workers", 1, 2*time.Minute)
	if again[0].Attempt != 2 {
		t.Fatalf("redelivered attempt %d", again[0].Attempt)
	}
	list := listAll(t, h.e, ListInFlight, ListRequest{Topic: "jobs", Group: "workers", Limit: 2})
	if len(list) != 10 {
		t.Fatalf("%d in flight listed, want 10: %v", len(list), keysOf(list))
	}
	now := h.e.Now()
	for _, l := range list {
		wantAtt, wantEnd := 1, start+time.Minute.Milliseconds()
		if l.ID == again[0].ID {
			wantAtt, wantEnd = 2, now+2*time.Minute.Milliseconds()
		}
		if l.Attempt != wantAtt || l.LeaseEnd != wantEnd || l.Group != "workers" {
			t.Fatalf("listed %+v: want attempt %d, lease end %d", l, wantAtt, wantEnd)
		}
	}
	if tagged := listAll(t, h.e, ListInFlight, ListRequest{Topic: "jobs", Group: "workers", KeyPrefix: "job-0"}); len(tagged) != 8 {
		t.Fatalf("key prefix: %d", len(tagged))
	}
}

// deadIDs returns the IDs of a listing.
func deadIDs(ls []Listed) []message.ID {
	out := make([]message.ID, len(ls))
	for i, l := range ls {
		out[i] = l.ID
	}
	return out
}

// TestDeadLettersBrowseResendDeletePurge is issue 30's item 3: dead
// letters listed with reason and attempts; a selection resent reaches its
// group only; one deleted is gone; bad selections are refused and touch
// nothing; a purge empties the rest; and all of it holds after a crash.
func TestDeadLettersBrowseResendDeletePurge(t *testing.T) {
	h := newHarness(t, nil)
	ctx := t.Context()
	const n = 8
	threeGroups(h, n) // billing's n messages are dead letters
	dead := listAll(t, h.e, ListDead, ListRequest{Topic: "orders", Group: "billing", Limit: 3})
	if len(dead) != n {
		t.Fatalf("%d dead letters listed, want %d", len(dead), n)
	}
	for _, d := range dead {
		if d.Reason != ReasonMaxAttempts || d.Attempts != 1 || d.OriginTopic != "orders" || d.OriginID == "" || d.Group != "billing" {
			t.Fatalf("dead letter %+v", d)
		}
	}
	dl := NewDeadLetters(h.e)
	// Refused, and nothing changes: an unknown ID, a message that is no
	// dead letter, another group's dead letter, a selection twice over.
	forged := dead[0].ID
	forged.Tag ^= 1
	origin, _ := message.ParseID(dead[0].OriginID)
	bad := []struct {
		name string
		ids  []message.ID
		code errs.Code
	}{
		{"unknown", []message.ID{dead[1].ID, forged}, errs.NotFound},
		{"not a dead letter", []message.ID{origin}, errs.FailedPrecondition},
		{"twice", []message.ID{dead[1].ID, dead[1].ID}, errs.InvalidArgument},
		{"none", nil, errs.InvalidArgument},
	}
	for _, c := range bad {
		if _, err := dl.Resend(ctx, "orders", "billing", c.ids); errs.CodeOf(err) != c.code {
			t.Errorf("resend %s: %v, want %s", c.name, err, c.code)
		}
		if _, err := dl.Delete(ctx, "orders", "billing", c.ids); errs.CodeOf(err) != c.code {
			t.Errorf("delete %s: %v, want %s", c.name, err, c.code)
		}
	}
	// Another group's dead letter: audit has none of its own.
	if _, err := dl.Resend(ctx, "orders", "audit", deadIDs(dead[:1])); errs.CodeOf(err) != errs.FailedPrecondition || !strings.Contains(err.Error(), "another group") {
		t.Errorf("resend to the wrong group: %v", err)
	}
	if _, err := dl.Delete(ctx, "orders", "nope", deadIDs(dead[:1])); errs.CodeOf(err) != errs.NotFound {
		t.Errorf("delete in an unknown group: %v", err)
	}
	if got := listAll(t, h.e, ListDead, ListRequest{Topic: "orders", Group: "billing"}); len(got) != n {
		t.Fatalf("after refused actions %d dead letters, want %d", len(got), n)
	}
	// Resend two: billing gets them back, the other groups nothing.
	if moved, err := dl.Resend(ctx, "orders", "billing", deadIDs(dead[2:4])); err != nil || moved != 2 {
		t.Fatalf("resend: %d, %v", moved, err)
	}
	back := h.receiveN("orders", "billing", 2, time.Minute)
	for _, r := range back {
		if r.Message.ForGroup != "billing" || r.Message.Properties["hourglass-redriven-from"] == "" {
			t.Fatalf("resent message %+v", r.Message)
		}
	}
	h.receiveNone("orders", "audit")
	h.receiveNone("orders", "workers")
	// Resent already: gone from the list, and refused a second time.
	if _, err := dl.Resend(ctx, "orders", "billing", deadIDs(dead[2:3])); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("a second resend of one: %v", err)
	}
	if moved, err := dl.Delete(ctx, "orders", "billing", deadIDs(dead[5:6])); err != nil || moved != 1 {
		t.Fatalf("delete: %d, %v", moved, err)
	}
	left := []message.ID{dead[0].ID, dead[1].ID, dead[4].ID, dead[6].ID, dead[7].ID}
	if got := deadIDs(listAll(t, h.e, ListDead, ListRequest{Topic: "orders", Group: "billing", Limit: 2})); !slices.Equal(got, left) {
		t.Fatalf("left %v, want %v", got, left)
	}
	// A kill -9 now: what was done is durable.
	c := h.crashOpen()
	if got := deadIDs(listAll(t, c.e, ListDead, ListRequest{Topic: "orders", Group: "billing"})); !slices.Equal(got, left) {
		t.Fatalf("after a crash %v, want %v", got, left)
	}
	purged, err := NewDeadLetters(c.e).Purge(ctx, "orders", "billing")
	if err != nil || purged != len(left) {
		t.Fatalf("purge: %d, %v", purged, err)
	}
	if got := listAll(t, c.e, ListDead, ListRequest{Topic: "orders", Group: "billing"}); len(got) != 0 {
		t.Fatalf("after the purge %d left", len(got))
	}
	c2 := c.crashOpen()
	if got := listAll(t, c2.e, ListDead, ListRequest{Topic: "orders", Group: "billing"}); len(got) != 0 {
		t.Fatalf("after the purge and a crash %d left", len(got))
	}
	// A purge of nothing is no error.
	if purged, err := NewDeadLetters(c2.e).Purge(ctx, "orders", "audit"); err != nil || purged != 0 {
		t.Fatalf("purge of a group without dead letters: %d, %v", purged, err)
	}
}

// TestDeadLetterActionsOnAFullDiskAndBesideARedrive: on a full disk each
// action fails with resource_exhausted and leaves every dead letter where
// it was, leased to nobody; a dead letter a redrive holds is refused by
// name to a resend or a delete, and left by a purge, which takes the rest;
// once the redrive lets go, it can be resent.
func TestDeadLetterActionsOnAFullDiskAndBesideARedrive(t *testing.T) {
	mem := vfs.NewMem()
	ffs := vfs.NewFaulty(mem)
	h := newHarness(t, func(o *Options) { o.FS = ffs })
	ctx := t.Context()
	threeGroups(h, 4)
	dead := deadIDs(listAll(t, h.e, ListDead, ListRequest{Topic: "orders", Group: "billing"}))
	dl := NewDeadLetters(h.e)
	dlq := DeadLetterTopic("orders", "billing")
	// The redrive's reader exists (a redrive ran), so the writes that fail
	// are the actions' own: the copies and the acks.
	if _, err := h.e.cons.createGroup(dlq, redriveGroup, GroupConfig{}, true, true); err != nil {
		t.Fatal(err)
	}
	ffs.FailAfter(vfs.OpWrite, 0, syscall.ENOSPC)
	if n, err := dl.Resend(ctx, "orders", "billing", dead[:2]); n != 0 || errs.CodeOf(err) != errs.ResourceExhausted {
		t.Fatalf("resend on a full disk: %d, %v", n, err)
	}
	if n, err := dl.Delete(ctx, "orders", "billing", dead[2:3]); n != 0 || errs.CodeOf(err) != errs.ResourceExhausted {
		t.Fatalf("delete on a full disk: %d, %v", n, err)
	}
	if n, err := dl.Purge(ctx, "orders", "billing"); n != 0 || errs.CodeOf(err) != errs.ResourceExhausted {
		t.Fatalf("purge on a full disk: %d, %v", n, err)
	}
	ffs.Inject(nil)
	if gs := h.e.EngineGroups(); len(gs) != 1 || gs[0].Backlog != 4 || gs[0].InFlight != 0 {
		t.Fatalf("after the failed actions: %+v; want the 4 dead letters waiting, none leased", gs)
	}
	if got := deadIDs(listAll(t, h.e, ListDead, ListRequest{Topic: "orders", Group: "billing"})); !slices.Equal(got, dead) {
		t.Fatalf("after the failed actions %v, want %v", got, dead)
	}
	// A redrive holds one (its reader's receive, as Redrive's own).
	held, err := h.e.cons.receiveAs(ctx, ReceiveRequest{Topic: dlq, Group: redriveGroup, Max: 1, Invisible: time.Minute}, true)
	if err != nil || len(held) != 1 {
		t.Fatalf("the redrive's lease: %v, %v", held, err)
	}
	for _, act := range []func(context.Context, string, string, []message.ID) (int, error){dl.Resend, dl.Delete} {
		if _, err := act(ctx, "orders", "billing", []message.ID{held[0].ID}); errs.CodeOf(err) != errs.FailedPrecondition || !strings.Contains(err.Error(), "being redriven") {
			t.Fatalf("an action on a dead letter a redrive holds: %v", err)
		}
	}
	if n, err := dl.Purge(ctx, "orders", "billing"); n != 3 || err != nil {
		t.Fatalf("purge beside a redrive: %d, %v; want the 3 it does not hold", n, err)
	}
	h.e.Release(dlq, redriveGroup, []string{held[0].Receipt})
	if got := deadIDs(listAll(t, h.e, ListDead, ListRequest{Topic: "orders", Group: "billing"})); !slices.Equal(got, []message.ID{held[0].ID}) {
		t.Fatalf("after the redrive let go: %v, want %v", got, held[0].ID)
	}
	if n, err := dl.Resend(ctx, "orders", "billing", []message.ID{held[0].ID}); n != 1 || err != nil {
		t.Fatalf("resend once the redrive let go: %d, %v", n, err)
	}
}
