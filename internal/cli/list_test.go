package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/hourglasstest"
)

// deadRig is a real broker with topic pay, groups billing (one attempt)
// and audit, three pending messages (one unkeyed) and n dead letters of
// billing.
func deadRig(t *testing.T, n int) (*hourglasstest.Server, *runner) {
	t.Helper()
	srv := hourglasstest.NewServer(t)
	ctx := context.Background()
	cl := srv.Client
	if _, err := cl.CreateTopic(ctx, "pay", client.TopicConfig{Queues: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateGroup(ctx, "pay", "billing", client.GroupConfig{MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"later-1", "later-2", ""} {
		if _, err := cl.Send(ctx, "pay", client.Message{Key: k, Body: []byte("x"), When: client.After(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if _, err := cl.Send(ctx, "pay", client.Message{Key: "now-" + itoa(int64(i)), Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	var got []client.Received
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		rs, err := cl.Receive(ctx, "pay", "billing", client.ReceiveOptions{Max: n, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rs...)
	}
	for _, r := range got {
		if err := cl.Nack(ctx, "pay", "billing", r.Receipt, 0); err != nil {
			t.Fatal(err)
		}
	}
	for time.Now().Before(deadline) {
		if p, err := cl.ListDead(ctx, client.ListRequest{Topic: "pay", Group: "billing"}); err == nil && len(p.Items) == n {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return srv, newRunner(t, map[string]string{"HOURGLASS_SERVER": srv.URL})
}

// listJSON runs a listing with --json and decodes its page.
func listJSON(t *testing.T, r *runner, args ...string) api.MessagePage {
	t.Helper()
	res := r.run(append([]string{"list", "--json"}, args...)...)
	res.wantCode(t, ExitOK)
	var page api.MessagePage
	if err := json.Unmarshal([]byte(res.stdout), &page); err != nil {
		t.Fatalf("list --json printed %q: %v", res.stdout, err)
	}
	return page
}

// TestListCommands: list pending, inflight and dead against a real
// broker, as tables and --json, with paging and filters; the unkeyed
// message is listed by its ID.
func TestListCommands(t *testing.T) {
	_, r := deadRig(t, 3)
	page := listJSON(t, r, "pending", "--topic", "pay", "--limit", "2")
	if len(page.Items) != 2 || page.NextCursor == nil || page.Items[0].Key != "later-1" {
		t.Fatalf("first page %+v", page)
	}
	rest := listJSON(t, r, "pending", "--cursor", *page.NextCursor)
	if len(rest.Items) != 1 || rest.Items[0].Key != "" || rest.NextCursor != nil {
		t.Fatalf("second page %+v", rest)
	}
	res := r.run("inspect", rest.Items[0].ID)
	res.wantCode(t, ExitOK)
	all := listJSON(t, r, "pending", "--all", "--limit", "1")
	if len(all.Items) != 3 {
		t.Fatalf("--all: %d items", len(all.Items))
	}
	res = r.run("list", "pending", "--key-prefix", "later", "--limit", "1")
	res.wantCode(t, ExitOK)
	if !strings.Contains(res.stdout, "later-1") || strings.Contains(res.stdout, "later-2") || !strings.Contains(res.stdout, "more: --cursor ") {
		t.Fatalf("table:\n%s", res.stdout)
	}
	dead := listJSON(t, r, "dead", "--topic", "pay", "--group", "billing")
	if len(dead.Items) != 3 || dead.Items[0].Reason != "max-attempts" || dead.Items[0].Attempts != 1 {
		t.Fatalf("dead %+v", dead)
	}
	res = r.run("list", "dead", "--topic", "pay", "--group", "billing")
	res.wantCode(t, ExitOK)
	if !strings.Contains(res.stdout, "REASON") || strings.Count(res.stdout, "max-attempts") != 3 {
		t.Fatalf("dead table:\n%s", res.stdout)
	}
	if inflight := listJSON(t, r, "inflight", "--topic", "pay", "--group", "billing"); len(inflight.Items) != 0 {
		t.Fatalf("in flight %+v", inflight)
	}
}

// TestListCommandRefusesBadInput: each mistake is a usage error (exit 2)
// or the broker's 400, said plainly, and nothing is listed.
func TestListCommandRefusesBadInput(t *testing.T) {
	_, r := deadRig(t, 0)
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"list"}, ExitUsage, "one of pending, inflight or dead"},
		{[]string{"list", "waiting"}, ExitUsage, "unknown listing"},
		{[]string{"list", "pending", "--limit", "501"}, ExitUsage, "--limit 501 is not in [1, 500]"},
		{[]string{"list", "pending", "--group", "g"}, ExitUsage, "--group does not apply"},
		{[]string{"list", "dead", "--topic", "pay"}, ExitUsage, "needs --topic and --group"},
		{[]string{"list", "pending", "--due-from", "tomorrow"}, ExitUsage, "is not a time"},
		{[]string{"list", "pending", "--due-from", "2026-12-06T20:00:00Z", "--due-to", "1"}, ExitUsage, "not after"},
		{[]string{"list", "pending", "--cursor", "nonsense"}, ExitFailed, "cursor"},
		{[]string{"list", "dead", "--topic", "pay", "--group", "nope"}, ExitFailed, "does not exist"},
		{[]string{"dead", "purge", "--topic", "pay", "--group", "billing"}, ExitUsage, "--yes"},
		{[]string{"dead", "resend", "--topic", "pay", "--group", "billing"}, ExitUsage, "needs the IDs"},
		{[]string{"dead", "resend", "--topic", "pay", "--group", "billing", "xyz"}, ExitFailed, "xyz"},
	} {
		res := r.run(c.args...)
		if res.code != c.code || !strings.Contains(res.stderr, c.says) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d saying %q", c.args, res.code, res.stderr, c.code, c.says)
		}
	}
}

// TestDeadCommands: resend one, delete one, purge the rest, each with
// --json or text, and the listing after each.
func TestDeadCommands(t *testing.T) {
	srv, r := deadRig(t, 4)
	dead := listJSON(t, r, "dead", "--topic", "pay", "--group", "billing")
	if len(dead.Items) != 4 {
		t.Fatalf("dead %+v", dead)
	}
	res := r.run("dead", "resend", "--topic", "pay", "--group", "billing", "--json", dead.Items[0].ID)
	res.wantCode(t, ExitOK)
	var out api.DeadLetterResult
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil || out != (api.DeadLetterResult{Action: "resend", Count: 1}) {
		t.Fatalf("resend printed %q (%v)", res.stdout, err)
	}
	res = r.run("dead", "delete", "--topic", "pay", "--group", "billing", dead.Items[1].ID)
	res.wantCode(t, ExitOK)
	if !strings.Contains(res.stdout, "deleted 1 dead letter of group billing of pay") {
		t.Fatalf("delete printed %q", res.stdout)
	}
	// Deleted already: refused, and nothing else changes.
	res = r.run("dead", "delete", "--topic", "pay", "--group", "billing", dead.Items[1].ID, dead.Items[2].ID)
	if res.code != ExitFailed || !strings.Contains(res.stderr, "no longer there") {
		t.Fatalf("second delete: %d %q", res.code, res.stderr)
	}
	if left := listJSON(t, r, "dead", "--topic", "pay", "--group", "billing"); len(left.Items) != 2 {
		t.Fatalf("left %+v", left)
	}
	res = r.run("dead", "purge", "--topic", "pay", "--group", "billing", "--yes")
	res.wantCode(t, ExitOK)
	if !strings.Contains(res.stdout, "purged 2 dead letters") {
		t.Fatalf("purge printed %q", res.stdout)
	}
	ctx := context.Background()
	rs, err := srv.Client.Receive(ctx, "pay", "billing", client.ReceiveOptions{Max: 10, Wait: 5 * time.Second})
	if err != nil || len(rs) != 1 || rs[0].Properties["hourglass-redriven-from"] != dead.Items[0].ID {
		t.Fatalf("the resent one at billing: %+v %v", rs, err)
	}
}
