package server

import (
	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBadInput checks that every kind of bad request gets the documented
// status, code and a message naming the problem.
func TestBadInput(t *testing.T) {
	ts := newTestServer(t, withOptions(func(c *Options) {
		c.MaxRequestBytes = 70000
		c.MaxBatch = 3
	}), withEngine(func(o *engine.Options) {
		o.Limits.MaxBodyBytes = 1024
		o.Limits.MaxDelay = 24 * time.Hour
		o.Limits.DelayLevels = []time.Duration{time.Second, time.Minute}
	}))
	ts.call("PUT", "/v1/topics/t", nil, http.StatusCreated, nil)
	ts.call("PUT", "/v1/topics/t/groups/g", nil, http.StatusCreated, nil)
	var rc api.Receipt
	ts.call("POST", "/v1/topics/t/messages", `{"body":"x","delay":"1h"}`, http.StatusOK, &rc)
	farFuture := time.Now().Add(48 * time.Hour).UnixMilli()

	cases := []struct {
		name, method, path, body string
		status                   int
		code, inMessage          string
	}{
		{"truncated JSON", "POST", "/v1/topics/t/messages", `{"body":`, 400, "invalid_argument", "not valid JSON"},
		{"syntax error", "POST", "/v1/topics/t/messages", `{"body" "x"}`, 400, "invalid_argument", "not valid JSON"},
		{"not an object", "POST", "/v1/topics/t/messages", `[1,2]`, 400, "invalid_argument", "object"},
		{"unknown field", "POST", "/v1/topics/t/messages", `{"bdy":"x"}`, 400, "invalid_argument", `"bdy"`},
		{"wrong type", "POST", "/v1/topics/t/messages", `{"at":"tomorrow"}`, 400, "invalid_argument", `"at"`},
		{"two JSON values", "POST", "/v1/topics/t/messages", `{} {}`, 400, "invalid_argument", "after the JSON object"},
		{"empty body", "POST", "/v1/topics/t/messages", ``, 400, "invalid_argument", "empty"},
		{"body and body_base64", "POST", "/v1/topics/t/messages", `{"body":"a","body_base64":"YQ=="}`, 400, "invalid_argument", "not both"},
		{"bad base64", "POST", "/v1/topics/t/messages", `{"body_base64":"***"}`, 400, "invalid_argument", "base64"},
		{"delay and at", "POST", "/v1/topics/t/messages", `{"delay":"1s","at":1}`, 400, "invalid_argument", "at most one"},
		{"zero delay and level", "POST", "/v1/topics/t/messages", `{"delay":"0s","level":1}`, 400, "invalid_argument", "at most one"},
		{"bad duration", "POST", "/v1/topics/t/messages", `{"delay":"soon"}`, 400, "invalid_argument", `"soon"`},
		{"send to a dead-letter topic", "POST", "/v1/topics/%25DLQ%25t.g/messages", `{"body":"forged"}`, 400, "invalid_argument", "reserved for dead-letter topics"},
		{"batch to a dead-letter topic", "POST", "/v1/topics/%25DLQ%25t.g/batch", `{"messages":[{"body":"forged"}]}`, 400, "invalid_argument", "reserved for dead-letter topics"},
		{"create a dead-letter topic", "PUT", "/v1/topics/%25DLQ%25mine", ``, 400, "invalid_argument", "reserved for dead-letter topics"},
		{"negative delay", "POST", "/v1/topics/t/messages", `{"delay":"-5s"}`, 400, "invalid_argument", "negative"},
		{"delay beyond max", "POST", "/v1/topics/t/messages", `{"delay":"25h"}`, 400, "invalid_argument", "maximum delay"},
		{"at beyond max", "POST", "/v1/topics/t/messages", `{"at":` + itoa(farFuture) + `}`, 400, "invalid_argument", "maximum delay"},
		{"negative at", "POST", "/v1/topics/t/messages", `{"at":-1}`, 400, "invalid_argument", "negative"},
		{"unknown level", "POST", "/v1/topics/t/messages", `{"level":3}`, 400, "invalid_argument", "levels are 1 to 2"},
		{"body too large", "POST", "/v1/topics/t/messages", `{"body":"` + strings.Repeat("x", 1025) + `"}`, 413, "too_large", "limit is 1024"},
		{"request too large", "POST", "/v1/topics/t/messages", `{"body":"` + strings.Repeat("x", 80000) + `"}`, 413, "too_large", "70000"},
		{"bad topic name", "POST", "/v1/topics/bad%20topic/messages", `{"body":"x"}`, 400, "invalid_argument", "character"},
		{"batch empty", "POST", "/v1/topics/t/batch", `{"messages":[]}`, 400, "invalid_argument", "at least one"},
		{"batch too many", "POST", "/v1/topics/t/batch", `{"messages":[{},{},{},{}]}`, 413, "too_large", "limit is 3"},
		{"batch bad member", "POST", "/v1/topics/t/batch", `{"messages":[{"body":"ok"},{"delay":"x"}]}`, 400, "invalid_argument", "message 1"},
		{"batch member too far", "POST", "/v1/topics/t/batch", `{"messages":[{"body":"ok"},{"delay":"48h"}]}`, 400, "invalid_argument", "message 1"},
		{"bad id", "GET", "/v1/messages/xyz", ``, 400, "invalid_argument", "32 hex digits"},
		{"foreign id", "GET", "/v1/messages/00000000000000010000000000000000", ``, 404, "not_found", "does not exist"},
		{"cancel bad id", "DELETE", "/v1/messages/zz", ``, 400, "invalid_argument", "32 hex digits"},
		{"reschedule foreign id", "POST", "/v1/messages/00000000000000010000000000000000/reschedule", `{"delay":"1s"}`, 404, "not_found", "does not exist"},
		{"reschedule beyond max", "POST", "/v1/messages/" + rc.ID + "/reschedule", `{"delay":"30h"}`, 400, "invalid_argument", "maximum delay"},
		{"reschedule negative if_due", "POST", "/v1/messages/" + rc.ID + "/reschedule", `{"delay":"1s","if_due":-4}`, 400, "invalid_argument", "if_due"},
		{"unknown key", "GET", "/v1/topics/t/keys/nope", ``, 404, "not_found", "nope"},
		{"unknown topic", "GET", "/v1/topics/nope", ``, 404, "not_found", "nope"},
		{"topic exists", "PUT", "/v1/topics/t", ``, 409, "already_exists", "exists"},
		{"too many queues", "PUT", "/v1/topics/q", `{"queues":100000}`, 400, "invalid_argument", "queues"},
		{"bad group config", "PUT", "/v1/topics/t/groups/g", `{"max_attempts":-1}`, 400, "invalid_argument", "max attempts"},
		{"bad backoff", "PUT", "/v1/topics/t/groups/g", `{"backoff_base":"fast"}`, 400, "invalid_argument", "backoff_base"},
		{"groups of unknown topic", "GET", "/v1/topics/nope/groups", ``, 404, "not_found", "nope"},
		{"receive wait too long", "POST", "/v1/topics/t/groups/g/receive", `{"wait":"31s"}`, 400, "invalid_argument", "wait"},
		{"receive max too big", "POST", "/v1/topics/t/groups/g/receive", `{"max":5000}`, 400, "invalid_argument", "max"},
		{"receive zero invisible", "POST", "/v1/topics/t/groups/g/receive", `{"invisible":"0s"}`, 400, "invalid_argument", "invisible"},
		{"receive unknown topic", "POST", "/v1/topics/nope/groups/g/receive", ``, 404, "not_found", "nope"},
		{"ack no receipts", "POST", "/v1/topics/t/groups/g/ack", `{"receipts":[]}`, 400, "invalid_argument", "receipts"},
		{"ack malformed receipt", "POST", "/v1/topics/t/groups/g/ack", `{"receipts":["x"]}`, 400, "invalid_argument", "receipt"},
		{"nack no receipt", "POST", "/v1/topics/t/groups/g/nack", `{}`, 400, "invalid_argument", "receipt"},
		{"invisibility missing", "POST", "/v1/topics/t/groups/g/invisibility", `{"receipt":"x"}`, 400, "invalid_argument", "invisible"},
		{"redrive max too big", "POST", "/v1/topics/t/groups/g/redrive", `{"max":5000}`, 400, "invalid_argument", "max"},
		{"redrive unknown group", "POST", "/v1/topics/t/groups/zz/redrive", ``, 404, "not_found", "zz"},
		// An optional body is left out, not sent as white space.
		{"redrive white space", "POST", "/v1/topics/t/groups/g/redrive", "\t", 400, "invalid_argument", "white space"},
		{"receive white space", "POST", "/v1/topics/t/groups/g/receive", " \r\n", 400, "invalid_argument", "white space"},
		{"create topic white space", "PUT", "/v1/topics/ws", " ", 400, "invalid_argument", "white space"},
		{"create group white space", "PUT", "/v1/topics/t/groups/ws", "\n", 400, "invalid_argument", "white space"},
		{"unknown endpoint", "GET", "/v2/things", ``, 404, "not_found", "no such endpoint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts.t = t
			r := ts.do(c.method, c.path, c.body)
			ts.wantError(r, c.status, c.code)
			if !strings.Contains(r.errorMessage(), c.inMessage) {
				t.Fatalf("message %q does not mention %q", r.errorMessage(), c.inMessage)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestMethodNotAllowed(t *testing.T) {
	ts := newTestServer(t)
	r := ts.do("PATCH", "/v1/topics/t", `{}`)
	ts.wantError(r, http.StatusMethodNotAllowed, "invalid_argument")
	if allow := r.header.Get("Allow"); allow != "GET, PUT" {
		t.Fatalf("Allow %q, want GET, PUT", allow)
	}
}

func TestUnknownTopicWithoutAutoCreate(t *testing.T) {
	ts := newTestServer(t, withOptions(func(c *Options) { c.AutoCreateTopics = false }),
		withEngine(func(o *engine.Options) { o.NoAutoCreate = true }))
	r := ts.do("POST", "/v1/topics/nope/messages", `{"body":"x"}`)
	ts.wantError(r, http.StatusNotFound, "not_found")
	if !strings.Contains(r.errorMessage(), "auto-create") {
		t.Fatalf("message %q does not say why", r.errorMessage())
	}
	ts.call("PUT", "/v1/topics/nope", nil, http.StatusCreated, nil)
	ts.call("POST", "/v1/topics/nope/messages", `{"body":"x"}`, http.StatusOK, nil)

	// Dead-lettering creates the dead-letter topic even with auto-create off.
	ts.call("PUT", "/v1/topics/nope/groups/g", `{"max_attempts":1}`, http.StatusCreated, nil)
	var got []api.ReceivedMessage
	eventually(t, 10*time.Second, "delivery", func() bool {
		got = ts.receive("nope", "g", nil)
		return len(got) > 0
	})
	ts.call("POST", "/v1/topics/nope/groups/g/nack", map[string]any{"receipt": got[0].Receipt}, http.StatusOK, nil)
	eventually(t, 10*time.Second, "dead-lettering", func() bool {
		var gl api.GroupList
		ts.call("GET", "/v1/topics/nope/groups", nil, http.StatusOK, &gl)
		return gl.Groups[0].DeadLettered == 1
	})
}

func TestAuth(t *testing.T) {
	ts := newTestServer(t, withOptions(func(c *Options) { c.AuthToken = "s3cret" }))
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "s3cret"}, {"Authorization", "Basic s3cret"}} {
		r := ts.do("GET", "/v1/topics", nil, hdr...)
		ts.wantError(r, http.StatusUnauthorized, "unauthenticated")
		if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("401 without a WWW-Authenticate: Bearer header: %v", r.header)
		}
	}
	// Even a request for an unknown endpoint is refused before routing.
	ts.wantError(ts.do("GET", "/v1/nothing", nil), http.StatusUnauthorized, "unauthenticated")
	if r := ts.do("GET", "/v1/topics", nil, "Authorization", "Bearer s3cret"); r.status != http.StatusOK {
		t.Fatalf("with the token: %d %s", r.status, r.body)
	}
	for _, open := range []string{"/healthz", "/metrics"} {
		if r := ts.do("GET", open, nil); r.status != http.StatusOK {
			t.Fatalf("%s without a token: %d %s", open, r.status, r.body)
		}
	}
}

// TestNullBodyRefused: null is no JSON object, optional body or not; the
// decoder alone would read it as "nothing given".
func TestNullBodyRefused(t *testing.T) {
	ts := newTestServer(t)
	for _, path := range []string{"/v1/topics/t/messages", "/v1/topics/t/groups/g/receive"} {
		r := ts.do("POST", path, " null ")
		if r.status != http.StatusBadRequest || !strings.Contains(r.errorMessage(), "not null") {
			t.Errorf("POST %s with null: status %d, %s", path, r.status, r.body)
		}
	}
	if r := ts.do("POST", "/v1/topics/t/groups/g/redrive", "\f"); r.status != http.StatusBadRequest {
		t.Errorf("a form feed is no JSON white space, yet the body counted as empty: status %d", r.status)
	}
}
