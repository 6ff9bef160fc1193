package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/hourglass-mq/hourglass/access"
	"github.com/hourglass-mq/hourglass/access/accesstest"
	"github.com/hourglass-mq/hourglass/api"
)

// lockedBuffer is an audit sink the handler writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// routeCase is one route of the matrix: a concrete request, the rule that
// allows it, one of the same action elsewhere, and one of another action
// on the same resource.
type routeCase struct {
	method, path, body              string
	allowed, elsewhere, wrongAction string
}

// accessServer is a test server with a credentials file holding every
// principal the matrix names (each named by its one rule), plus "root"
// with every permission, and a message of topic orders sent by root.
func accessServer(t *testing.T, cases []routeCase) (*testServer, map[string]string, *lockedBuffer, string) {
	t.Helper()
	rules := map[string][]string{"root": {"send:*", "receive:*", "manage:*", "admin:*", "metrics:*"}}
	name := func(rule string) string {
		return strings.NewReplacer(":", "-", "/", "-", "*", "all").Replace(rule)
	}
	for _, c := range cases {
		for _, r := range []string{c.allowed, c.elsewhere, c.wrongAction} {
			if r != "" {
				rules[name(r)] = []string{r}
			}
		}
	}
	path, secrets := accesstest.Write(t, t.TempDir(), rules)
	audit := &lockedBuffer{}
	ts := newTestServer(t, withOptions(func(o *Options) {
		o.Access = accesstest.Store(t, path, "")
		o.Audit = access.NewAudit(slog.New(slog.NewJSONHandler(audit, nil)))
	}))
	// Over TLS: the same handler behind httptest's TLS server, whose
	// client trusts it.
	plain := ts.srv
	ts.srv = httptest.NewTLSServer(ts.h)
	plain.Close()
	root := []string{"Authorization", "Bearer root:" + secrets["root"]}
	var rcpt api.Receipt
	if r := ts.do("POST", "/v1/topics/orders/messages", map[string]any{"body": "x", "delay": "1h"}, root...); r.status != 200 {
		t.Fatalf("send: %d %s", r.status, r.body)
	} else if err := jsonUnmarshal(r.body, &rcpt); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/v1/topics/orders/groups/billing", "/v1/topics/invoices"} {
		if r := ts.do("PUT", p, map[string]any{}, root...); r.status >= 300 {
			t.Fatalf("PUT %s: %d %s", p, r.status, r.body)
		}
	}
	byName := map[string]string{}
	for rule := range rules {
		byName[rule] = secrets[rule]
	}
	for _, c := range cases {
		for _, r := range []string{c.allowed, c.elsewhere, c.wrongAction} {
			if r != "" {
				byName[r] = name(r) + ":" + secrets[name(r)]
			}
		}
	}
	return ts, byName, audit, rcpt.ID
}

// TestAccessMatrix: every route that needs a permission, with a principal
// allowed, a principal allowed the same action elsewhere, a principal
// allowed another action on the same resource, no credential and a wrong
// secret. Refusals are 403 naming the action and resource, before any
// lookup; an ID of a message the principal may not manage is refused like
// an ID that names nothing.
func TestAccessMatrix(t *testing.T) {
	cases := []routeCase{
		{"POST", "/v1/topics/orders/messages", `{"body":"b"}`, "send:orders", "send:invoices", "manage:orders"},
		{"POST", "/v1/topics/orders/batch", `{"messages":[{"body":"b"}]}`, "send:orders", "send:invoices", "receive:orders/*"},
		{"GET", "/v1/messages/{id}", "", "manage:orders", "manage:invoices", "send:orders"},
		{"GET", "/v1/messages/{id}/preview", "", "manage:orders", "manage:invoices", "send:orders"},
		{"POST", "/v1/messages/{id}/reschedule", `{"delay":"2h"}`, "manage:orders", "manage:invoices", "send:orders"},
		{"DELETE", "/v1/messages/{id}", "", "manage:ord*", "manage:invoices", "send:orders"},
		{"GET", "/v1/topics/orders/keys/k1", "", "manage:orders", "manage:invoices", "send:orders"},
		{"PUT", "/v1/topics/orders", `{}`, "admin:topic/orders", "admin:topic/invoices", "send:orders"},
		{"PUT", "/v1/topics/orders/groups/billing", `{}`, "admin:group/orders/billing", "admin:group/orders/shipping", "receive:orders/billing"},
		{"POST", "/v1/topics/orders/groups/billing/receive", `{"max":1}`, "receive:orders/billing", "receive:orders/shipping", "admin:group/orders/billing"},
		{"POST", "/v1/topics/orders/groups/billing/ack", `{"receipts":["x"]}`, "receive:orders/*", "receive:invoices/billing", "manage:orders"},
		{"POST", "/v1/topics/orders/groups/billing/nack", `{"receipt":"x"}`, "receive:orders/billing", "receive:orders/b", "send:orders"},
		{"POST", "/v1/topics/orders/groups/billing/invisibility", `{"receipt":"x","invisible":"1s"}`, "receive:orders/billing", "receive:orders/shipping", "send:orders"},
		{"POST", "/v1/topics/orders/groups/billing/redrive", `{}`, "admin:group/orders/billing", "admin:group/invoices/billing", "receive:orders/billing"},
		{"PUT", "/v1/schedules/nightly", `{"topic":"orders","cron":"@daily"}`, "admin:schedule/nightly", "admin:schedule/hourly", "send:orders"},
		{"GET", "/v1/schedules/nightly", "", "admin:schedule/*", "admin:schedule/hourly", "send:nightly"},
		{"POST", "/v1/schedules/nightly/pause", "", "admin:schedule/nightly", "admin:schedule/hourly", "admin:topic/nightly"},
		{"DELETE", "/v1/schedules/nightly", "", "admin:schedule/nightly", "admin:schedule/hourly", "manage:nightly"},
		{"POST", "/v1/clock/advance", `{"by":"1s"}`, "admin:clock", "admin:backup", "metrics:clock"},
		{"POST", "/v1/admin/backup", `{"dir":"b1"}`, "admin:backup", "admin:clock", "metrics:backup"},
		{"GET", "/v1/admin/damage", "", "admin:damage", "admin:backup", "metrics:damage"},
		{"GET", "/v1/stats", "", "metrics:stats", "metrics:forecast", "admin:stats"},
		{"GET", "/v1/forecast", "", "metrics:forecast", "metrics:stats", "admin:forecast"},
		{"GET", "/metrics", "", "metrics:metrics", "metrics:stats", "admin:metrics"},
		{"GET", "/v1/topics/orders", "", "receive:orders/billing", "send:invoices", ""},
		{"GET", "/v1/pending?topic=orders", "", "manage:orders", "manage:invoices", "send:orders"},
		{"GET", "/v1/topics/orders/groups/billing/inflight", "", "manage:orders", "manage:invoices", "receive:orders/billing"},
		{"GET", "/v1/topics/orders/groups/billing/dead", "", "manage:orders", "manage:invoices", "receive:orders/billing"},
		{"POST", "/v1/topics/orders/groups/billing/dead/resend", `{"ids":["00000000000000000000000000000000"]}`, "admin:group/orders/billing", "admin:group/orders/shipping", "receive:orders/billing"},
		{"POST", "/v1/topics/orders/groups/billing/dead/delete", `{"ids":["00000000000000000000000000000000"]}`, "admin:group/orders/billing", "admin:group/invoices/billing", "manage:orders"},
		{"POST", "/v1/topics/orders/groups/billing/dead/purge", `{}`, "admin:group/orders/billing", "admin:group/orders/shipping", "manage:orders"},
	}
	ts, creds, audit, id := accessServer(t, cases)
	for _, c := range cases {
		path := strings.ReplaceAll(c.path, "{id}", id)
		do := func(hdr ...string) response {
			var body any
			if c.body != "" {
				body = c.body
			}
			return ts.do(c.method, path, body, hdr...)
		}
		bearer := func(rule string) []string { return []string{"Authorization", "Bearer " + creds[rule]} }
		what := c.method + " " + c.path
		if r := do(bearer(c.allowed)...); r.status == 401 || r.status == 403 {
			t.Errorf("%s as %s: %d %s, want it let through", what, c.allowed, r.status, r.body)
		}
		for _, rule := range []string{c.elsewhere, c.wrongAction} {
			if rule == "" {
				continue
			}
			r := do(bearer(rule)...)
			if r.status != 403 || r.errorCode() != "permission_denied" || !strings.Contains(r.errorMessage(), "may not") {
				t.Errorf("%s as %s: %d %s, want 403 permission_denied", what, rule, r.status, r.body)
			}
		}
		if r := do(); r.status != 401 || r.errorCode() != "unauthenticated" {
			t.Errorf("%s without credentials: %d %s, want 401", what, r.status, r.body)
		}
		wrong := strings.SplitN(creds[c.allowed], ":", 2)[0] + ":" + strings.SplitN(creds["send:invoices"], ":", 2)[1]
		if r := do("Authorization", "Bearer "+wrong); r.status != 401 {
			t.Errorf("%s with a wrong secret: %d %s, want 401", what, r.status, r.body)
		}
	}
	if !strings.Contains(audit.String(), `"result":"denied"`) || !strings.Contains(audit.String(), `"action":"admin"`) {
		t.Fatalf("the audit trail lacks refusals or admin actions: %s", audit.String())
	}
}

// TestAccessRefusalSaysNothingOfExistence: a refusal is the same for a
// topic, group or message that exists and for one that does not; it names
// the principal, the action and the resource.
func TestAccessRefusalSaysNothingOfExistence(t *testing.T) {
	ts, creds, _, id := accessServer(t, []routeCase{{"", "", "", "send:invoices", "manage:invoices", "receive:invoices/x"}})
	as := []string{"Authorization", "Bearer " + creds["manage:invoices"]}
	missing := strings.Repeat("0", 31) + "1"
	a := ts.do("GET", "/v1/messages/"+id, nil, as...)
	b := ts.do("GET", "/v1/messages/"+missing, nil, as...)
	if a.status != 403 || b.status != 403 || strings.ReplaceAll(a.errorMessage(), id, missing) != b.errorMessage() {
		t.Fatalf("existing %d %q, missing %d %q: want the same 403", a.status, a.errorMessage(), b.status, b.errorMessage())
	}
	x := ts.do("POST", "/v1/topics/orders/groups/billing/receive", `{"max":1}`, as...)
	y := ts.do("POST", "/v1/topics/nosuch/groups/billing/receive", `{"max":1}`, as...)
	if x.status != 403 || y.status != 403 || strings.ReplaceAll(x.errorMessage(), "orders", "nosuch") != y.errorMessage() {
		t.Fatalf("existing %d %q, missing %d %q: want the same 403", x.status, x.errorMessage(), y.status, y.errorMessage())
	}
	if !strings.Contains(x.errorMessage(), `"manage-invoices" may not receive orders/billing`) {
		t.Fatalf("refusal %q does not name principal, action and resource", x.errorMessage())
	}
}

// TestAccessListsShowOnlyWhatThePrincipalSees: topic and group lists hold
// what the principal's rules name (a consumer of one group sees no other
// group of its topic); whoami answers its rules.
func TestAccessListsShowOnlyWhatThePrincipalSees(t *testing.T) {
	ts, creds, _, _ := accessServer(t, []routeCase{{"", "", "", "receive:orders/billing", "send:invoices", "manage:x"}})
	as := []string{"Authorization", "Bearer " + creds["receive:orders/billing"]}
	if r := ts.do("PUT", "/v1/topics/orders/groups/shipping", map[string]any{}, "Authorization", "Bearer root:"+creds["root"]); r.status != 201 {
		t.Fatalf("PUT shipping: %d %s", r.status, r.body)
	}
	var topics api.TopicList
	if r := ts.do("GET", "/v1/topics", nil, as...); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	} else if err := jsonUnmarshal(r.body, &topics); err != nil {
		t.Fatal(err)
	}
	if len(topics.Topics) != 1 || topics.Topics[0].Name != "orders" {
		t.Fatalf("topics %+v, want orders alone", topics.Topics)
	}
	if gs := topics.Topics[0].Groups; len(gs) != 1 || gs[0].Name != "billing" {
		t.Fatalf("groups of orders %+v, want billing alone", gs)
	}
	var me api.Whoami
	if r := ts.do("GET", "/v1/whoami", nil, as...); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	} else if err := jsonUnmarshal(r.body, &me); err != nil {
		t.Fatal(err)
	}
	if me.Principal != "receive-orders-billing" || fmt.Sprint(me.Allow) != "[receive:orders/billing]" {
		t.Fatalf("whoami %+v", me)
	}
	if r := ts.do("GET", "/v1/topics/invoices", nil, as...); r.status != 403 {
		t.Fatalf("a topic no rule names: %d %s", r.status, r.body)
	}
}

// TestEveryRouteHasItsCheck: the routes without a permission of their
// own are exactly those any principal may use; a new route must be added
// to one list or the other.
func TestEveryRouteHasItsCheck(t *testing.T) {
	open := map[string]bool{"GET /v1/topics": true, "GET /v1/schedules": true, "GET /v1/clock": true, "GET /healthz": true, "GET /v1/whoami": true}
	for _, rt := range routes {
		k := rt.method + " " + rt.path
		if (rt.need == nil) != open[k] {
			t.Errorf("%s: need %v, in the open list %v", k, rt.need != nil, open[k])
		}
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
