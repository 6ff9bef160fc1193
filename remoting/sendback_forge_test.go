package remoting

import (
	"strconv"
	"testing"
)

// TestSendBackForgedOffset: a send-back names the message by the offset a
// pull handed out. A made-up offset (queue and queue offset guessed) with
// no message ID, for a message that has no UNIQ_KEY, must not copy the
// message into the sender's retry topic: the client was never given it.
func TestSendBackForgedOffset(t *testing.T) {
	b := startTest(t, nil)
	for i := 0; i < 8; i++ {
		send := &Command{Code: codeSendMessage, Body: []byte("secret"),
			ExtFields: map[string]string{"producerGroup": "p", "topic": "orders", "queueId": strconv.Itoa(i % 4)}}
		if resp := b.request(t, send); resp.Code != respSuccess {
			t.Fatalf("send: %d %q", resp.Code, resp.Remark)
		}
	}
	for q := 0; q < 4; q++ {
		for off := uint64(0); off < 3; off++ {
			guess := int64(uint64(q)<<48 | off)
			for _, origin := range []string{"orders", ""} {
				back := &Command{Code: codeConsumerSendMsgBack, ExtFields: map[string]string{"group": "thief",
					"offset": strconv.FormatInt(guess, 10), "originTopic": origin, "maxReconsumeTimes": "16"}}
				if resp := b.request(t, back); resp.Code == respSuccess {
					t.Fatalf("a guessed offset %d (queue %d, offset %d) in %q was sent back", guess, q, off, origin)
				}
			}
		}
	}
	// A handle given out for one topic does not name a message of another.
	other := &Command{Code: codeSendMessage, Body: []byte("other"),
		ExtFields: map[string]string{"producerGroup": "p", "topic": "ledger", "queueId": "0"}}
	if resp := b.request(t, other); resp.Code != respSuccess {
		t.Fatalf("send: %d %q", resp.Code, resp.Remark)
	}
	given := b.srv.commitHandle("orders", 0, 0)
	back := &Command{Code: codeConsumerSendMsgBack, ExtFields: map[string]string{"group": "thief",
		"offset": strconv.FormatInt(given, 10), "originTopic": "ledger", "maxReconsumeTimes": "16"}}
	if resp := b.request(t, back); resp.Code == respSuccess {
		t.Fatal("a handle of topic orders named a message of topic ledger")
	}
	if st, err := b.eng.DescribeTopic("%RETRY%thief"); err == nil && st.Sent != 0 {
		t.Fatalf("%%RETRY%%thief holds %d messages a client was never given", st.Sent)
	}
}

// TestOffsetUpdateUnknownQueue: a consumer offset for a topic that does
// not exist, or a queue the topic does not have, is refused with an error
// and not kept; one for a real queue is.
func TestOffsetUpdateUnknownQueue(t *testing.T) {
	b := startTest(t, nil)
	send := &Command{Code: codeSendMessage, Body: []byte("x"),
		ExtFields: map[string]string{"producerGroup": "p", "topic": "orders", "queueId": "0"}}
	if resp := b.request(t, send); resp.Code != respSuccess {
		t.Fatalf("send: %d %q", resp.Code, resp.Remark)
	}
	update := func(topic, queue string) *Command {
		return b.request(t, &Command{Code: codeUpdateConsumerOffset, ExtFields: map[string]string{
			"consumerGroup": "g", "topic": topic, "queueId": queue, "commitOffset": "7"}})
	}
	query := func(topic, queue string) *Command {
		return b.request(t, &Command{Code: codeQueryConsumerOffset, ExtFields: map[string]string{
			"consumerGroup": "g", "topic": topic, "queueId": queue, "setZeroIfNotFound": "false"}})
	}
	for _, c := range [][2]string{{"nosuchtopic", "0"}, {"orders", "4"}, {"orders", "65536"}} {
		if resp := update(c[0], c[1]); resp.Code == respSuccess || resp.Remark == "" {
			t.Errorf("offset update for %s queue %s: %d %q, want an error", c[0], c[1], resp.Code, resp.Remark)
		}
		if resp := query(c[0], c[1]); resp.Code == respSuccess {
			t.Errorf("offset of %s queue %s was kept: %v", c[0], c[1], resp.ExtFields)
		}
	}
	if resp := update("orders", "3"); resp.Code != respSuccess {
		t.Fatalf("offset update for a real queue: %d %q", resp.Code, resp.Remark)
	}
	if resp := query("orders", "3"); resp.Code != respSuccess || resp.ExtFields["offset"] != "7" {
		t.Fatalf("offset of a real queue: %d %v", resp.Code, resp.ExtFields)
	}
}
