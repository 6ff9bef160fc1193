package server

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
)

func TestHTTPDedup(t *testing.T) {
	ts := newTestServer(t, withEngine(func(o *engine.Options) {
		o.DedupTopics = map[string]engine.DedupPolicy{"lax": {Window: time.Hour, FirstWins: true}}
	}))
	var first, again api.Receipt
	ts.call("POST", "/v1/topics/t/messages", map[string]any{"body": "a", "delay": "1m", "dedup_id": "op-1"}, http.StatusOK, &first)
	ts.call("POST", "/v1/topics/t/messages", map[string]any{"body": "a", "delay": "1m", "dedup_id": "op-1"}, http.StatusOK, &again)
	if first.Duplicate || !again.Duplicate || again.ID != first.ID || again.Due != first.Due {
		t.Fatalf("first %+v, again %+v", first, again)
	}
	r := ts.do("POST", "/v1/topics/t/messages", map[string]any{"body": "b", "delay": "1m", "dedup_id": "op-1"})
	ts.wantError(r, http.StatusConflict, "already_exists")
	var e api.Error
	json.Unmarshal(r.body, &e)
	if e.Error.ID != first.ID {
		t.Fatalf("conflict names %q, want %q", e.Error.ID, first.ID)
	}
	var batch api.BatchReceipts
	ts.call("POST", "/v1/topics/t/batch", map[string]any{"messages": []map[string]any{
		{"body": "a", "delay": "1m", "dedup_id": "op-1"}, {"body": "c", "dedup_id": "op-2"}, {"body": "c", "dedup_id": "op-2"}}},
		http.StatusOK, &batch)
	rs := batch.Receipts
	if !rs[0].Duplicate || rs[0].ID != first.ID || rs[1].Duplicate || !rs[2].Duplicate || rs[2].ID != rs[1].ID {
		t.Fatalf("batch %+v", rs)
	}
	// first-wins topic: a conflicting send is answered like a retry.
	var l1, l2 api.Receipt
	ts.call("POST", "/v1/topics/lax/messages", map[string]any{"body": "a", "dedup_id": "x"}, http.StatusOK, &l1)
	ts.call("POST", "/v1/topics/lax/messages", map[string]any{"body": "b", "dedup_id": "x"}, http.StatusOK, &l2)
	if !l2.Duplicate || l2.ID != l1.ID {
		t.Fatalf("first wins: %+v %+v", l1, l2)
	}
	long := make([]byte, 257)
	for i := range long {
		long[i] = 'x'
	}
	ts.wantError(ts.do("POST", "/v1/topics/t/messages", map[string]any{"body": "a", "dedup_id": string(long)}), http.StatusBadRequest, "invalid_argument")
}
