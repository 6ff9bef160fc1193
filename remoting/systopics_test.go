package remoting

import (
	"strconv"
	"testing"
)

// TestSystemTopicsRefused: a client's send to one of RocketMQ's system
// topics is refused as RocketMQ refuses it (NO_PERMISSION, or
// SYSTEM_ERROR for TBW102) and creates nothing; the transaction topics
// are refused to every request, so a client neither reads another
// producer's half messages nor writes an end of transaction, and the
// half topic keeps the one queue the broker reads.
func TestSystemTopicsRefused(t *testing.T) {
	b := startTest(t, nil)
	send := func(code int32, topic string) *Command {
		ext := map[string]string{"producerGroup": "p", "topic": topic, "queueId": "0"}
		if code == codeSendMessageV2 {
			ext = map[string]string{"a": "p", "b": topic, "e": "0"}
		}
		return b.request(t, &Command{Code: code, Body: []byte("x"), ExtFields: ext})
	}
	for topic, want := range map[string]int32{"SCHEDULE_TOPIC_XXXX": respNoPermission, halfTopic: respNoPermission,
		opTopic: respNoPermission, "TRANS_CHECK_MAX_TIME_TOPIC": respNoPermission, "SELF_TEST_TOPIC": respNoPermission,
		"OFFSET_MOVED_EVENT": respNoPermission, "TBW102": respSystemError} {
		for _, code := range []int32{codeSendMessage, codeSendMessageV2} {
			if resp := send(code, topic); resp.Code != want || resp.Remark == "" {
				t.Errorf("send (code %d) to %s: %d %q, want %d with a reason", code, topic, resp.Code, resp.Remark, want)
			}
		}
		if _, _, ok := b.eng.TopicKind(topic); ok {
			t.Errorf("a refused send created topic %s", topic)
		}
	}
	// A real half message: the half topic is the broker's, of one queue.
	half := &Command{Code: codeSendMessage, Body: []byte("uncommitted"), ExtFields: map[string]string{"producerGroup": "p",
		"topic": "orders", "queueId": "0", "sysFlag": strconv.Itoa(sysTranPrepared),
		"properties": formatProperties(map[string]string{propUniqKey: "0A0000010000000000000000000000AA", propProducerGroup: "p", propTranPrepared: "true"})}}
	if resp := b.request(t, half); resp.Code != respSuccess {
		t.Fatalf("half message: %d %q", resp.Code, resp.Remark)
	}
	if n, _, ok := b.eng.TopicKind(halfTopic); !ok || n != 1 {
		t.Fatalf("half topic has %d queues (exists %v), want 1", n, ok)
	}
	for _, topic := range []string{halfTopic, opTopic} {
		reqs := []*Command{
			{Code: codePullMessage, ExtFields: map[string]string{"consumerGroup": "g", "topic": topic, "queueId": "0",
				"queueOffset": "0", "maxMsgNums": "32", "sysFlag": "0"}},
			{Code: codeQueryMessage, ExtFields: map[string]string{"topic": topic, "key": "0A0000010000000000000000000000AA",
				"maxNum": "32", "beginTimestamp": "0", "endTimestamp": "9000000000000"}},
			{Code: codeGetRouteInfoByTopic, ExtFields: map[string]string{"topic": topic}},
			{Code: codeUpdateConsumerOffset, ExtFields: map[string]string{"consumerGroup": "g", "topic": topic, "queueId": "0", "commitOffset": "1"}},
		}
		for _, req := range reqs {
			if resp := b.request(t, req); resp.Code != respNoPermission || len(resp.Body) != 0 {
				t.Errorf("code %d on %s: %d %q with %d bytes, want NO_PERMISSION and nothing", req.Code, topic, resp.Code, resp.Remark, len(resp.Body))
			}
		}
	}
	if st, err := b.eng.DescribeTopic(halfTopic); err != nil || st.Sent != 1 {
		t.Fatalf("half topic: %+v %v, want the one half message", st, err)
	}
}

// TestSendTopicReadOnce: a send carrying both "topic" and "b" (or a batch
// naming its topic only by "b") is checked for the topic it is stored in:
// the system-topic refusal and the access check read a send's topic as
// the send does, so neither can be shown one topic while the messages go
// to another.
func TestSendTopicReadOnce(t *testing.T) {
	b := startTest(t, nil)
	v2 := &Command{Code: codeSendMessageV2, Body: []byte("x"), ExtFields: map[string]string{"a": "p",
		"topic": "orders", "b": halfTopic, "e": "0"}}
	if resp := b.request(t, v2); resp.Code != respNoPermission {
		t.Errorf("V2 send with topic orders and b %s: %d %q, want NO_PERMISSION", halfTopic, resp.Code, resp.Remark)
	}
	batch := &Command{Code: codeSendBatchMessage, Body: []byte("x"), ExtFields: map[string]string{
		"producerGroup": "p", "topic": "", "b": opTopic, "queueId": "0"}}
	if resp := b.request(t, batch); resp.Code != respNoPermission {
		t.Errorf("batch naming %s by b: %d %q, want NO_PERMISSION", opTopic, resp.Code, resp.Remark)
	}
	for _, topic := range []string{halfTopic, opTopic} {
		if _, _, ok := b.eng.TopicKind(topic); ok {
			t.Errorf("a refused send created %s", topic)
		}
	}

	// Under access control: "producer" may send to orders only. Naming
	// orders in "topic" and invoices in "b" is refused, and invoices gets
	// nothing; naming orders in "b" is allowed.
	a, secrets, ca, _, _ := accessBroker(t)
	v2send := func(ext map[string]string) *Command {
		c := &Command{Code: codeSendMessageV2, Body: []byte("x"), ExtFields: ext}
		return tlsRequest(t, a, ca, nil, signAs(c, "producer", secrets["producer"]))
	}
	if resp := v2send(map[string]string{"a": "p", "topic": "orders", "b": "invoices", "e": "0"}); resp.Code != respNoPermission {
		t.Errorf("V2 send with topic orders and b invoices: %d %q, want NO_PERMISSION", resp.Code, resp.Remark)
	}
	if _, err := a.eng.DescribeTopic("invoices"); err == nil {
		t.Errorf("a refused send reached invoices")
	}
	if resp := v2send(map[string]string{"a": "p", "b": "orders", "e": "0"}); resp.Code != respSuccess {
		t.Errorf("V2 send to orders: %d %q, want SUCCESS", resp.Code, resp.Remark)
	}
}
