package remoting

import (
	"encoding/binary"
	"encoding/json"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNoGoroutineLeft: connections that sent malformed frames, stopped
// inside a frame, held long polls, heartbeated (notices to their group),
// locked queues or sent nothing at all leave no goroutine behind once
// they are closed: the broker's goroutines come back to what they were.
func TestNoGoroutineLeft(t *testing.T) {
	b := startTest(t, func(o *Options) { o.MaxLongPoll = 500 * time.Millisecond })
	if resp := b.request(t, &Command{Code: codeSendMessage, Body: []byte("x"),
		ExtFields: map[string]string{"topic": "orders", "queueId": "0"}}); resp.Code != respSuccess {
		t.Fatalf("send: %d %q", resp.Code, resp.Remark)
	}
	// settle counts the goroutines that serve a connection (its reader,
	// handlers and notices): those of other tests' clients come and go.
	settle := func() int {
		buf := make([]byte, 4<<20)
		n := 0
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "hourglass/remoting.(*conn)") {
				n++
			}
		}
		return n
	}
	base := settle()
	var conns []net.Conn
	dial := func() net.Conn {
		nc, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
		return nc
	}
	for i := 0; i < 10; i++ {
		dial().Write(binary.BigEndian.AppendUint32(nil, 0xFFFFFFFF)) // malformed
		dial().Write([]byte{0, 0, 1, 0, 0})                          // inside a frame
		dial()                                                       // silent
		nc := dial()
		for q := 0; q < 4; q++ { // long polls at the end of each queue
			end := strconv.FormatUint(b.srv.queueLen("orders", q), 10)
			out, _ := (&Command{Code: codePullMessage, Opaque: int32(q + 1), ExtFields: map[string]string{"consumerGroup": "g",
				"topic": "orders", "queueId": strconv.Itoa(q), "queueOffset": end, "maxMsgNums": "32",
				"sysFlag": strconv.Itoa(pullSuspend), "suspendTimeoutMillis": "30000"}}).encode()
			nc.Write(out)
		}
		nc = dial()
		hb, _ := json.Marshal(map[string]any{"clientID": "c" + strconv.Itoa(i), "consumerDataSet": []map[string]any{{"groupName": "g",
			"messageModel": "CLUSTERING", "subscriptionDataSet": []map[string]string{{"topic": "orders", "subString": "*"}}}}})
		exchange(t, nc, &Command{Code: codeHeartBeat, Body: hb})
		body, _ := json.Marshal(lockBody{ConsumerGroup: "g", ClientID: "c" + strconv.Itoa(i), MQSet: []mqRef{{Topic: "orders", QueueID: i % 4}}})
		exchange(t, nc, &Command{Code: codeLockBatchMQ, Body: body})
	}
	for deadline := time.Now().Add(10 * time.Second); b.srv.Requests(codePullMessage) < 40; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 40 long polls dispatched", b.srv.Requests(codePullMessage))
		}
	}
	if n := settle(); n < base+40 {
		t.Fatalf("%d goroutines with 40 long polls held, %d before", n, base)
	}
	for _, nc := range conns {
		nc.Close()
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n := settle()
		b.srv.mu.Lock()
		open := len(b.srv.conns)
		b.srv.mu.Unlock()
		if n <= base && open == 0 {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines and %d connections after every connection closed, %d before:\n%s",
				n, open, base, buf[:runtime.Stack(buf, true)])
		}
	}
	if n := b.srv.locks.size(); n != 0 {
		t.Fatalf("%d queue locks left by closed connections", n)
	}
	if m := b.srv.clients.members("g"); len(m) != 0 {
		t.Fatalf("members %v left by closed connections", m)
	}
}
