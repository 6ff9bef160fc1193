package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/engine"
)

// The edges of a stream's exchange: how it ends, and what it leaves
// leased. Several of these drive the connection by hand (net.Dial), to
// send what Go's client does not: a half-close, broken chunking, a body
// kept open after a refusal.

// rawStream starts POST .../stream by hand with a chunked body (its
// headers only) and returns the connection.
func rawStream(t *testing.T, ts *testServer, path string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, "POST "+path+" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	return conn
}

func chunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

// A body of known length is a fixed list of acks: made and answered, and
// nothing leased, however many messages are visible.
func TestStreamFixedLengthBodyLeasesNothing(t *testing.T) {
	ts := newTestServer(t)
	ts.visible("t", 50)
	got, err := ts.eng.Receive(context.Background(), engine.ReceiveRequest{Topic: "t", Group: "g", Max: 2})
	if err != nil || len(got) != 2 {
		t.Fatalf("%d, %v", len(got), err)
	}
	body := `{"ack":["` + got[0].Receipt + `"]}` + "\n" + `{"ack":["` + got[1].Receipt + `"]}`
	r := ts.do("POST", "/v1/topics/t/groups/g/stream?max=10", body)
	if r.status != 200 || string(r.body) != "{\"messages\":[],\"acked\":1}\n{\"messages\":[],\"acked\":1}\n" {
		t.Fatalf("%d %q: want the two acks answered and nothing else", r.status, r.body)
	}
	if g := ts.group("t"); g.Acked != 2 || g.InFlight != 0 || g.Delivered != 2 {
		t.Fatalf("group %+v: want 2 acked, nothing more leased", g)
	}
}

// A client that ends its acks (CloseSend) is leased nothing more: what it
// gets after is what was on its way, and nothing is left leased that it
// did not see.
func TestStreamCloseSendStrandsNothing(t *testing.T) {
	ts := newTestServer(t)
	ts.visible("t", 100)
	c := client.New(ts.srv.URL, client.WithRetries(0))
	s, err := c.Stream(context.Background(), "t", "g", client.StreamOptions{Max: 10, Window: 10, Invisible: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ms, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ack(ids(ms)...); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	after := 0
	for {
		ms, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		after += len(ms)
	}
	if g := ts.group("t"); g.InFlight != int64(after) || g.Acked != 10 {
		t.Fatalf("group %+v after %d more arrived: want 10 acked, and in flight only what the client got", g, after)
	}
}

// A first ack line refused while the client keeps its body open: the
// answer says Connection: close, and the server does close (it does not
// wait for the rest of the body).
func TestStreamRefusedFirstLineClosesTheConnection(t *testing.T) {
	ts := newTestServer(t)
	ts.visible("t", 0)
	conn := rawStream(t, ts, "/v1/topics/t/groups/g/stream")
	if _, err := io.WriteString(conn, chunk("{\"ack\":7}\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "ack line 1") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the refusal the connection gave %v, want its end (EOF)", err)
	}
}

// A request body whose chunking is broken is refused, not taken for the
// body's end.
func TestStreamBrokenChunkingIsRefused(t *testing.T) {
	ts := newTestServer(t)
	ts.visible("t", 0)
	conn := rawStream(t, ts, "/v1/topics/t/groups/g/stream")
	io.WriteString(conn, "zz\r\n")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "could not be read") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

// A client that half-closes its connection once its body is sent still
// gets every ack line made and answered.
func TestStreamHalfCloseAfterTheBody(t *testing.T) {
	ts := newTestServer(t)
	ts.visible("t", 50)
	for i := range 5 {
		group := fmt.Sprintf("g%d", i)
		conn := rawStream(t, ts, "/v1/topics/t/groups/"+group+"/stream?max=5&window=50&body_encoding=text")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		rd := bufio.NewReader(resp.Body)
		var body strings.Builder
		for range 10 {
			l, err := rd.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			var a struct {
				Messages []struct{ Receipt string } `json:"messages"`
			}
			if err := json.Unmarshal([]byte(l), &a); err != nil || len(a.Messages) != 5 {
				t.Fatalf("line %q: %v", l, err)
			}
			rs := make([]string, len(a.Messages))
			for j, m := range a.Messages {
				rs[j] = `"` + m.Receipt + `"`
			}
			body.WriteString(chunk(`{"ack":[` + strings.Join(rs, ",") + "]}\n"))
		}
		body.WriteString("0\r\n\r\n")
		io.WriteString(conn, body.String())
		conn.(*net.TCPConn).CloseWrite()
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		rest, err := io.ReadAll(rd)
		if err != nil || strings.Count(string(rest), `"acked":5`) != 10 {
			t.Fatalf("stream %d: %v, answers %q; want 10 acks answered and a whole response", i, err, rest)
		}
		if g := ts.groupNamed("t", group); g.Acked != 50 {
			t.Fatalf("group %s acked %d, want 50", group, g.Acked)
		}
	}
}

// A stream idle for longer than the write timeout still ends whole.
func TestStreamIdleLongerThanTheWriteTimeout(t *testing.T) {
	ts := newTestServer(t)
	ts.visible("t", 1)
	cfg := ts.opts
	cfg.WriteTimeout = 200 * time.Millisecond
	h := New(ts.eng, cfg, nil, nil)
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Drain()
	c := client.New(srv.URL, client.WithRetries(0))
	s, err := c.Stream(context.Background(), "t", "g", client.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ms, err := s.Next(); err != nil || len(ms) != 1 {
		t.Fatal(len(ms), err)
	}
	// Idle on purpose, past the write timeout: there is no event to wait
	// for, the point is the time passing.
	time.Sleep(500 * time.Millisecond)
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(); err != io.EOF {
		t.Fatalf("after an idle longer than the write timeout: %v, want io.EOF", err)
	}
}
