package remoting

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/hourglass-mq/hourglass/engine"
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

// TestRetryOfARetryClimbs: the first retry copy of a message from queue 0
// sits at queue 0, offset 0 of the group's retry topic, where the original
// sits in its own topic, and it keeps the original's message ID. Its
// send-back must be taken for the copy's, so the next copy counts two
// reconsumes and the last goes to %DLQ%. When handles were the queue and
// offset alone, the copy's send-back was read as the original's, made a
// second "first" retry that was dropped as a duplicate, and the message
// never reached %DLQ% (the Java harness's retry case, issue 26).
func TestRetryOfARetryClimbs(t *testing.T) {
	b := startTest(t, nil)
	// The message under test is the first the broker puts on queue 0.
	var id string
	for i := 0; id == ""; i++ {
		if i == 64 {
			t.Fatal("64 sends and none on queue 0")
		}
		uid := fmt.Sprintf("0A0000010000ABCD00000000000001%02X", i)
		send := &Command{Code: codeSendMessage, Body: []byte("body"), ExtFields: map[string]string{"producerGroup": "p",
			"topic": "orders", "queueId": "0", "properties": formatProperties(map[string]string{propUniqKey: uid})}}
		resp := b.request(t, send)
		if resp.Code != respSuccess {
			t.Fatalf("send: %d %q", resp.Code, resp.Remark)
		}
		if resp.ExtFields["queueId"] == "0" {
			id = uid
		}
	}
	// last waits until queue 0 of topic holds n visible entries and
	// returns the last one's offset and properties.
	last := func(topic string, n int) (uint64, map[string]string) {
		for {
			signal := b.eng.VisibleSignal()
			if vs, _ := b.eng.ReadQueue(topic, 0, 0, 8); len(vs) >= n {
				return vs[n-1].Offset, vs[n-1].Message.Properties
			}
			<-signal
		}
	}
	back := func(topic string, off uint64) {
		t.Helper()
		req := &Command{Code: codeConsumerSendMsgBack, ExtFields: map[string]string{"group": "billing",
			"offset": strconv.FormatInt(b.srv.commitHandle(topic, 0, off), 10), "delayLevel": "1",
			"originMsgId": id, "originTopic": "orders", "maxReconsumeTimes": "2"}}
		if resp := b.request(t, req); resp.Code != respSuccess {
			t.Fatalf("send-back: %d %q", resp.Code, resp.Remark)
		}
	}
	off, p := last("orders", 1)
	if off != 0 || p[propUniqKey] != id {
		t.Fatalf("queue 0 of orders starts with %s at %d, want %s at 0", p[propUniqKey], off, id)
	}
	back("orders", 0)
	off, p = last("%RETRY%billing", 1)
	if off != 0 || p[hidReconsume] != "1" {
		t.Fatalf("first retry copy at offset %d, reconsumed %q", off, p[hidReconsume])
	}
	back("%RETRY%billing", 0)
	// A send-back is answered once its copy is stored.
	if st, err := b.eng.DescribeTopic("%RETRY%billing"); err != nil || st.Sent != 2 {
		t.Fatalf("%%RETRY%%billing holds %d copies (%v) after the copy's send-back, want 2", st.Sent, err)
	}
	off, p = last("%RETRY%billing", 2)
	if p[hidReconsume] != "2" {
		t.Fatalf("second retry copy reconsumed %q, want 2", p[hidReconsume])
	}
	// At the group's maximum (2), the copy's send-back goes to %DLQ%.
	back("%RETRY%billing", off)
	if st, err := b.eng.DescribeTopic(dlqTopicOf("billing")); err != nil || st.Sent != 1 {
		t.Fatalf("%s holds %d (%v), want 1", dlqTopicOf("billing"), st.Sent, err)
	}
}

// TestRetryAtMaximumDeadLettered: a message sent as a normal message to
// %RETRY%<group> with a reconsume count at the group's maximum goes to
// %DLQ%<group>, RocketMQ's rule, which the Java client's orderly consumer
// relies on (past its maximum it sends the message so, with its count,
// and counts on the broker to dead-letter it; it came back as a retry
// forever before). A consumer's send-back and its fallback send of one
// retry, landing on either side of the maximum, store one copy, whichever
// comes first.
func TestRetryAtMaximumDeadLettered(t *testing.T) {
	b := startTest(t, nil)
	normal := func(uniq, reconsume, max string) {
		t.Helper()
		props := formatProperties(map[string]string{propUniqKey: uniq, propKeys: "k", propRetryTopic: "orders",
			propOriginMsgID: uniq, propDelay: "6"})
		req := &Command{Code: codeSendMessage, Body: []byte("body"), ExtFields: map[string]string{"producerGroup": "CLIENT_INNER_PRODUCER",
			"topic": "%RETRY%billing", "queueId": "0", "properties": props, "reconsumeTimes": reconsume, "maxReconsumeTimes": max}}
		if resp := b.request(t, req); resp.Code != respSuccess {
			t.Fatalf("send to the retry topic: %d %q", resp.Code, resp.Remark)
		}
	}
	sent := func(topic string) uint64 {
		st, err := b.eng.DescribeTopic(topic)
		if err != nil {
			return 0
		}
		return st.Sent
	}
	// The Java orderly consumer's send at its maximum of 3.
	normal("0A0000010000ABCD0000000000000001", "3", "3")
	if d, r := sent("%DLQ%billing"), sent("%RETRY%billing"); d != 1 || r != 0 {
		t.Fatalf("at the maximum: %d dead letters, %d retries; want 1, 0", d, r)
	}
	var vs []engine.Visible
	var err error
	for {
		signal := b.eng.VisibleSignal()
		if vs, err = b.eng.ReadQueue("%DLQ%billing", 0, 0, 1); err != nil || len(vs) > 0 {
			break
		}
		<-signal
	}
	if err != nil || len(vs) != 1 || vs[0].Message.Properties[propUniqKey] != "0A0000010000ABCD0000000000000001" || vs[0].Message.Key != "k" {
		t.Fatalf("dead letter: %v, %v", vs, err)
	}
	// Below it, a retry.
	normal("0A0000010000ABCD0000000000000002", "2", "3")
	if d, r := sent("%DLQ%billing"), sent("%RETRY%billing"); d != 1 || r != 1 {
		t.Fatalf("below the maximum: %d dead letters, %d retries; want 1, 1", d, r)
	}
	// A send-back at count 0 of a group whose maximum is 1 makes retry
	// copy 1; the fallback of the same retry (count 1, at the maximum)
	// finds it: one copy. And the other way round.
	for i, sendBackFirst := range []bool{true, false} {
		uniq := fmt.Sprintf("0A0000010000ABCD00000000000001%02X", i)
		send := &Command{Code: codeSendMessage, Body: []byte("body"), ExtFields: map[string]string{"producerGroup": "p",
			"topic": "orders", "queueId": "0", "properties": formatProperties(map[string]string{propUniqKey: uniq})}}
		resp := b.request(t, send)
		if resp.Code != respSuccess {
			t.Fatalf("send: %d %q", resp.Code, resp.Remark)
		}
		q, _ := strconv.Atoi(resp.ExtFields["queueId"])
		off := uint64(0)
		for {
			signal := b.eng.VisibleSignal()
			vs, _ := b.eng.ReadQueue("orders", q, 0, 8)
			if n := len(vs); n > 0 && vs[n-1].Message.Properties[propUniqKey] == uniq {
				off = vs[n-1].Offset
				break
			}
			<-signal
		}
		back := func() {
			req := &Command{Code: codeConsumerSendMsgBack, ExtFields: map[string]string{"group": "billing",
				"offset": strconv.FormatInt(b.srv.commitHandle("orders", q, off), 10), "delayLevel": "0",
				"originMsgId": uniq, "originTopic": "orders", "maxReconsumeTimes": "1"}}
			if resp := b.request(t, req); resp.Code != respSuccess {
				t.Fatalf("send-back: %d %q", resp.Code, resp.Remark)
			}
		}
		d0, r0 := sent("%DLQ%billing"), sent("%RETRY%billing")
		if sendBackFirst {
			back()
			normal(uniq, "1", "1")
		} else {
			normal(uniq, "1", "1")
			back()
		}
		if d, r := sent("%DLQ%billing")-d0, sent("%RETRY%billing")-r0; d+r != 1 {
			t.Fatalf("send-back first %v: %d dead letters and %d retries of one retry, want one copy", sendBackFirst, d, r)
		}
	}
}

// TestRetryOfTimerMessageDropsTimer: the retry copy of a timer message
// goes at its delay level, which removes the timer properties, as a delay
// level on a send does (RocketMQ's broker clears them from a message with
// a level); its user properties stay.
func TestRetryOfTimerMessageDropsTimer(t *testing.T) {
	b := startTest(t, nil)
	const uniq = "0A0000010000ABCD0000000000000042"
	props := formatProperties(map[string]string{propUniqKey: uniq, "tenant": "acme",
		propTimerDeliverMs: "1", propTimerDelaySec: "-1", propTimerDelayMs: "-1"}) // all past: due now
	send := &Command{Code: codeSendMessage, Body: []byte("body"),
		ExtFields: map[string]string{"producerGroup": "p", "topic": "jobs", "queueId": "0", "properties": props}}
	resp := b.request(t, send)
	if resp.Code != respSuccess {
		t.Fatalf("send: %d %q", resp.Code, resp.Remark)
	}
	q, _ := strconv.Atoi(resp.ExtFields["queueId"])
	// visible waits until queue q of topic holds a message and returns it.
	visible := func(topic string, q int) engine.Visible {
		for {
			signal := b.eng.VisibleSignal()
			if vs, err := b.eng.ReadQueue(topic, q, 0, 1); err == nil && len(vs) == 1 {
				return vs[0]
			}
			<-signal
		}
	}
	v := visible("jobs", q)
	back := &Command{Code: codeConsumerSendMsgBack, ExtFields: map[string]string{"group": "workers",
		"offset": strconv.FormatInt(b.srv.commitHandle("jobs", q, v.Offset), 10), "delayLevel": "0",
		"originMsgId": uniq, "originTopic": "jobs", "maxReconsumeTimes": "16"}}
	if resp := b.request(t, back); resp.Code != respSuccess {
		t.Fatalf("send-back: %d %q", resp.Code, resp.Remark)
	}
	got := visible("%RETRY%workers", 0).Message.Properties
	for _, k := range []string{propTimerDeliverMs, propTimerDelaySec, propTimerDelayMs, propTimerOutMs} {
		if _, ok := got[k]; ok {
			t.Errorf("the retry copy kept %s: %v", k, got)
		}
	}
	if got[propDelay] != "3" || got["tenant"] != "acme" || got[propUniqKey] != uniq {
		t.Errorf("the retry copy: %v", got)
	}
}
