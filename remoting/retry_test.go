package remoting

import (
	"strconv"
	"testing"
)

// TestRetryStoredOnce: a consumer whose send-back was answered late sends
// the message back again as a normal message to %RETRY%<group>; the
// broker keeps the first copy and answers the second OK, so the retry is
// delivered once.
func TestRetryStoredOnce(t *testing.T) {
	b := startTest(t, nil)
	props := formatProperties(map[string]string{propUniqKey: "0A0000010000ABCD0000000000000001", propKeys: "k"})
	send := &Command{Code: codeSendMessage, Body: []byte("body"),
		ExtFields: map[string]string{"producerGroup": "p", "topic": "orders", "queueId": "0", "properties": props}}
	if resp := b.request(t, send); resp.Code != respSuccess {
		t.Fatalf("send: %d %q", resp.Code, resp.Remark)
	}
	var q int
	var off uint64
	for {
		signal := b.eng.VisibleSignal()
		found := false
		for q = 0; q < 4; q++ {
			if vs, _ := b.eng.ReadQueue("orders", q, 0, 1); len(vs) == 1 {
				off, found = vs[0].Offset, true
				break
			}
		}
		if found {
			break
		}
		<-signal
	}
	back := &Command{Code: codeConsumerSendMsgBack, ExtFields: map[string]string{"group": "billing",
		"offset": strconv.FormatInt(b.srv.commitHandle("orders", q, off), 10), "delayLevel": "0",
		"originMsgId": "0A0000010000ABCD0000000000000001", "originTopic": "orders", "maxReconsumeTimes": "16"}}
	if resp := b.request(t, back); resp.Code != respSuccess {
		t.Fatalf("send-back: %d %q", resp.Code, resp.Remark)
	}
	// The client's fallback: the consumed message's properties and some
	// of its own, the reconsume count in the header.
	fallback := formatProperties(map[string]string{propUniqKey: "0A0000010000ABCD0000000000000001", propKeys: "k",
		propRetryTopic: "orders", propOriginMsgID: "0A0000010000ABCD0000000000000001", propDelay: "3", "CONSUME_START_TIME": "1"})
	again := &Command{Code: codeSendMessage, Body: []byte("body"), ExtFields: map[string]string{"producerGroup": "CLIENT_INNER_PRODUCER",
		"topic": "%RETRY%billing", "queueId": "0", "properties": fallback, "reconsumeTimes": "1", "maxReconsumeTimes": "16"}}
	if resp := b.request(t, again); resp.Code != respSuccess {
		t.Fatalf("fallback send: %d %q", resp.Code, resp.Remark)
	}
	st, err := b.eng.DescribeTopic("%RETRY%billing")
	if err != nil || st.Sent != 1 {
		t.Fatalf("%%RETRY%%billing holds %d copies (%v), want 1", st.Sent, err)
	}
	// A later reconsume of the same message is a copy of its own.
	again.ExtFields["reconsumeTimes"] = "2"
	if resp := b.request(t, again); resp.Code != respSuccess {
		t.Fatalf("second retry: %d %q", resp.Code, resp.Remark)
	}
	if st, _ := b.eng.DescribeTopic("%RETRY%billing"); st.Sent != 2 {
		t.Fatalf("%%RETRY%%billing holds %d copies, want 2", st.Sent)
	}
}
