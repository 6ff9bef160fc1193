package remoting

import (
	"bytes"
	"encoding/binary"
	"net"
	"strconv"
	"testing"
	"time"
)

// TestPullBoundedBytes: a pull over large messages answers with at most
// maxPullBytes of them (one larger message alone), not maxMsgNums of
// them: a RocketMQ client refuses a frame over 16 MiB, and a connection's
// memory is bounded. Every message is still pulled once, in order.
func TestPullBoundedBytes(t *testing.T) {
	b := startTest(t, nil)
	const n, size = 12, 1 << 20
	for i := 0; i < n; i++ {
		body := bytes.Repeat([]byte{byte('a' + i)}, size)
		send := &Command{Code: codeSendMessage, Body: body,
			ExtFields: map[string]string{"producerGroup": "p", "topic": "big", "queueId": "0"}}
		if resp := b.request(t, send); resp.Code != respSuccess {
			t.Fatalf("send: %d %q", resp.Code, resp.Remark)
		}
	}
	q := queueHolding(t, b.eng, b.srv, "big", n)
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	big := Limits{MaxFrame: 1 << 30, MaxHeader: 64 << 10, MaxExtFields: 64}
	var got []uint64
	for off := int64(0); off < n; {
		req := &Command{Code: codePullMessage, Opaque: 7, ExtFields: map[string]string{"consumerGroup": "g", "topic": "big",
			"queueId": strconv.Itoa(q), "queueOffset": strconv.FormatInt(off, 10), "maxMsgNums": "32", "sysFlag": "0"}}
		out, _ := req.encode()
		if _, err := nc.Write(out); err != nil {
			t.Fatal(err)
		}
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf, err := readFrame(nc, big)
		if err != nil {
			t.Fatal(err)
		}
		if len(buf) > maxPullBytes+size+64<<10 {
			t.Fatalf("a pull answered %d bytes; the bound is %d and one message", len(buf), maxPullBytes)
		}
		resp, err := decodeFrame(buf, big)
		if err != nil || resp.Code != respSuccess {
			t.Fatalf("pull at %d: %v %+v", off, err, resp)
		}
		for body := resp.Body; len(body) > 0; {
			sz := int(binary.BigEndian.Uint32(body))
			got = append(got, binary.BigEndian.Uint64(body[20:]))
			body = body[sz:]
		}
		next, _ := strconv.ParseInt(resp.ExtFields["nextBeginOffset"], 10, 64)
		if next != int64(len(got)) {
			t.Fatalf("nextBeginOffset %d after %d messages", next, len(got))
		}
		off = next
	}
	for i, o := range got {
		if o != uint64(i) {
			t.Fatalf("pulled offsets %v, want 0 to %d once each", got, n-1)
		}
	}
}
