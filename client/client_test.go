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
			"data_loss": IsDataLoss,
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
