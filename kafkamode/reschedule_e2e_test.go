package kafkamode_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/kafkamode"
)

// TestKafkaRescheduleAfterForward: a reschedule read after its message was
// forwarded replaces nothing; it goes to the dead-letter topic saying so,
// and the message is delivered once, not a second time at the new time.
// (An adversarial review delivered such a message twice.) A record for one
// of Kafka's internal topics is dead-lettered as a bad header.
func TestKafkaRescheduleAfterForward(t *testing.T) {
	e := newEnv(t, 1)
	dlq := e.collect(e.dlq)
	c := e.collect(e.biz)
	e.startWorker("w1")
	due := time.Now().UnixMilli() + 200
	m0 := &kgo.Record{Topic: e.delay, Partition: 0, Key: []byte("order-9"), Value: []byte("m0"), Headers: []kgo.RecordHeader{
		{Key: kafkamode.HeaderDeliverAt, Value: []byte(strconv.FormatInt(due, 10))},
		{Key: kafkamode.HeaderBizTopic, Value: []byte(e.biz)}}}
	if err := e.manual().ProduceSync(t.Context(), m0).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, 1, 30*time.Second)
	later := time.Now().UnixMilli() + 300
	resched := &kgo.Record{Topic: e.delay, Partition: 0, Key: []byte("order-9"), Value: []byte("m0-again"), Headers: []kgo.RecordHeader{
		{Key: kafkamode.HeaderCancel, Value: []byte("offset:" + strconv.FormatInt(m0.Offset, 10))},
		{Key: kafkamode.HeaderDeliverAt, Value: []byte(strconv.FormatInt(later, 10))},
		{Key: kafkamode.HeaderBizTopic, Value: []byte(e.biz)}}}
	internal := &kgo.Record{Topic: e.delay, Partition: 0, Value: []byte("internal"), Headers: []kgo.RecordHeader{
		{Key: kafkamode.HeaderDelayMs, Value: []byte("0")},
		{Key: kafkamode.HeaderBizTopic, Value: []byte("__consumer_offsets")}}}
	if err := e.manual().ProduceSync(t.Context(), resched, internal).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dlq.waitFor(t, 2, 30*time.Second)
	dlq.mu.Lock()
	reasons := map[string]string{}
	for _, r := range dlq.recs {
		reasons[string(r.Value)], _ = header(r, kafkamode.HeaderDLQReason)
	}
	dlq.mu.Unlock()
	if !strings.Contains(reasons["m0-again"], "nothing pending") {
		t.Errorf("the late reschedule's dead letter says %q", reasons["m0-again"])
	}
	if !strings.Contains(reasons["internal"], "internal topics") {
		t.Errorf("the internal topic's dead letter says %q", reasons["internal"])
	}
	l := &ledger{due: map[string]int64{"m0": due}}
	if v := l.check(e.settle(c, l, 60*time.Second)); !v.ok() {
		t.Fatalf("%s (m0-again arriving would be the message delivered twice)", v)
	}
}
