package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The acks are answered first; then, while batches of a new lease are
// being written (max=1, many ahead), the client ends its body and
// half-closes (every other stream). Every message it did not get is
// released, and the response ends whole.
func TestStreamEndOfBodyWhileWritingLosesNoLine(t *testing.T) {
	ts := newTestServer(t)
	ts.visible("t", 1000)
	bad := 0
	for i := 0; i < 30; i++ {
		group := fmt.Sprintf("e%d", i)
		conn := rawStream(t, ts, "/v1/topics/t/groups/"+group+"/stream?max=1&window=300&body_encoding=text&invisible=1h")
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		rd := bufio.NewReader(resp.Body)
		got, acked, answers := 0, 0, 0
		var body strings.Builder
		for got < 300 {
			l, err := rd.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			var a struct {
				Messages []struct{ Receipt string } `json:"messages"`
			}
			json.Unmarshal([]byte(l), &a)
			for _, m := range a.Messages {
				got++
				body.WriteString(chunk(`{"ack":["` + m.Receipt + `"]}` + "\n"))
				acked++
			}
		}
		io.WriteString(conn, body.String())
		// wait for all answers, counting batches meanwhile
		for answers < acked {
			l, err := rd.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(l, `"acked":1`) {
				answers++
			}
			got += strings.Count(l, `"receipt"`)
		}
		// a few more batches of the new lease, then end the body
		for k := 0; k < 3 && got < 590; k++ {
			l, _ := rd.ReadString('\n')
			got += strings.Count(l, `"receipt"`)
		}
		io.WriteString(conn, "0\r\n\r\n")
		if i%2 == 0 {
			conn.(*net.TCPConn).CloseWrite()
		}
		conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		rest, err := io.ReadAll(rd)
		if err != nil {
			t.Logf("stream %d: the response did not end whole: %v; tail %q", i, err, tailOf(string(rest), 300))
			bad++
		}
		got += strings.Count(string(rest), `"receipt"`)
		conn.Close()
		// What the broker released goes back once the handler has
		// finished: wait for the count to settle on what the client got.
		deadline := time.Now().Add(5 * time.Second)
		for ts.groupNamed("t", group).InFlight != int64(got-acked) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if g := ts.groupNamed("t", group); g.InFlight != int64(got-acked) {
			t.Logf("stream %d: got %d, acked %d, in flight %d (should be %d)", i, got, acked, g.InFlight, got-acked)
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of 30 streams left leased a message the client never got", bad)
	}
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
