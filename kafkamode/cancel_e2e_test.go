package kafkamode_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/kafkamode"
)

// TestKafkaCancel: control records cancel pending messages by key (two
// messages share a key) and by partition and offset, and reschedule one
// (cancel by key plus a new due time); the others are delivered. The settle step proves the cancelled ones never arrive: it
// waits until the group resolved every delay record and the consumer read
// past a sentinel behind every forward.
func TestKafkaCancel(t *testing.T) {
	e := newEnv(t, 3)
	e.copies = true // the reschedule copies its record forward (settleReschedule)
	c := e.collect(e.biz)
	w := e.startWorker("w1")
	l := &ledger{due: map[string]int64{}}
	due := time.Now().UnixMilli() + 3000
	var recs []*kgo.Record
	keys := []string{"order-1", "order-2", "order-2", "order-3", "order-4", "order-5"}
	for i, k := range keys {
		id := fmt.Sprintf("m%d", i)
		recs = append(recs, &kgo.Record{Topic: e.delay, Key: []byte(k), Value: []byte(id), Headers: []kgo.RecordHeader{
			{Key: kafkamode.HeaderDeliverAt, Value: []byte(strconv.FormatInt(due, 10))},
			{Key: kafkamode.HeaderBizTopic, Value: []byte(e.biz)}}})
	}
	res := e.cl.ProduceSync(t.Context(), recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Cancel order-2 (m1, m2) by key and m3 by its position. (Results
	// come in completion order, not input order.)
	var m3 *kgo.Record
	for _, r := range res {
		if string(r.Record.Value) == "m3" {
			m3 = r.Record
		}
	}
	cancels := []*kgo.Record{
		{Topic: e.delay, Key: []byte("order-2"), Headers: []kgo.RecordHeader{{Key: kafkamode.HeaderCancel, Value: []byte("key")}}},
	}
	if err := e.cl.ProduceSync(t.Context(), cancels...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	byOffset := &kgo.Record{Topic: e.delay, Partition: m3.Partition, Value: []byte("cancel m3"),
		Headers: []kgo.RecordHeader{{Key: kafkamode.HeaderCancel, Value: []byte("offset:" + strconv.FormatInt(m3.Offset, 10))}}}
	if err := e.manual().ProduceSync(t.Context(), byOffset).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Reschedule order-4 (m4) 1.5 s later: a record with its key, _cancel=key
	// and a new due time replaces it.
	later := due + 1500
	resched := &kgo.Record{Topic: e.delay, Key: []byte("order-4"), Value: []byte("m4-later"), Headers: []kgo.RecordHeader{
		{Key: kafkamode.HeaderCancel, Value: []byte("key")},
		{Key: kafkamode.HeaderDeliverAt, Value: []byte(strconv.FormatInt(later, 10))},
		{Key: kafkamode.HeaderBizTopic, Value: []byte(e.biz)}}}
	if err := e.cl.ProduceSync(t.Context(), resched).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"m0", "m5"} {
		l.due[id] = due
	}
	l.due["m4-later"] = later
	got := e.settle(c, l, 60*time.Second)
	if v := l.check(got); !v.ok() {
		t.Fatalf("%s (an unknown ID is a cancelled message that was delivered)", v)
	}
	if st := w.stop(t); st["cancelled"] != 4 {
		t.Fatalf("worker counted %d cancelled, want 4: %v", st["cancelled"], st)
	}
}
