package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// visible sends n messages to a new topic and waits until they are visible.
func (ts *testServer) visible(topic string, n int) {
	ts.t.Helper()
	if err := ts.eng.CreateTopic(topic, engine.TopicConfig{}); err != nil {
		ts.t.Fatal(err)
	}
	reqs := make([]engine.SendRequest, n)
	for i := range reqs {
		reqs[i] = engine.SendRequest{Message: message.Message{Topic: topic, Body: []byte("m")}}
	}
	if n == 0 {
		return
	}
	if _, err := ts.eng.SendBatch(context.Background(), reqs); err != nil {
		ts.t.Fatal(err)
	}
	ts.waitVisible(topic, n)
}

// waitVisible waits until n messages of topic are visible.
func (ts *testServer) waitVisible(topic string, n int) {
	ts.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := ts.eng.DescribeTopic(topic)
		if err != nil {
			ts.t.Fatal(err)
		}
		if st.Visible >= uint64(n) {
			return
		}
		if time.Now().After(deadline) {
			ts.t.Fatalf("%d of %d visible", st.Visible, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func (ts *testServer) group(topic string) engine.GroupInfo {
	ts.t.Helper()
	gs, err := ts.eng.Groups(topic)
	if err != nil || len(gs) != 1 {
		ts.t.Fatalf("groups of %s: %+v, %v", topic, gs, err)
	}
	return gs[0]
}

func (ts *testServer) groupNamed(topic, name string) engine.GroupInfo {
	ts.t.Helper()
	gs, err := ts.eng.Groups(topic)
	if err != nil {
		ts.t.Fatal(err)
	}
	for _, g := range gs {
		if g.Name == name {
			return g
		}
	}
	ts.t.Fatalf("no group %s of %s", name, topic)
	return engine.GroupInfo{}
}

func ids(ms []client.Received) []string {
	rs := make([]string, len(ms))
	for i := range ms {
		rs[i] = ms[i].Receipt
	}
	return rs
}

// A stream hands out every message once, in batches of at most max and
// never more than the window ahead of the acks; CloseSend makes the acks
// sent, confirms them, and ends the stream.
func TestStreamDeliversWithinTheWindow(t *testing.T) {
	ts := newTestServer(t)
	ts.visible("t", 100)
	c := client.New(ts.srv.URL, client.WithRetries(0))
	s, err := c.Stream(context.Background(), "t", "g", client.StreamOptions{Max: 10, Window: 30, BodyEncoding: client.BodyText})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var held [][]string
	seen := map[string]bool{}
	for n := 0; n < 30; {
		ms, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) > 10 {
			t.Fatalf("a batch of %d, max 10", len(ms))
		}
		for _, m := range ms {
			if seen[m.ID] || string(m.Body) != "m" {
				t.Fatalf("message %s again, or body %q", m.ID, m.Body)
			}
			seen[m.ID] = true
		}
		n += len(ms)
		held = append(held, ids(ms))
	}
	if g := ts.group("t"); g.InFlight != 30 {
		t.Fatalf("in flight %d with nothing acked, want the window's 30", g.InFlight)
	}
	for len(seen) < 100 {
		if err := s.Ack(held[0]...); err != nil {
			t.Fatal(err)
		}
		held = held[1:]
		ms, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if seen[m.ID] {
				t.Fatalf("message %s again", m.ID)
			}
			seen[m.ID] = true
		}
		held = append(held, ids(ms))
	}
	for _, rs := range held {
		if err := s.Ack(rs...); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if ms, err := s.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after CloseSend: %d messages, %v; want io.EOF", len(ms), err)
	}
	if s.Acked() != 100 {
		t.Errorf("confirmed %d acks, want 100", s.Acked())
	}
	if g := ts.group("t"); g.Acked != 100 || g.InFlight != 0 {
		t.Errorf("group acked %d, in flight %d; want 100 and 0", g.Acked, g.InFlight)
	}
}

// What is wrong before anything was streamed is answered with its status
// and error body, as any call.
func TestStreamRefusesBadRequests(t *testing.T) {
	ts := newTestServer(t)
	ts.visible("t", 0)
	base := "/v1/topics/t/groups/g/stream"
	for _, tc := range []struct {
		path, body string
		status     int
		code, says string
	}{
		{base + "?limit=3", "", 400, "invalid_argument", `"limit" is not accepted`},
		{base + "?max=0", "", 400, "invalid_argument", "max"},
		{base + "?max=1001", "", 400, "invalid_argument", "max 1001"},
		{base + "?max=x", "", 400, "invalid_argument", "max"},
		{base + "?window=10001", "", 400, "invalid_argument", "window 10001"},
		{base + "?window=-2", "", 400, "invalid_argument", "window"},
		{base + "?invisible=0s", "", 400, "invalid_argument", "invisible"},
		{base + "?invisible=", "", 400, "invalid_argument", "invisible"},
		{base + "?invisible=13h", "", 400, "invalid_argument", "invisible"},
		{base + "?body_encoding=hex", "", 400, "invalid_argument", "body_encoding"},
		{base + "?max=1&max=2", "", 400, "invalid_argument", "2 times"},
		{"/v1/topics/nope/groups/g/stream", "", 404, "not_found", "nope"},
		{base, `{"ack":5}`, 400, "invalid_argument", "ack line 1"},
		{base, "\n\n{\"ack\":[]}\n", 400, "invalid_argument", "ack line 3 (nothing of it acked): ack is empty"},
		{base, `{"ack":[""]}`, 400, "invalid_argument", "ack[0] is empty"},
		{base, `{"ack":["a"],"x":1}`, 400, "invalid_argument", "unknown field"},
		{base, `{"ack":["a"]} {"ack":["b"]}`, 400, "invalid_argument", "after the JSON object"},
		{base, `null`, 400, "invalid_argument", "null"},
		{base, `{"ack":["bm90LWEtcmVjZWlwdA"]}`, 400, "invalid_argument", "malformed"},
	} {
		r := ts.do("POST", tc.path, tc.body)
		if r.status != tc.status || r.errorCode() != tc.code || !strings.Contains(r.errorMessage(), tc.says) {
			t.Errorf("%s %q: %d %s %q; want %d %s saying %q", tc.path, tc.body, r.status, r.errorCode(), r.errorMessage(), tc.status, tc.code, tc.says)
		}
	}
	ms := ts.group("t")
	if ms.Acked != 0 || ms.Delivered != 0 {
		t.Errorf("a refused stream acked %d, delivered %d", ms.Acked, ms.Delivered)
	}
	// An ack line is bounded by what 1000 receipts take (64 KiB; the
	// request limit is always larger), a receipt by its length.
	r := ts.do("POST", base, `{"ack":["`+strings.Repeat("x", 70000)+`"]}`+"\n")
	if r.status != 413 || r.errorCode() != "too_large" || !strings.Contains(r.errorMessage(), "exceeds the limit of 65536 bytes") {
		t.Errorf("a long ack line: %d %s %q", r.status, r.errorCode(), r.errorMessage())
	}
	r = ts.do("POST", base, `{"ack":["`+strings.Repeat("x", 60000)+`"]}`+"\n")
	if r.status != 400 || r.errorCode() != "invalid_argument" || !strings.Contains(r.errorMessage(), "malformed (a receipt has 30 characters)") {
		t.Errorf("an ack line with a receipt of 60000 characters: %d %s %q", r.status, r.errorCode(), r.errorMessage())
	}
}

// An empty body is a stream with nothing to ack: it ends at once, 200 and
// no lines, and leases nothing when nothing is visible.
func TestStreamWithAnEmptyBodyEnds(t *testing.T) {
	ts := newTestServer(t)
	ts.visible("t", 0)
	r := ts.do("POST", "/v1/topics/t/groups/g/stream", "")
	if r.status != 200 || len(r.body) != 0 || r.header.Get("Content-Type") != api.StreamContentType {
		t.Fatalf("%d %q %q", r.status, r.header.Get("Content-Type"), r.body)
	}
}

// An ack line that fails once the stream has begun is its last line, an
// error naming the problem; nothing of that line was acked.
func TestStreamEndsWithTheErrorOfABadLine(t *testing.T) {
	ts := newTestServer(t)
	ts.visible("t", 5)
	c := client.New(ts.srv.URL, client.WithRetries(0))
	s, err := c.Stream(context.Background(), "t", "g", client.StreamOptions{Max: 5, Window: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ms, err := s.Next()
	if err != nil || len(ms) != 5 {
		t.Fatalf("%d, %v", len(ms), err)
	}
	if err := s.Ack(ms[0].Receipt, ms[0].Receipt+"x"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Next()
	var e *client.Error
	if !errors.As(err, &e) || e.Code != errs.InvalidArgument || !strings.Contains(e.Message, "nothing of it acked") {
		t.Fatalf("after a bad ack line: %v", err)
	}
	if g := ts.group("t"); g.Acked != 0 {
		t.Errorf("acked %d, want 0", g.Acked)
	}
}

// Shutdown ends a stream: before anything was streamed with 503, after
// with an unavailable line.
func TestStreamEndsAtShutdown(t *testing.T) {
	ts := newTestServer(t)
	ts.visible("t", 1)
	c := client.New(ts.srv.URL, client.WithRetries(0))
	s, err := c.Stream(context.Background(), "t", "g", client.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ms, err := s.Next(); err != nil || len(ms) != 1 {
		t.Fatalf("%d, %v", len(ms), err)
	}
	ts.visible("empty", 0)
	s2, err := c.Stream(context.Background(), "empty", "g", client.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	// The second stream waits for its first line; wait until it is open
	// (its group exists) before shutting down.
	for {
		if gs, _ := ts.eng.Groups("empty"); len(gs) == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	ts.h.Drain()
	_, err = s.Next()
	var e *client.Error
	if !errors.As(err, &e) || e.Code != errs.Unavailable {
		t.Fatalf("first stream at shutdown: %v, want an unavailable line", err)
	}
	if _, err := s2.Next(); !errors.As(err, &e) || e.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("second stream at shutdown: %v, want 503", err)
	}
}

// A stream that ends on an error while the client still sends is a whole
// HTTP response (its last chunk written), with the error as its last
// line, and its connection is not used again.
func TestStreamErrorEndsAWholeResponse(t *testing.T) {
	ts := newTestServer(t)
	ts.visible("t", 1)
	pr, pw := io.Pipe()
	defer pw.Close()
	req, err := http.NewRequest("POST", ts.srv.URL+"/v1/topics/t/groups/g/stream", pr)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != api.StreamContentType {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// The batch, then a malformed line; the body stays open.
	first := make([]byte, 1)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	if _, err := pw.Write([]byte("{\"ack\": 7}\n")); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the response did not end whole: %v (read %q)", err, rest)
	}
	lines := strings.Split(strings.TrimSpace(string(first)+string(rest)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], `{"messages":[{`) ||
		!strings.Contains(lines[1], `"code":"invalid_argument"`) || !strings.Contains(lines[1], "ack line 1") {
		t.Fatalf("lines %q: want the batch, then the error", lines)
	}
	// The next request on this client works (a new connection).
	if r := ts.do("GET", "/v1/topics/t", nil); r.status != 200 {
		t.Fatalf("next request: %d %s", r.status, r.body)
	}
}

// A stream refused before it starts is answered at once, though its body
// (ack lines that may never end) is still open: the server used to read
// that body to its end first, so a streaming client saw the refusal only
// when the read timeout cut it (a minute by default; never here).
func TestStreamRefusalDoesNotWaitForTheBody(t *testing.T) {
	ts := newTestServer(t, withOptions(func(c *Options) { c.MaxStreams = 1; c.AuthToken = "" }))
	ts.visible("t", 1) // the first stream's answer starts with it
	open := func(path string) (*http.Response, *io.PipeWriter, error) {
		pr, pw := io.Pipe()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		t.Cleanup(cancel)
		context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) }) // never hang the test
		req, err := http.NewRequestWithContext(ctx, "POST", ts.srv.URL+path, pr)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := ts.srv.Client().Do(req)
		return resp, pw, err
	}
	refused := func(path string, status int) {
		t.Helper()
		resp, pw, err := open(path)
		if err != nil {
			t.Fatalf("%s: no answer while the body is open: %v", path, err)
		}
		resp.Body.Close()
		pw.Close()
		if resp.StatusCode != status {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, status)
		}
	}
	refused("/v1/topics/nope/groups/g/stream", 404)
	refused("/v1/topics/t/groups/g/stream?max=0", 400)
	first, pw, err := open("/v1/topics/t/groups/g/stream")
	if err != nil || first.StatusCode != 200 {
		t.Fatalf("first stream: %v %v", first, err)
	}
	defer pw.Close()
	defer first.Body.Close()
	refused("/v1/topics/t/groups/g/stream", 429)
}

// The same for a stream refused by the token check, before any route.
func TestStreamAuthRefusalDoesNotWaitForTheBody(t *testing.T) {
	ts := newTestServer(t, withOptions(func(c *Options) { c.AuthToken = "secret" }))
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
	req, err := http.NewRequestWithContext(ctx, "POST", ts.srv.URL+"/v1/topics/t/groups/g/stream", pr)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("no answer while the body is open: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("%d, want 401", resp.StatusCode)
	}
}
