package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
)

// recorded is one request as the fake server saw it.
type recorded struct {
	Method, Path, Auth, ContentType string
	Body                            map[string]any
}

// fake is an httptest server that records requests and answers each with
// the next canned response (the last one repeats).
type fake struct {
	t    *testing.T
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []recorded
	resp []canned
}

type canned struct {
	status int
	body   string
	header map[string]string
}

func newFake(t *testing.T, resp ...canned) *fake {
	t.Helper()
	f := &fake{t: t, resp: resp}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	rec := recorded{Method: r.Method, Path: r.URL.EscapedPath(), Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type")}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &rec.Body); err != nil {
			f.t.Errorf("request body is not a JSON object: %q", raw)
		}
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, rec)
	c := f.resp[min(len(f.reqs), len(f.resp))-1]
	f.mu.Unlock()
	for k, v := range c.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(c.status)
	io.WriteString(w, c.body)
}

func (f *fake) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func (f *fake) client(opts ...Option) *Client {
	return New(f.srv.URL, append([]Option{WithBackoff(time.Millisecond, 2*time.Millisecond)}, opts...)...)
}

func ok(body string) canned { return canned{status: 200, body: body} }

func apiError(status int, code, msg string) canned {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	return canned{status: status, body: string(b)}
}

// TestEndpoints checks, for every method, the request it sends (method,
// escaped path, JSON body) and how it decodes the contract's response.
func TestEndpoints(t *testing.T) {
	ctx := context.Background()
	at := time.UnixMilli(1_700_000_000_123)
	cases := []struct {
		name     string
		response string
		call     func(c *Client) (any, error)
		method   string
		path     string
		body     map[string]any
		want     any
	}{
		{
			name:     "send",
			response: `{"id":"1-2","topic":"orders","queue":3,"due":1700000010000,"due_time":"2023-11-14T22:13:30.000Z"}`,
			call: func(c *Client) (any, error) {
				return c.Send(ctx, "orders", Message{Key: "order-123", Tag: "close", Group: "g", Properties: map[string]string{"a": "b"},
					Body: []byte("close unpaid order 123"), When: After(10 * time.Second)})
			},
			method: "POST", path: "/v1/topics/orders/messages",
			body: map[string]any{"key": "order-123", "tag": "close", "group": "g", "properties": map[string]any{"a": "b"},
				"body": "close unpaid order 123", "delay": "10s"},
			want: Receipt{ID: "1-2", Topic: "orders", Queue: 3, Due: 1700000010000, DueTime: "2023-11-14T22:13:30.000Z"},
		},
		{
			name:     "send binary at",
			response: `{"id":"1-3","topic":"a b","queue":0,"due":1700000000123}`,
			call: func(c *Client) (any, error) {
				return c.Send(ctx, "a b", Message{Body: []byte{0xff, 0x00}, When: AtTime(at)})
			},
			method: "POST", path: "/v1/topics/a%20b/messages",
			body: map[string]any{"body_base64": "/wA=", "at": float64(1_700_000_000_123)},
			want: Receipt{ID: "1-3", Topic: "a b", Due: 1700000000123},
		},
		{
			name:     "batch",
			response: `{"receipts":[{"id":"1-4","topic":"t","queue":1,"due":5},{"id":"1-5","topic":"t","queue":2,"due":6}]}`,
			call: func(c *Client) (any, error) {
				return c.SendBatch(ctx, "t", []Message{{Body: []byte("x"), When: AtLevel(3)}, {Body: []byte("")}})
			},
			method: "POST", path: "/v1/topics/t/batch",
			body: map[string]any{"messages": []any{map[string]any{"body": "x", "level": float64(3)}, map[string]any{"body": ""}}},
			want: []Receipt{{ID: "1-4", Topic: "t", Queue: 1, Due: 5}, {ID: "1-5", Topic: "t", Queue: 2, Due: 6}},
		},
		{
			name:     "inspect",
			response: `{"id":"1-2","state":"pending","topic":"t","queue":1,"key":"k","due":10,"sent":5,"visible":0,"body_bytes":3,"properties":{"p":"q"}}`,
			call:     func(c *Client) (any, error) { return c.Inspect(ctx, "1-2") },
			method:   "GET", path: "/v1/messages/1-2",
			want: Info{ID: "1-2", State: StatePending, Topic: "t", Queue: 1, Key: "k", Due: 10, Sent: 5, BodyBytes: 3, Properties: map[string]string{"p": "q"}},
		},
		{
			name:     "inspect key with slash",
			response: `{"id":"1-2","state":"visible","topic":"t","key":"a/b","due":10,"sent":5,"visible":11}`,
			call:     func(c *Client) (any, error) { return c.InspectKey(ctx, "t", "a/b") },
			method:   "GET", path: "/v1/topics/t/keys/a%2Fb",
			want: Info{ID: "1-2", State: StateVisible, Topic: "t", Key: "a/b", Due: 10, Sent: 5, Visible: 11},
		},
		{
			name:     "cancel",
			response: `{"id":"1-2","state":"cancelled"}`,
			call:     func(c *Client) (any, error) { return nil, c.Cancel(ctx, "1-2") },
			method:   "DELETE", path: "/v1/messages/1-2",
		},
		{
			name:     "reschedule if due",
			response: `{"id":"1-2","due":99,"due_time":"x"}`,
			call:     func(c *Client) (any, error) { return c.Reschedule(ctx, "1-2", After(90*time.Minute), 10) },
			method:   "POST", path: "/v1/messages/1-2/reschedule",
			body: map[string]any{"delay": "1h30m0s", "if_due": float64(10)},
			want: Rescheduled{ID: "1-2", Due: 99, DueTime: "x"},
		},
		{
			name:     "create topic",
			response: `{"name":"t","queues":8,"fifo":true,"pending":0,"visible":0,"groups":[]}`,
			call:     func(c *Client) (any, error) { return c.CreateTopic(ctx, "t", TopicConfig{Queues: 8, FIFO: true}) },
			method:   "PUT", path: "/v1/topics/t",
			body: map[string]any{"queues": float64(8), "fifo": true},
			want: TopicInfo{Name: "t", Queues: 8, FIFO: true, Groups: []GroupInfo{}},
		},
		{
			name:     "topics",
			response: `{"topics":[{"name":"a","queues":4,"fifo":false,"pending":2,"visible":7,"groups":[]}]}`,
			call:     func(c *Client) (any, error) { return c.Topics(ctx) },
			method:   "GET", path: "/v1/topics",
			want: []TopicInfo{{Name: "a", Queues: 4, Pending: 2, Visible: 7, Groups: []GroupInfo{}}},
		},
		{
			name: "describe topic",
			response: `{"name":"a","queues":4,"fifo":false,"pending":2,"visible":7,"groups":[{"topic":"a","name":"g","max_attempts":16,` +
				`"backoff_base":"1s","backoff_max":"5m0s","backlog":3,"in_flight":1,"delivered":9,"acked":8,"redelivered":1,"dead_lettered":0,"dead_letter_topic":"%DLQ%g"}]}`,
			call:   func(c *Client) (any, error) { return c.DescribeTopic(ctx, "a") },
			method: "GET", path: "/v1/topics/a",
			want: TopicInfo{Name: "a", Queues: 4, Pending: 2, Visible: 7, Groups: []GroupInfo{{Topic: "a", Name: "g",
				Config:  GroupConfig{MaxAttempts: 16, BackoffBase: time.Second, BackoffMax: 5 * time.Minute},
				Backlog: 3, InFlight: 1, Delivered: 9, Acked: 8, Redelivered: 1, DeadLetterTopic: "%DLQ%g"}}},
		},
		{
			name:     "create group",
			response: `{"topic":"a","name":"g","max_attempts":3,"backoff_base":"2s","backoff_max":"1m0s"}`,
			call: func(c *Client) (any, error) {
				return c.CreateGroup(ctx, "a", "g", GroupConfig{MaxAttempts: 3, BackoffBase: 2 * time.Second, BackoffMax: time.Minute})
			},
			method: "PUT", path: "/v1/topics/a/groups/g",
			body: map[string]any{"max_attempts": float64(3), "backoff_base": "2s", "backoff_max": "1m0s"},
			want: GroupInfo{Topic: "a", Name: "g", Config: GroupConfig{MaxAttempts: 3, BackoffBase: 2 * time.Second, BackoffMax: time.Minute}},
		},
		{
			name:     "groups",
			response: `{"groups":[{"topic":"a","name":"g","max_attempts":16,"backoff_base":"1s","backoff_max":"5m0s","backlog":1}]}`,
			call:     func(c *Client) (any, error) { return c.Groups(ctx, "a") },
			method:   "GET", path: "/v1/topics/a/groups",
			want: []GroupInfo{{Topic: "a", Name: "g", Config: GroupConfig{MaxAttempts: 16, BackoffBase: time.Second, BackoffMax: 5 * time.Minute}, Backlog: 1}},
		},
		{
			name: "receive",
			response: `{"messages":[{"id":"1-2","receipt":"r1","attempt":2,"queue":1,"offset":7,"key":"k","tag":"t","group":"","body":"hi","body_base64":"aGk=","due":100,"visible":103},` +
				`{"id":"1-3","receipt":"r2","attempt":1,"queue":0,"offset":0,"body_base64":"/wA=","due":5,"visible":5}]}`,
			call: func(c *Client) (any, error) {
				return c.Receive(ctx, "orders", "billing", ReceiveOptions{Max: 10, Invisible: time.Minute, Wait: 20 * time.Second})
			},
			method: "POST", path: "/v1/topics/orders/groups/billing/receive",
			body: map[string]any{"max": float64(10), "invisible": "1m0s", "wait": "20s"},
			want: []Received{{ID: "1-2", Receipt: "r1", Attempt: 2, Queue: 1, Offset: 7, Key: "k", Tag: "t", Body: []byte("hi"), Due: 100, Visible: 103},
				{ID: "1-3", Receipt: "r2", Attempt: 1, Body: []byte{0xff, 0}, Due: 5, Visible: 5}},
		},
		{
			name: "receive with acks, text bodies",
			response: `{"messages":[{"id":"1-4","receipt":"r3","attempt":1,"queue":0,"offset":9,"key":"","tag":"","group":"",` +
				`"properties":{"p":"v"},"body":"{\"a\":\"\u00e9\"}","due":7,"visible":8}],"acked":2}`,
			call: func(c *Client) (any, error) {
				return c.Receive(ctx, "o", "b", ReceiveOptions{Ack: []string{"r1", "r2"}, BodyEncoding: BodyText})
			},
			method: "POST", path: "/v1/topics/o/groups/b/receive",
			body: map[string]any{"ack": []any{"r1", "r2"}, "body_encoding": "text"},
			want: []Received{{ID: "1-4", Receipt: "r3", Attempt: 1, Offset: 9, Properties: map[string]string{"p": "v"},
				Body: []byte(`{"a":"é"}`), Due: 7, Visible: 8}},
		},
		{
			name:     "receive nothing",
			response: `{"messages":[]}`,
			call:     func(c *Client) (any, error) { return c.Receive(ctx, "o", "b", ReceiveOptions{}) },
			method:   "POST", path: "/v1/topics/o/groups/b/receive",
			body: map[string]any{},
			want: []Received{},
		},
		{
			name:     "ack",
			response: `{"acked":2}`,
			call:     func(c *Client) (any, error) { return c.Ack(ctx, "o", "b", "r1", "r2") },
			method:   "POST", path: "/v1/topics/o/groups/b/ack",
			body: map[string]any{"receipts": []any{"r1", "r2"}},
			want: 2,
		},
		{
			name:     "nack",
			response: `{}`,
			call:     func(c *Client) (any, error) { return nil, c.Nack(ctx, "o", "b", "r1", 5*time.Second) },
			method:   "POST", path: "/v1/topics/o/groups/b/nack",
			body: map[string]any{"receipt": "r1", "delay": "5s"},
		},
		{
			name:     "nack default backoff",
			response: `{}`,
			call:     func(c *Client) (any, error) { return nil, c.Nack(ctx, "o", "b", "r1", 0) },
			method:   "POST", path: "/v1/topics/o/groups/b/nack",
			body: map[string]any{"receipt": "r1"},
		},
		{
			name:     "invisibility",
			response: `{}`,
			call:     func(c *Client) (any, error) { return nil, c.ChangeInvisibility(ctx, "o", "b", "r1", time.Minute) },
			method:   "POST", path: "/v1/topics/o/groups/b/invisibility",
			body: map[string]any{"receipt": "r1", "invisible": "1m0s"},
		},
		{
			name:     "redrive",
			response: `{"redriven":4}`,
			call:     func(c *Client) (any, error) { return c.Redrive(ctx, "o", "b", 100) },
			method:   "POST", path: "/v1/topics/o/groups/b/redrive",
			body: map[string]any{"max": float64(100)},
			want: 4,
		},
		{
			name:     "stats",
			response: `{"pending":3,"sent":10,"fired":7,"cancelled":0,"rescheduled":1,"lateness_count":7,"lateness_p50_ms":1,"lateness_p99_ms":null,"recovery_seconds":0.5,"clock_jumps":0}`,
			call:     func(c *Client) (any, error) { return c.Stats(ctx) },
			method:   "GET", path: "/v1/stats",
			want: Stats{Pending: 3, Sent: 10, Fired: 7, Rescheduled: 1, LatenessCount: 7, LatenessP50Ms: ptr(1.0), RecoverySeconds: 0.5},
		},
		{
			name:     "health",
			response: `{"status":"ok"}`,
			call:     func(c *Client) (any, error) { return nil, c.Health(ctx) },
			method:   "GET", path: "/healthz",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, ok(tc.response))
			got, err := tc.call(f.client(WithToken("s3cret")))
			if err != nil {
				t.Fatalf("call failed: %v", err)
			}
			if tc.want != nil && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("result\n got %#v\nwant %#v", got, tc.want)
			}
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != tc.method || r.Path != tc.path {
				t.Errorf("request %s %s, want %s %s", r.Method, r.Path, tc.method, tc.path)
			}
			if r.Auth != "Bearer s3cret" {
				t.Errorf("Authorization %q, want the bearer token", r.Auth)
			}
			if tc.body != nil && !reflect.DeepEqual(r.Body, tc.body) {
				t.Errorf("request body\n got %#v\nwant %#v", r.Body, tc.body)
			}
			if tc.body == nil && r.Body != nil {
				t.Errorf("request body %#v, want none", r.Body)
			}
			if r.Body != nil && r.ContentType != "application/json" {
				t.Errorf("Content-Type %q with a body", r.ContentType)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestNoTokenNoAuthorizationHeader(t *testing.T) {
	f := newFake(t, ok(`{"status":"ok"}`))
	if err := f.client().Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a := f.requests()[0].Auth; a != "" {
		t.Errorf("Authorization %q sent without a token", a)
	}
}

func TestClientSideValidation(t *testing.T) {
	f := newFake(t, ok(`{}`))
	c := f.client()
	ctx := context.Background()
	_, err := c.Send(ctx, "t", Message{When: When{Delay: time.Second, Level: 2}})
	if err == nil || !strings.Contains(err.Error(), "at most one") {
		t.Errorf("two delivery options: err %v", err)
	}
	_, err = c.Send(ctx, "", Message{})
	if !IsInvalidArgument(err) || !strings.Contains(err.Error(), "topic is required") {
		t.Errorf("empty topic: err %v", err)
	}
	_, err = c.InspectKey(ctx, "t", "")
	if !IsInvalidArgument(err) || !strings.Contains(err.Error(), "key is required") {
		t.Errorf("empty key: err %v", err)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests sent for invalid calls", n)
	}
}

func TestErrorResponses(t *testing.T) {
	ctx := context.Background()
	t.Run("api error body", func(t *testing.T) {
		f := newFake(t, apiError(404, "not_found", `no message with key "k" in topic "t"`))
		_, err := f.client().InspectKey(ctx, "t", "k")
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("err %T %v, want *Error", err, err)
		}
		if e.StatusCode != 404 || e.Code != errs.NotFound || e.Message != `no message with key "k" in topic "t"` {
			t.Errorf("error %+v", e)
		}
		if !IsNotFound(err) || !errors.Is(err, errs.ErrNotFound) || errors.Is(err, errs.ErrAlreadyExists) || IsAlreadyExists(err) {
			t.Errorf("code tests wrong for %v", err)
		}
		if CodeOf(err) != errs.NotFound {
			t.Errorf("CodeOf = %q", CodeOf(err))
		}
		if want := `not_found (HTTP 404): no message with key "k" in topic "t"`; err.Error() != want {
			t.Errorf("message %q, want %q", err.Error(), want)
		}
	})
	t.Run("each code", func(t *testing.T) {
		checks := map[string]func(error) bool{
			"invalid_argument": IsInvalidArgument, "already_exists": IsAlreadyExists, "failed_precondition": IsFailedPrecondition,
			"too_large": IsTooLarge, "resource_exhausted": IsResourceExhausted, "unavailable": IsUnavailable, "unauthenticated": IsUnauthenticated,
		}
		for code, is := range checks {
			f := newFake(t, apiError(400, code, "m"))
			err := f.client(WithRetries(0)).Cancel(ctx, "1-1")
			if !is(err) || IsNotFound(err) {
				t.Errorf("code %s: predicate false for %v", code, err)
			}
		}
	})
	t.Run("proxy page", func(t *testing.T) {
		f := newFake(t, canned{status: 502, body: "<html>bad gateway</html>"})
		err := f.client(WithRetries(0)).Health(ctx)
		var e *Error
		if !errors.As(err, &e) || e.Code != errs.Unavailable || !strings.Contains(e.Message, "bad gateway") {
			t.Errorf("err %v", err)
		}
	})
	t.Run("undecodable success", func(t *testing.T) {
		f := newFake(t, ok(`{"id":`))
		_, err := f.client().Send(ctx, "t", Message{})
		if err == nil || !strings.Contains(err.Error(), "decode response") {
			t.Errorf("err %v", err)
		}
		if n := len(f.requests()); n != 1 {
			t.Errorf("%d attempts for a decode error, want 1", n)
		}
	})
	t.Run("network error is not an api error", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		err = New(addr, WithRetries(0)).Health(ctx)
		if err == nil || CodeOf(err) != errs.Internal || IsUnavailable(err) {
			t.Errorf("err %v code %q", err, CodeOf(err))
		}
	})
}

// TestRetryPolicy checks which failures are retried for reads and writes.
func TestRetryPolicy(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name     string
		first    canned
		write    bool
		attempts int
		ok       bool
	}{
		{"read 503 then ok", apiError(503, "unavailable", "x"), false, 2, true},
		{"read 502 then ok", canned{status: 502, body: "proxy"}, false, 2, true},
		{"read 504 then ok", canned{status: 504, body: "proxy"}, false, 2, true},
		{"read 429 then ok", apiError(429, "resource_exhausted", "rate"), false, 2, true},
		{"read 500 not retried", apiError(500, "internal", "bug"), false, 1, false},
		{"read 404 not retried", apiError(404, "not_found", "x"), false, 1, false},
		{"send 429 then ok", apiError(429, "resource_exhausted", "rate"), true, 2, true},
		{"send 503 not retried", apiError(503, "unavailable", "x"), true, 1, false},
		{"send 502 not retried", canned{status: 502, body: "proxy"}, true, 1, false},
		{"send 504 not retried", canned{status: 504, body: "proxy"}, true, 1, false},
		{"send 400 not retried", apiError(400, "invalid_argument", "x"), true, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, tc.first, ok(`{"id":"1-1","status":"ok"}`))
			c := f.client()
			var err error
			if tc.write {
				_, err = c.Send(ctx, "t", Message{Body: []byte("b")})
			} else {
				err = c.Health(ctx)
			}
			if (err == nil) != tc.ok {
				t.Errorf("err %v, want success %v", err, tc.ok)
			}
			reqs := f.requests()
			if len(reqs) != tc.attempts {
				t.Errorf("%d attempts, want %d", len(reqs), tc.attempts)
			}
			if tc.write && len(reqs) == 2 && !reflect.DeepEqual(reqs[0].Body, reqs[1].Body) {
				t.Errorf("retry sent a different body: %v then %v", reqs[0].Body, reqs[1].Body)
			}
		})
	}
}

func TestRetriesExhaustedAndDisabled(t *testing.T) {
	ctx := context.Background()
	f := newFake(t, apiError(503, "unavailable", "shutting down"))
	err := f.client(WithRetries(3)).Health(ctx)
	if !IsUnavailable(err) {
		t.Errorf("err %v, want the last unavailable", err)
	}
	if n := len(f.requests()); n != 4 {
		t.Errorf("%d attempts with 3 retries, want 4", n)
	}
	f = newFake(t, apiError(503, "unavailable", "shutting down"))
	if err := f.client(WithRetries(0)).Health(ctx); !IsUnavailable(err) {
		t.Errorf("err %v", err)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("%d attempts with retries disabled, want 1", n)
	}
}

func TestRetryAfterHeader(t *testing.T) {
	f := newFake(t, canned{status: 429, body: `{"error":{"code":"resource_exhausted","message":"rate"}}`, header: map[string]string{"Retry-After": "7"}})
	err := f.client(WithRetries(0)).Health(context.Background())
	var e *Error
	if !errors.As(err, &e) || e.RetryAfter != 7*time.Second {
		t.Fatalf("err %v, want RetryAfter 7s", err)
	}
	c := f.client()
	if w := c.wait(0, err); w != 7*time.Second {
		t.Errorf("wait %v, want the server's 7s", w)
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	c := New("x", WithBackoff(100*time.Millisecond, time.Second))
	plain := errors.New("x")
	for attempt, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second} {
		for range 20 {
			w := c.wait(attempt, plain)
			if w < want/2 || w > want {
				t.Fatalf("attempt %d: wait %v outside [%v, %v]", attempt, w, want/2, want)
			}
		}
	}
}

// failingTransport fails the first n round trips with err, then passes
// requests to the default transport; it counts the failures.
type failingTransport struct {
	n     int32
	err   error
	tries atomic.Int32
}

func (ft *failingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if ft.tries.Add(1) <= ft.n {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, ft.err
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestRetryOnConnectionErrors(t *testing.T) {
	ctx := context.Background()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	cases := []struct {
		name  string
		err   error
		write bool
		sent  int // requests that reached the server
		ok    bool
	}{
		{"send after refused is retried", refused, true, 1, true},
		{"send after reset is not retried", reset, true, 0, false},
		{"read after reset is retried", reset, false, 1, true},
		{"read after refused is retried", refused, false, 1, true},
		{"send after eof is not retried", io.ErrUnexpectedEOF, true, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, ok(`{"id":"1-1","status":"ok"}`))
			ft := &failingTransport{n: 1, err: tc.err}
			c := f.client(WithHTTPClient(&http.Client{Transport: ft}))
			var err error
			if tc.write {
				_, err = c.Send(ctx, "t", Message{Body: []byte("b")})
			} else {
				err = c.Health(ctx)
			}
			if (err == nil) != tc.ok {
				t.Errorf("err %v, want success %v", err, tc.ok)
			}
			if n := len(f.requests()); n != tc.sent {
				t.Errorf("%d requests reached the server, want %d", n, tc.sent)
			}
			if !tc.ok && !errors.Is(err, tc.err) {
				t.Errorf("err %v does not wrap the transport error %v", err, tc.err)
			}
		})
	}
}

func TestContextCancelStopsLongPoll(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body) // the server notices a closed connection only once the body is read
		close(entered)
		select { // a long poll that never finds a message
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: never leave the handler blocked
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := New(srv.URL).Receive(ctx, "t", "g", ReceiveOptions{Wait: 30 * time.Second})
		done <- err
	}()
	<-entered
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Receive did not return after its context was cancelled")
	}
}

func TestContextEndsRetryWait(t *testing.T) {
	f := newFake(t, apiError(503, "unavailable", "down"))
	c := f.client(WithBackoff(time.Hour, time.Hour), WithRetries(5))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Health(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "down") {
		t.Errorf("err %v, want the deadline and the last error", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("took %v: the retry wait ignored the context", time.Since(start))
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

func TestNewNormalisesBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:7070":          "http://127.0.0.1:7070",
		"http://h:1/":             "http://h:1",
		" https://h/prefix/ ":     "https://h/prefix",
		"http://127.0.0.1:7070//": "http://127.0.0.1:7070",
	} {
		if got := New(in).BaseURL(); got != want {
			t.Errorf("New(%q).BaseURL() = %q, want %q", in, got, want)
		}
	}
}

func TestReceivedJSONRoundTrip(t *testing.T) {
	for _, body := range [][]byte{[]byte("héllo"), {0xff, 0xfe}, {}} {
		in := Received{ID: "1-1", Receipt: "r", Attempt: 1, Body: body, Due: 1, Visible: 4, Properties: map[string]string{"a": "b"}}
		raw, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.Unmarshal(raw, &m)
		if _, hasText := m["body"]; hasText != (len(body) == 0 || body[0] != 0xff) {
			t.Errorf("body %q: body field present=%v in %s", body, hasText, raw)
		}
		var out Received
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		if string(out.Body) != string(in.Body) || out.Lateness() != 3*time.Millisecond {
			t.Errorf("round trip %+v -> %s -> %+v", in, raw, out)
		}
	}
}

func TestMillisString(t *testing.T) {
	if s := Millis(1_700_000_000_123).String(); s != "2023-11-14T22:13:20.123Z" {
		t.Errorf("String = %q", s)
	}
	if s := Millis(0).String(); s != "-" {
		t.Errorf("zero String = %q", s)
	}
}
