package remoting

import (
	"bytes"
	"net"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestUnreadPullsBounded: a client that sends many pulls over large
// messages and reads none of the answers does not make the broker build
// all of them: at most maxPullsAnswering answers are held, and the heap
// grows by about that many, not by one per pull.
func TestUnreadPullsBounded(t *testing.T) {
	b := startTest(t, nil)
	const msgs, size, pulls = 4, 2 << 20, 64
	for i := 0; i < msgs; i++ {
		send := &Command{Code: codeSendMessage, Body: bytes.Repeat([]byte{'x'}, size),
			ExtFields: map[string]string{"producerGroup": "p", "topic": "big", "queueId": "0"}}
		if resp := b.request(t, send); resp.Code != respSuccess {
			t.Fatalf("send: %d %q", resp.Code, resp.Remark)
		}
	}
	q := queueHolding(t, b.eng, b.srv, "big", msgs)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.(*net.TCPConn).SetReadBuffer(4 << 10)
	for i := 0; i < pulls; i++ {
		req := &Command{Code: codePullMessage, Opaque: int32(i), ExtFields: map[string]string{"consumerGroup": "g", "topic": "big",
			"queueId": strconv.Itoa(q), "queueOffset": strconv.Itoa(i % msgs), "maxMsgNums": "1", "sysFlag": "0"}}
		out, _ := req.encode()
		if _, err := nc.Write(out); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until every pull was dispatched and the answers' tokens are all
	// held (the socket is full, so the answers wait to be written).
	var sc *conn
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b.srv.mu.Lock()
		for c := range b.srv.conns {
			sc = c
		}
		b.srv.mu.Unlock()
		if b.srv.Requests(codePullMessage) == pulls && sc != nil && len(sc.answering) == maxPullsAnswering {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pulls dispatched; %d answers held", b.srv.Requests(codePullMessage), len(sc.answering))
		}
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// Held: 4 answers and what their reads hold, about 16 MiB, against
	// 128 MiB for an answer per pull.
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 24*size {
		t.Fatalf("the heap grew by %d MiB for %d unread pulls of %d MiB answers", grew>>20, pulls, size>>20)
	}
	if m := sc.heldMax.Load(); m > maxPullsAnswering {
		t.Fatalf("%d pull answers held at once, the bound is %d", m, maxPullsAnswering)
	}
}

// TestUnreadViewsBounded: views of a large message by ID that the client
// does not read hold at most maxPullsAnswering answers too.
func TestUnreadViewsBounded(t *testing.T) {
	b := startTest(t, nil)
	const size, views = 2 << 20, 64
	send := &Command{Code: codeSendMessage, Body: bytes.Repeat([]byte{'x'}, size),
		ExtFields: map[string]string{"producerGroup": "p", "topic": "big", "queueId": "0"}}
	resp := b.request(t, send)
	if resp.Code != respSuccess {
		t.Fatalf("send: %d %q", resp.Code, resp.Remark)
	}
	h, ok := handleOf(resp.ExtFields["msgId"])
	if !ok {
		t.Fatalf("msgId %q is not an offset message ID", resp.ExtFields["msgId"])
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.(*net.TCPConn).SetReadBuffer(4 << 10)
	for i := 0; i < views; i++ {
		req := &Command{Code: codeViewMessageByID, Opaque: int32(i),
			ExtFields: map[string]string{"offset": strconv.FormatInt(int64(h), 10)}}
		out, _ := req.encode()
		if _, err := nc.Write(out); err != nil {
			t.Fatal(err)
		}
	}
	var sc *conn
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		b.srv.mu.Lock()
		for c := range b.srv.conns {
			sc = c
		}
		b.srv.mu.Unlock()
		if b.srv.Requests(codeViewMessageByID) == views && sc != nil && len(sc.answering) == maxPullsAnswering {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d views dispatched; %d answers held", b.srv.Requests(codeViewMessageByID), len(sc.answering))
		}
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// Held: 4 answers, each with its message read, peeked, encoded and
	// framed (about 8 MiB), against over 300 MiB for an answer per view.
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 40*size {
		t.Fatalf("the heap grew by %d MiB for %d unread views of a %d MiB message", grew>>20, views, size>>20)
	}
}
