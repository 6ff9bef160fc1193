package server

import (
	"bytes"
	"encoding/json"
	"github.com/hourglass-mq/hourglass/api"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/metrics"
	"github.com/hourglass-mq/hourglass/vfs"
)

// testServer is the HTTP API over an engine on an in-memory filesystem,
// served by httptest on a loopback port.
type testServer struct {
	t    *testing.T
	opts Options
	eng  *engine.Engine
	h    *Handler
	srv  *httptest.Server
	clk  *clock.Fake // nil when the real clock is used
}

// serverOption changes a test server's HTTP options or its engine's.
type serverOption func(*Options, *engine.Options)

// withFakeClock drives the engine by a manual clock.
func withFakeClock(clk *clock.Fake) serverOption {
	return func(_ *Options, o *engine.Options) { o.Clock = clk }
}

// withOptions changes the HTTP API's options.
func withOptions(f func(*Options)) serverOption {
	return func(o *Options, _ *engine.Options) { f(o) }
}

// withEngine changes the engine's options.
func withEngine(f func(*engine.Options)) serverOption {
	return func(_ *Options, o *engine.Options) { f(o) }
}

// serveEngineOptions are the engine options `hourglass serve` opens with
// by default: the engine's own defaults, but the first scrub pass a second
// after the start (broker's TestDefaultsAreTheEngines holds serve to
// exactly this).
func serveEngineOptions(dir string, logger *slog.Logger) engine.Options {
	o := engine.NewOptions(dir)
	o.Logger = logger
	o.ScrubDelay = time.Second
	return o
}

func newTestServer(t *testing.T, opts ...serverOption) *testServer {
	t.Helper()
	so := DefaultOptions()
	so.DataDir = "/data"
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	eo := serveEngineOptions(so.DataDir, logger)
	eo.FS = vfs.NewMem()
	for _, o := range opts {
		o(&so, &eo)
	}
	eng, err := engine.Open(eo)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, opts: so, eng: eng}
	if c, ok := eo.Clock.(*clock.Fake); ok {
		ts.clk = c
	}
	ts.h = New(eng, so, logger, metrics.Handler(eng))
	ts.srv = httptest.NewServer(ts.h)
	t.Cleanup(func() {
		ts.h.Drain()
		ts.srv.Close()
		if err := eng.Close(); err != nil {
			t.Errorf("engine close: %v", err)
		}
	})
	return ts
}

// response is a decoded answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// errorCode returns the "code" of an error body, or "".
func (r response) errorCode() string {
	var e api.Error
	json.Unmarshal(r.body, &e)
	return string(e.Error.Code)
}

func (r response) errorMessage() string {
	var e api.Error
	json.Unmarshal(r.body, &e)
	return e.Error.Message
}

// do sends a request. body is sent as is when it is a string, as JSON
// otherwise (nil: no body).
func (ts *testServer) do(method, path string, body any, header ...string) response {
	ts.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			ts.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, ts.srv.URL+path, rd)
	if err != nil {
		ts.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := ts.srv.Client().Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		ts.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// call sends a request, requires status want and decodes the body into out.
func (ts *testServer) call(method, path string, body any, want int, out any) response {
	ts.t.Helper()
	r := ts.do(method, path, body)
	if r.status != want {
		ts.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, r.status, want, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		ts.t.Fatalf("%s %s: Content-Type %q", method, path, ct)
	}
	if out != nil {
		dec := json.NewDecoder(bytes.NewReader(r.body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(out); err != nil {
			ts.t.Fatalf("%s %s: decode %s: %v", method, path, r.body, err)
		}
	}
	return r
}

// wantError requires an error answer with status and code.
func (ts *testServer) wantError(r response, status int, code string) {
	ts.t.Helper()
	if r.status != status || r.errorCode() != code {
		ts.t.Fatalf("got status %d body %s; want status %d code %s", r.status, r.body, status, code)
	}
	if r.errorMessage() == "" {
		ts.t.Fatalf("error body %s has no message", r.body)
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
