package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/api"
)

// listAllHTTP pages through a listing over HTTP, limit items a page, and
// returns every item.
func (ts *testServer) listAllHTTP(path string, q url.Values, limit int) []api.ListedMessage {
	ts.t.Helper()
	var out []api.ListedMessage
	q.Set("limit", fmt.Sprint(limit))
	for range 1000 {
		var page api.MessagePage
		ts.call("GET", path+"?"+q.Encode(), nil, http.StatusOK, &page)
		if len(page.Items) > limit {
			ts.t.Fatalf("page of %d, limit %d", len(page.Items), limit)
		}
		out = append(out, page.Items...)
		if page.NextCursor == nil {
			return out
		}
		q.Set("cursor", *page.NextCursor)
	}
	ts.t.Fatal("the listing did not end")
	return nil
}

// TestListPendingHTTP pages the pending messages of a topic with filters,
// an unkeyed message among them reachable by its id, and refuses every
// malformed parameter with a 400 that names it.
func TestListPendingHTTP(t *testing.T) {
	ts := newTestServer(t, withFakeClock(fakeClock()))
	var unkeyed api.Receipt
	for i := range 12 {
		body := map[string]any{"body": "x", "delay": fmt.Sprintf("%dm", i+1), "key": fmt.Sprintf("order-%02d", i), "tag": "t"}
		ts.call("POST", "/v1/topics/orders/messages", body, http.StatusOK, nil)
	}
	ts.call("POST", "/v1/topics/orders/messages", map[string]any{"body": "x", "delay": "30s"}, http.StatusOK, &unkeyed)
	all := ts.listAllHTTP("/v1/pending", url.Values{"topic": {"orders"}}, 5)
	if len(all) != 13 || all[0].ID != unkeyed.ID || all[0].Key != "" || all[1].Key != "order-00" || all[0].FireAt == 0 {
		t.Fatalf("listed %d, first %+v", len(all), all[0])
	}
	var info api.MessageInfo
	ts.call("GET", "/v1/messages/"+all[0].ID, nil, http.StatusOK, &info)
	if info.State != api.StatePending {
		t.Fatalf("the unkeyed message: %+v", info)
	}
	if got := ts.listAllHTTP("/v1/pending", url.Values{"key_prefix": {"order-1"}}, 500); len(got) != 2 {
		t.Fatalf("key prefix: %d", len(got))
	}
	for _, c := range []struct{ query, says string }{
		{"limit=501", "limit \"501\" is not a whole number in [1, 500]"},
		{"limit=0", "limit"},
		{"limit=ten", "limit"},
		{"limit=", "limit"},
		{"cursor=zzz", "cursor"},
		{"due_from=-5", "due_from"},
		{"due_from=10&due_to=5", "due_to"},
		{"due_to=soon", "due_to"},
		{"topic=a%20b", "topic"},
		{"state=dead", "\"state\" is not accepted"},
		{"limit=5&limit=6", "given 2 times"},
		{"%zz", "malformed"},
	} {
		r := ts.do("GET", "/v1/pending?"+c.query, nil)
		ts.wantError(r, http.StatusBadRequest, "invalid_argument")
		if !strings.Contains(r.errorMessage(), c.says) {
			t.Errorf("%s: %q does not say %q", c.query, r.errorMessage(), c.says)
		}
	}
	ts.wantError(ts.do("GET", "/v1/pending?topic=nope", nil), http.StatusNotFound, "not_found")
	ts.wantError(ts.do("GET", "/v1/topics/orders/groups/nope/inflight", nil), http.StatusNotFound, "not_found")
	// A cursor of another listing is refused by name.
	var page api.MessagePage
	ts.call("GET", "/v1/pending?limit=1", nil, http.StatusOK, &page)
	ts.call("PUT", "/v1/topics/orders/groups/w", nil, http.StatusCreated, nil)
	r := ts.do("GET", "/v1/topics/orders/groups/w/dead?cursor="+url.QueryEscape(*page.NextCursor), nil)
	ts.wantError(r, http.StatusBadRequest, "invalid_argument")
	if !strings.Contains(r.errorMessage(), "belongs to the pending listing") {
		t.Fatalf("another listing's cursor: %s", r.body)
	}
}

// TestDeadLettersHTTP: dead letters listed with reason and attempts,
// resent to their group only, deleted, purged; each bad selection a clear
// error that changes nothing.
func TestDeadLettersHTTP(t *testing.T) {
	clk := fakeClock()
	ts := newTestServer(t, withFakeClock(clk))
	ts.call("PUT", "/v1/topics/pay", `{"queues":2}`, http.StatusCreated, nil)
	ts.call("PUT", "/v1/topics/pay/groups/billing", map[string]any{"max_attempts": 1}, http.StatusCreated, nil)
	ts.call("PUT", "/v1/topics/pay/groups/audit", nil, http.StatusCreated, nil)
	const n = 5
	for i := range n {
		ts.call("POST", "/v1/topics/pay/messages", map[string]any{"body": "b", "key": fmt.Sprint("k", i)}, http.StatusOK, nil)
	}
	var got []api.ReceivedMessage
	eventually(t, 10*time.Second, "deliveries", func() bool {
		got = append(got, ts.receive("pay", "billing", map[string]any{"max": n})...)
		return len(got) == n
	})
	for _, m := range got {
		ts.call("POST", "/v1/topics/pay/groups/billing/nack", map[string]any{"receipt": m.Receipt}, http.StatusOK, nil)
	}
	var dead []api.ListedMessage
	eventually(t, 10*time.Second, "the dead letters listed", func() bool {
		dead = ts.listAllHTTP("/v1/topics/pay/groups/billing/dead", url.Values{}, 2)
		return len(dead) == n
	})
	for _, d := range dead {
		if d.Reason != "max-attempts" || d.Attempts != 1 || d.OriginTopic != "pay" || d.OriginID == "" || d.Group != "billing" {
			t.Fatalf("dead letter %+v", d)
		}
	}
	base := "/v1/topics/pay/groups/billing/dead/"
	sel := func(ids ...string) map[string]any { return map[string]any{"ids": ids} }
	ts.wantError(ts.do("POST", base+"resend", sel("nonsense")), http.StatusBadRequest, "invalid_argument")
	ts.wantError(ts.do("POST", base+"resend", sel()), http.StatusBadRequest, "invalid_argument")
	ts.wantError(ts.do("POST", base+"resend", `{"ids":["`+dead[0].ID+`"],"all":true}`), http.StatusBadRequest, "invalid_argument")
	ts.wantError(ts.do("POST", base+"delete", sel(strings.Repeat("0", 32))), http.StatusNotFound, "not_found")
	ts.wantError(ts.do("POST", base+"delete", sel(dead[0].OriginID)), http.StatusConflict, "failed_precondition")
	r := ts.do("POST", "/v1/topics/pay/groups/audit/dead/resend", sel(dead[0].ID))
	ts.wantError(r, http.StatusConflict, "failed_precondition")
	if !strings.Contains(r.errorMessage(), "another group") {
		t.Fatalf("wrong group: %s", r.body)
	}
	ts.wantError(ts.do("POST", "/v1/topics/pay/groups/nope/dead/purge", nil), http.StatusNotFound, "not_found")
	var res api.DeadLetterResult
	ts.call("POST", base+"resend", sel(dead[0].ID, dead[1].ID), http.StatusOK, &res)
	if res.Action != "resend" || res.Count != 2 {
		t.Fatalf("resend: %+v", res)
	}
	eventually(t, 10*time.Second, "the resent ones at billing", func() bool {
		got = ts.receive("pay", "billing", map[string]any{"max": 10})
		return len(got) == 2
	})
	if back := ts.receive("pay", "audit", map[string]any{"max": 10}); len(back) != n {
		t.Fatalf("audit got %d, want its own %d and no resent copy", len(back), n)
	}
	ts.wantError(ts.do("POST", base+"resend", sel(dead[0].ID)), http.StatusNotFound, "not_found")
	ts.call("POST", base+"delete", sel(dead[2].ID), http.StatusOK, &res)
	if res.Action != "delete" || res.Count != 1 {
		t.Fatalf("delete: %+v", res)
	}
	if left := ts.listAllHTTP("/v1/topics/pay/groups/billing/dead", url.Values{}, 50); len(left) != 2 || left[0].ID != dead[3].ID {
		t.Fatalf("left %+v", left)
	}
	ts.call("POST", base+"purge", nil, http.StatusOK, &res)
	if res.Action != "purge" || res.Count != 2 {
		t.Fatalf("purge: %+v", res)
	}
	if left := ts.listAllHTTP("/v1/topics/pay/groups/billing/dead", url.Values{}, 50); len(left) != 0 {
		t.Fatalf("after the purge %d", len(left))
	}
}

// TestListPendingOfEveryTopicNeedsManageOnAll: without topic= the pending
// listing shows every topic's messages, so a principal that may manage
// one topic is refused and told to name it; one that may manage all, and
// the same principal naming its topic, are let through.
func TestListPendingOfEveryTopicNeedsManageOnAll(t *testing.T) {
	ts, creds, _, _ := accessServer(t, []routeCase{{allowed: "manage:orders"}})
	bearer := func(rule string) []string { return []string{"Authorization", "Bearer " + creds[rule]} }
	r := ts.do("GET", "/v1/pending", nil, bearer("manage:orders")...)
	if r.status != http.StatusForbidden || !strings.Contains(r.errorMessage(), "give topic=") {
		t.Fatalf("every topic as manage:orders: %d %s", r.status, r.body)
	}
	if r := ts.do("GET", "/v1/pending?topic=orders", nil, bearer("manage:orders")...); r.status != http.StatusOK {
		t.Fatalf("topic orders as manage:orders: %d %s", r.status, r.body)
	}
	root := []string{"Authorization", "Bearer root:" + creds["root"]}
	var page api.MessagePage
	r = ts.do("GET", "/v1/pending", nil, root...)
	if r.status != http.StatusOK || json.Unmarshal(r.body, &page) != nil || len(page.Items) != 1 {
		t.Fatalf("every topic as root: %d %s", r.status, r.body)
	}
}
