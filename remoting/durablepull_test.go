package remoting

import (
	"encoding/binary"
	"testing"
)

// TestPullHandsOutNothingPastDurableLen (engine invariant E21): a pull
// answers no queue entry at or past the durable length it took
// (durableLen), even when the queue has grown since: those entries' fire
// records may not be durable yet, and a client that kept the next offset
// past one that a power loss takes back would skip the message that
// recovery fires again at that offset. Here the queue holds 3 entries and
// the pull read its bound as 1, as when two fires were applied between
// durableLen and the read.
func TestPullHandsOutNothingPastDurableLen(t *testing.T) {
	b := startTest(t, nil)
	const n = 3
	for i := 0; i < n; i++ {
		send := &Command{Code: codeSendMessage, Body: []byte{byte('a' + i)},
			ExtFields: map[string]string{"producerGroup": "p", "topic": "d", "queueId": "0"}}
		if resp := b.request(t, send); resp.Code != respSuccess {
			t.Fatalf("send: %d %q", resp.Code, resp.Remark)
		}
	}
	q := queueHolding(t, b.eng, b.srv, "d", n)
	const maxOff = 1
	c := &conn{local: "127.0.0.1:10911"}
	p := pullRequest{group: "g", topic: "d", queue: q, offset: 0, max: 32}
	body, matched, next, err := b.srv.readPull(c, p, "", maxOff)
	if err != nil {
		t.Fatal(err)
	}
	if next > maxOff {
		t.Errorf("next offset %d is past the durable length %d", next, maxOff)
	}
	var offs []int64
	for len(body) > 0 {
		sz := int(binary.BigEndian.Uint32(body))
		offs = append(offs, int64(binary.BigEndian.Uint64(body[20:])))
		body = body[sz:]
	}
	if matched != maxOff || len(offs) != maxOff {
		t.Errorf("answered %d messages (offsets %v), want the %d before the durable length", matched, offs, maxOff)
	}
	for _, off := range offs {
		if off >= maxOff {
			t.Errorf("answered queue offset %d, at or past the durable length %d", off, maxOff)
		}
	}
}
