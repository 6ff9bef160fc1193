package remoting

import (
	"bytes"
	"net"
	"strconv"
	"testing"
	"time"
)

// TestSearchesHoldAnswerTokens: a search by time reads whole messages
// (up to the largest size each) at every step, and an earliest-time query
// one: a connection's searches in flight read with a token of its answers
// held, at most maxPullsAnswering at once, however many it pipelines.
func TestSearchesHoldAnswerTokens(t *testing.T) {
	b := startTest(t, nil)
	for i := 0; i < 8; i++ {
		send := &Command{Code: codeSendMessage, Body: bytes.Repeat([]byte{'x'}, 256<<10),
			ExtFields: map[string]string{"producerGroup": "p", "topic": "big", "queueId": "0"}}
		if resp := b.request(t, send); resp.Code != respSuccess {
			t.Fatalf("send: %d %q", resp.Code, resp.Remark)
		}
	}
	queueHolding(t, b.eng, b.srv, "big", 8) // visible, so searches read messages
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const n = 64
	for i := 0; i < n; i++ {
		code, ext := int32(codeSearchOffsetByTime), map[string]string{"topic": "big", "queueId": "0", "timestamp": strconv.FormatInt(time.Now().UnixMilli(), 10)}
		if i%2 == 1 {
			code, ext = codeGetEarliestMsgTime, map[string]string{"topic": "big", "queueId": "0"}
		}
		out, _ := (&Command{Code: code, Opaque: int32(i + 1), ExtFields: ext}).encode()
		if _, err := nc.Write(out); err != nil {
			t.Fatal(err)
		}
	}
	nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	for got := 0; got < n; {
		buf, err := readFrame(nc, testLimits)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := decodeFrame(buf, testLimits)
		if err != nil {
			t.Fatal(err)
		}
		if resp.isResponse() {
			if resp.Code != respSuccess {
				t.Fatalf("search %d: %d %q", resp.Opaque, resp.Code, resp.Remark)
			}
			got++
		}
	}
	var sc *conn
	b.srv.mu.Lock()
	for c := range b.srv.conns {
		sc = c
	}
	b.srv.mu.Unlock()
	if m := sc.heldMax.Load(); m < 1 || m > maxPullsAnswering {
		t.Fatalf("%d searches read at once, want 1 to %d", m, maxPullsAnswering)
	}
	if n := len(sc.answering); n != 0 {
		t.Fatalf("%d answer tokens held after every search was answered", n)
	}
}
