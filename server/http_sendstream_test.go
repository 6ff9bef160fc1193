package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// Many goroutines share one send stream: every message is stored, and
// each Send gets the receipt of its own message (the answers come back in
// the order of the lines, and the client hands them out in that order).
func TestSendStreamAnswersEachSendWithItsReceipt(t *testing.T) {
	ts := newTestServer(t)
	c := client.New(ts.srv.URL, client.WithRetries(0))
	s, err := c.SendStream(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	const senders, each = 16, 25
	var wg sync.WaitGroup
	errc := make(chan error, senders*each)
	for g := range senders {
		wg.Go(func() {
			for i := range each {
				key := fmt.Sprintf("k-%d-%d", g, i)
				rc, err := s.Send(context.Background(), client.Message{Key: key, Body: []byte(key), When: client.After(3600e9)})
				if err != nil {
					errc <- err
					return
				}
				id, err := message.ParseID(rc.ID)
				if err != nil {
					errc <- err
					return
				}
				info, err := ts.eng.Inspect(id)
				if err != nil || info.Key != key || rc.Topic != "orders" {
					errc <- fmt.Errorf("send of %s: receipt %+v names %+v (%v)", key, rc, info, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if st, err := ts.eng.DescribeTopic("orders"); err != nil || st.Pending != senders*each {
		t.Fatalf("topic %+v (%v), want %d pending", st, err, senders*each)
	}
	if _, err := s.Send(context.Background(), client.Message{Body: []byte("x")}); err == nil {
		t.Fatal("Send after Close succeeded")
	}
}

// postSendStream posts body (a fixed list of lines) to the send stream
// of topic and returns the status and the answer lines.
func postSendStream(t *testing.T, ts *testServer, topic, body string) (int, []string) {
	t.Helper()
	resp, err := http.Post(ts.srv.URL+"/v1/topics/"+topic+"/stream", api.StreamContentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return resp.StatusCode, lines
}

// A line that is not a valid message is refused, that message only, with
// the same error POST .../messages gives and its line number; the lines
// around it are stored and the stream ends cleanly.
func TestSendStreamRefusesABadLineAndGoesOn(t *testing.T) {
	ts := newTestServer(t)
	body := `{"body":"one"}` + "\n" +
		`{"body":` + "\n" +
		"\n" +
		`{"body":"x","bogus":1}` + "\n" +
		`{"body":"x","delay":"soon"}` + "\n" +
		`{"body":"two","key":"k2"}` + "\n"
	code, lines := postSendStream(t, ts, "t", body)
	if code != 200 || len(lines) != 5 {
		t.Fatalf("status %d, %d lines, want 200 and 5: %q", code, len(lines), lines)
	}
	var answers []api.SendStreamAnswer
	for _, l := range lines {
		var a api.SendStreamAnswer
		if err := json.Unmarshal([]byte(l), &a); err != nil || (a.Receipt == nil) == (a.Refused == nil) {
			t.Fatalf("answer %q: want exactly one of receipt and refused (%v)", l, err)
		}
		answers = append(answers, a)
	}
	for i, want := range []string{"", "line 2: request body is not valid JSON", "line 3: unknown field \"bogus\"", "line 4: ", ""} {
		a := answers[i]
		switch {
		case want == "" && a.Receipt == nil:
			t.Errorf("answer %d: %+v, want a receipt", i+1, a.Refused)
		case want != "" && (a.Refused == nil || a.Refused.Code != errs.InvalidArgument || !strings.HasPrefix(a.Refused.Message, want)):
			t.Errorf("answer %d: %+v %+v, want invalid_argument starting %q", i+1, a.Receipt, a.Refused, want)
		}
	}
	if st, err := ts.eng.DescribeTopic("t"); err != nil || st.Visible+uint64(st.Pending) != 2 {
		t.Fatalf("topic %+v (%v), want the 2 good messages stored", st, err)
	}
	if _, err := ts.eng.InspectKey("t", "k2"); err != nil {
		t.Fatalf("the message after the bad lines was not stored: %v", err)
	}
}

// A line longer than -max-request-bytes ends the stream: the lines before
// it are answered, the last line is the too_large error, and nothing
// after it is read or stored.
func TestSendStreamEndsAtATooLongLine(t *testing.T) {
	ts := newTestServer(t, withOptions(func(o *Options) { o.MaxRequestBytes = 1024 }))
	body := `{"body":"first","key":"a"}` + "\n" +
		`{"body":"` + strings.Repeat("x", 2000) + `"}` + "\n" +
		`{"body":"after","key":"b"}` + "\n"
	code, lines := postSendStream(t, ts, "t", body)
	if code != 200 || len(lines) != 2 {
		t.Fatalf("status %d, lines %q: want 200, a receipt and the error", code, lines)
	}
	var end api.Error
	if err := json.Unmarshal([]byte(lines[1]), &end); err != nil || end.Error.Code != errs.TooLarge {
		t.Fatalf("last line %q, want a too_large error", lines[1])
	}
	if _, err := ts.eng.InspectKey("t", "a"); err != nil {
		t.Errorf("the line before was not stored: %v", err)
	}
	if _, err := ts.eng.InspectKey("t", "b"); err == nil {
		t.Error("a line after the too-long one was stored")
	}
}

// The receipt comes only after the commit log's fdatasync: when it fails,
// the message is refused (unavailable), never answered with a receipt.
func TestSendStreamAnswersAfterFdatasync(t *testing.T) {
	ff := vfs.NewFaulty(vfs.NewMem())
	cfg := DefaultOptions()
	cfg.DataDir = "/data"
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	eo := serveEngineOptions(cfg.DataDir, logger)
	eo.FS = ff
	eng, err := engine.Open(eo)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close() // fails: the engine stopped on the failed fsync
	srv := httptest.NewServer(New(eng, cfg, logger, nil))
	defer srv.Close()
	ff.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpSync && strings.Contains(name, "log") {
			return syscall.EIO
		}
		return nil
	})
	c := client.New(srv.URL, client.WithRetries(0))
	s, err := c.SendStream(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := s.Send(context.Background(), client.Message{Body: []byte("x")})
	if !client.IsUnavailable(err) {
		t.Fatalf("send with a failing fdatasync: receipt %+v, err %v; want unavailable", rc, err)
	}
	s.Close()
}

// The stream takes no query parameters: one is refused, as any
// request's unknown parameter, before anything is read.
func TestSendStreamRefusesQueryParameters(t *testing.T) {
	ts := newTestServer(t)
	resp, err := http.Post(ts.srv.URL+"/v1/topics/t/stream?max=3", api.StreamContentType, strings.NewReader(`{"body":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "max") {
		t.Fatalf("a query parameter: %d %s, want 400 naming it", resp.StatusCode, b)
	}
	if st, err := ts.eng.DescribeTopic("t"); err == nil && st.Pending+int64(st.Visible) != 0 {
		t.Fatalf("a refused stream stored %+v", st)
	}
}

// The broker's shutdown ends a send stream: the sends answered before
// stay stored, and the stream's last line is unavailable, which the sends
// after it get.
func TestSendStreamEndsAtShutdown(t *testing.T) {
	ts := newTestServer(t)
	c := client.New(ts.srv.URL, client.WithRetries(0))
	s, err := c.SendStream(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(context.Background(), client.Message{Key: "before", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	ts.h.Drain()
	if err := s.Close(); !client.IsUnavailable(err) {
		t.Fatalf("Close after the broker drained: %v, want unavailable", err)
	}
	if _, err := s.Send(context.Background(), client.Message{Body: []byte("x")}); !client.IsUnavailable(err) {
		t.Fatalf("Send after the stream ended: %v, want its unavailable", err)
	}
	if _, err := ts.eng.InspectKey("t", "before"); err != nil {
		t.Fatalf("the send answered before the shutdown is gone: %v", err)
	}
}

// Send streams count toward -max-streams with the receive streams: one
// beyond the limit is refused with 429 before anything is read, and the
// limit frees when a stream ends.
func TestSendStreamCountsTowardMaxStreams(t *testing.T) {
	ts := newTestServer(t, withOptions(func(o *Options) { o.MaxStreams = 1 }))
	c := client.New(ts.srv.URL, client.WithRetries(0))
	s, err := c.SendStream(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(context.Background(), client.Message{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	code, lines := postSendStream(t, ts, "t", `{"body":"y"}`+"\n")
	if code != http.StatusTooManyRequests || len(lines) != 1 || !strings.Contains(lines[0], "resource_exhausted") {
		t.Fatalf("a second stream over the limit: %d %q, want 429 resource_exhausted", code, lines)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The first stream's handler gives its token back as it returns,
	// which may come just after Close: wait for it (WaitStreams).
	if !ts.h.WaitStreams(5 * time.Second) {
		t.Fatal("the stream's token was not given back")
	}
	if code, lines := postSendStream(t, ts, "t", `{"body":"y"}`+"\n"); code != 200 || len(lines) != 1 || !strings.Contains(lines[0], `"receipt"`) {
		t.Fatalf("a stream after the first ended: %d %q", code, lines)
	}
}
