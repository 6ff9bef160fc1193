package server

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/stream"
)

// A batch that streamDeliver takes from Next after the ack side has ended
// the stream (lineWriter.fail: done) is never written, yet it is not
// released: it stays leased, its attempt counted.
func TestStreamBatchNotWrittenIsReleased(t *testing.T) {
	ts := newTestServer(t)
	ts.visible("t", 10)
	st, err := stream.Open(ts.eng, stream.Options{Topic: "t", Group: "g", Max: 2, Window: 10})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	out := &lineWriter{h: ts.h, w: rec, rc: http.NewResponseController(rec)}
	out.done = true // as after out.fail from the ack goroutine
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts.h.streamDeliver(ctx, st, out, "")
	st.Close()
	if rec.Body.Len() != 0 {
		t.Fatalf("wrote %q", rec.Body.String())
	}
	if g := ts.group("t"); g.InFlight != 0 {
		t.Fatalf("nothing was written, yet %d messages stay leased (delivered %d)", g.InFlight, g.Delivered)
	}
}

// End to end: an ack line refused while batches are being streamed; every
// message leased and not written should be released.
func TestStreamRefusedAckLineStrandsNothing(t *testing.T) {
	ts := newTestServer(t)
	ts.visible("t", 1000)
	stranded := 0
	for i := 0; i < 10; i++ {
		group := "g" + string(rune('a'+i))
		conn := rawStream(t, ts, "/v1/topics/t/groups/"+group+"/stream?max=1&window=1000&body_encoding=text&invisible=1h")
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		rd := bufio.NewReader(resp.Body)
		if _, err := rd.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		got := 1
		io.WriteString(conn, chunk(`{"ack":["AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"]}`+"\n"))
		for {
			l, err := rd.ReadString('\n')
			if strings.Contains(l, `"receipt"`) {
				got++
			}
			if err != nil {
				break
			}
		}
		conn.Close()
		// The handler gives back what it leased and did not write before
		// it returns: wait for it to return, not for a while.
		if !ts.h.WaitStreams(10 * time.Second) {
			t.Fatalf("stream %d: its handler still runs 10 s after the connection closed", i)
		}
		g := ts.groupNamed("t", group)
		if g.InFlight != int64(got) {
			t.Logf("stream %d: client got %d messages, %d in flight", i, got, g.InFlight)
			stranded++
		}
	}
	if stranded > 0 {
		t.Fatalf("%d of 10 streams left a message leased that was never written", stranded)
	}
}
