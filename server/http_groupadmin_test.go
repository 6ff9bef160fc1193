package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
)

// TestGroupAdminRoutes: a group with its policy is made before its topic
// exists; a group a receive made gets its policy changed; pause stops its
// receives and resume lets them go on; seek moves it back to a time; bad
// input answers 400 and changes nothing; a missing group answers 404.
func TestGroupAdminRoutes(t *testing.T) {
	ts := newTestServer(t)
	var g api.Group
	ts.call("PUT", "/v1/topics/jobs/groups/workers", map[string]any{"max_attempts": 2}, http.StatusCreated, &g)
	if g.MaxAttempts != 2 || g.Paused {
		t.Fatalf("created %+v", g)
	}
	var rc api.Receipt
	ts.call("POST", "/v1/topics/jobs/messages", map[string]any{"body": "x"}, http.StatusOK, &rc)
	var got api.ReceiveResponse
	eventually(t, 5*time.Second, "a receive", func() bool {
		ts.call("POST", "/v1/topics/jobs/groups/other/receive", map[string]any{"max": 1}, http.StatusOK, &got)
		return len(got.Messages) == 1
	})
	ts.call("POST", "/v1/topics/jobs/groups/other/ack", map[string]any{"receipts": []string{got.Messages[0].Receipt}}, http.StatusOK, nil)
	var same api.Group
	ts.call("PATCH", "/v1/topics/jobs/groups/other", map[string]any{}, http.StatusOK, &same) // gives nothing: changes nothing
	if same.MaxAttempts != 16 {
		t.Fatalf("an empty PATCH changed the group: %+v", same)
	}
	for _, bad := range []any{map[string]any{"max_attempts": 1001}, map[string]any{"backoff_base": "-1s"},
		map[string]any{"backoff_base": "10m", "backoff_max": "1m"}, map[string]any{"max_attempts": "3"}} {
		ts.wantError(ts.do("PATCH", "/v1/topics/jobs/groups/other", bad), http.StatusBadRequest, "invalid_argument")
	}
	ts.call("PATCH", "/v1/topics/jobs/groups/other", map[string]any{"max_attempts": 3, "backoff_base": "2s"}, http.StatusOK, &g)
	if g.MaxAttempts != 3 || g.BackoffBase != "2s" || g.BackoffMax != "5m0s" {
		t.Fatalf("after PATCH: %+v", g)
	}
	ts.wantError(ts.do("PATCH", "/v1/topics/jobs/groups/nobody", map[string]any{"max_attempts": 3}), http.StatusNotFound, "not_found")
	ts.wantError(ts.do("POST", "/v1/topics/jobs/groups/nobody/pause", nil), http.StatusNotFound, "not_found")

	ts.call("POST", "/v1/topics/jobs/groups/other/pause", nil, http.StatusOK, &g)
	if !g.Paused {
		t.Fatalf("after pause: %+v", g)
	}
	// Moved back before the message: it would be delivered again, but the
	// group is paused.
	ts.wantError(ts.do("POST", "/v1/topics/jobs/groups/other/seek", map[string]any{}), http.StatusBadRequest, "invalid_argument")
	ts.wantError(ts.do("POST", "/v1/topics/jobs/groups/other/seek", map[string]any{"to": -5}), http.StatusBadRequest, "invalid_argument")
	var sr api.SeekResult
	ts.call("POST", "/v1/topics/jobs/groups/other/seek", map[string]any{"to": 0}, http.StatusOK, &sr)
	moved := 0
	for _, q := range sr.Queues {
		moved += int(q.From) - int(q.To)
	}
	if moved != 1 || sr.Group.Backlog != 1 {
		t.Fatalf("seek to 0: %+v", sr)
	}
	ts.call("POST", "/v1/topics/jobs/groups/other/receive", map[string]any{"max": 1}, http.StatusOK, &got)
	if len(got.Messages) != 0 {
		t.Fatalf("a paused group received %d", len(got.Messages))
	}
	ts.call("POST", "/v1/topics/jobs/groups/other/resume", nil, http.StatusOK, &g)
	ts.call("POST", "/v1/topics/jobs/groups/other/receive", map[string]any{"max": 1}, http.StatusOK, &got)
	if g.Paused || len(got.Messages) != 1 || got.Messages[0].ID != rc.ID || got.Messages[0].Attempt != 1 {
		t.Fatalf("after resume: %+v, got %+v", g, got)
	}
}

// TestGroupCreateWithoutAutoCreate: with topics not made on first use, a
// group of a missing topic answers 404 saying how to make the topic, and
// neither the topic nor the group exists after.
func TestGroupCreateWithoutAutoCreate(t *testing.T) {
	ts := newTestServer(t, func(_ *Options, o *engine.Options) { o.NoAutoCreate = true })
	r := ts.do("PUT", "/v1/topics/jobs/groups/workers", map[string]any{"max_attempts": 2})
	ts.wantError(r, http.StatusNotFound, "not_found")
	if !strings.Contains(r.errorMessage(), "create it first") {
		t.Fatalf("404 without the way out: %s", r.body)
	}
	ts.wantError(ts.do("GET", "/v1/topics/jobs/groups", nil), http.StatusNotFound, "not_found")
}
