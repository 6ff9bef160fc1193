package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/message"
)

// dialStream opens a stream on srvURL by hand with the given request head
// and first body bytes, and returns the connection.
func dialStream(t *testing.T, srvURL, head, body string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srvURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	io.WriteString(conn, "POST /v1/topics/t/groups/g/stream HTTP/1.1\r\nHost: x\r\n"+head+"\r\n"+body)
	return conn
}

// At -max-streams a further stream is refused with resource_exhausted;
// once one ends, a stream opens again.
func TestStreamLimit(t *testing.T) {
	ts := newTestServer(t, withOptions(func(c *Options) { c.MaxStreams = 1 }))
	ts.visible("t", 0)
	conn := dialStream(t, ts.srv.URL, "Transfer-Encoding: chunked\r\n", "")
	deadline := time.Now().Add(10 * time.Second)
	for len(ts.h.streams) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the first stream never started")
		}
		time.Sleep(time.Millisecond)
	}
	r := ts.do("POST", "/v1/topics/t/groups/g/stream", "")
	if r.status != 429 || r.errorCode() != "resource_exhausted" || !strings.Contains(r.errorMessage(), "the limit is 1 (-max-streams)") {
		t.Fatalf("a second stream at the limit: %d %s %q", r.status, r.errorCode(), r.errorMessage())
	}
	conn.Close()
	if !ts.h.WaitStreams(10 * time.Second) {
		t.Fatal("the first stream's handler did not end with its connection")
	}
	if r := ts.do("POST", "/v1/topics/t/groups/g/stream", ""); r.status != 200 {
		t.Fatalf("a stream after the first ended: %d %q", r.status, r.body)
	}
}

// A stream's body of known length is read as any request body: within
// the read timeout (a client that stops half way is cut off, as a POST
// .../ack would be), and no longer once the broker drains. Only a chunked
// stream may idle.
func TestStreamFixedLengthBodyKeepsTheReadTimeout(t *testing.T) {
	for _, how := range []string{"read timeout", "drain"} {
		t.Run(how, func(t *testing.T) {
			ts := newTestServer(t)
			ts.visible("t", 0)
			cfg := ts.opts
			cfg.ReadTimeout = time.Hour
			if how == "read timeout" {
				cfg.ReadTimeout = 300 * time.Millisecond
			}
			srv := httptest.NewUnstartedServer(ts.h)
			srv.Config = NewHTTPServer(ts.h, cfg, ts.h.log)
			srv.Start()
			defer srv.Close()
			conn := dialStream(t, srv.URL, "Content-Length: 100000\r\n", `{"ack":[`)
			if how == "drain" {
				deadline := time.Now().Add(10 * time.Second)
				for len(ts.h.streams) != 1 {
					if time.Now().After(deadline) {
						t.Fatal("the stream never started")
					}
					time.Sleep(time.Millisecond)
				}
				ts.h.Drain()
			}
			conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer to a half-sent body of known length (%s): %v", how, err)
			}
			b, _ := io.ReadAll(resp.Body)
			want, says := 400, "did not arrive within -read-timeout"
			if how == "drain" {
				want, says = 503, "shutting down"
			}
			if resp.StatusCode != want || !strings.Contains(string(b), says) {
				t.Fatalf("a half-sent body of known length (%s): %d %q; want %d saying %q", how, resp.StatusCode, b, want, says)
			}
			if !ts.h.WaitStreams(10 * time.Second) {
				t.Fatal("the stream's handler still runs")
			}
		})
	}
}

// A client whose http.Client has a Timeout (as WithHTTPClient allows for
// long polls) still keeps a stream open past it: the timeout covers a
// whole response, and a stream is one response for as long as it lasts.
func TestClientStreamOutlivesTheHTTPClientTimeout(t *testing.T) {
	ts := newTestServer(t)
	ts.visible("t", 0)
	c := client.New(ts.srv.URL, client.WithRetries(0), client.WithHTTPClient(&http.Client{Timeout: 200 * time.Millisecond}))
	s, err := c.Stream(context.Background(), "t", "g", client.StreamOptions{Max: 1, Window: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	time.Sleep(500 * time.Millisecond) // past the client's Timeout
	if _, err := ts.eng.Send(context.Background(), message.Message{Topic: "t", Body: []byte("late")}, message.When{}); err != nil {
		t.Fatal(err)
	}
	ms, err := s.Next()
	if err != nil || len(ms) != 1 || string(ms[0].Body) != "late" {
		t.Fatalf("a stream past the HTTP client's timeout: %d %v", len(ms), err)
	}
}

// The ack queue holds at most queuedReceipts receipts (a line always fits
// an empty queue); the reader waits for the acker's give, or its end.
func TestAckQueueBoundsReceipts(t *testing.T) {
	q := &ackQueue{freed: make(chan struct{}, 1)}
	ctx := context.Background()
	if !q.take(ctx, queuedReceipts) {
		t.Fatal("a full budget's line did not fit an empty queue")
	}
	ended, stop := context.WithCancel(ctx)
	stop()
	if q.take(ended, 1) {
		t.Fatal("a receipt beyond the budget was queued")
	}
	got := make(chan bool)
	go func() { got <- q.take(ctx, 1000) }()
	q.give()
	select {
	case ok := <-got:
		if !ok || q.n != 1000 {
			t.Fatalf("after the give: %v, %d queued", ok, q.n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reader never saw the give")
	}
	q2 := &ackQueue{freed: make(chan struct{}, 1)}
	if !q2.take(ctx, queuedReceipts+5) {
		t.Fatal("a line larger than the budget did not fit an empty queue")
	}
}
