package kafkamode_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/kafkamode"
)

// TestKafkaAbortRereadsNothing (issue 27, defect 3): an aborted
// transaction makes the consumer read again none of the records the
// worker has read. A message due in an hour sits at offset 0, so the
// group's committed offset stays 0 throughout: a rewind to it would
// re-read every record behind. 200 records due in 2 s follow, and 5
// whose business topic Kafka refuses (its name collides with an existing
// topic's), so each transaction that holds one aborts. The worker counts
// the records the consumer delivers below its read position
// (records_reread): 0, while the aborts are at least 1 and everything
// else is delivered (the refused ones dead-lettered). At def821c the abort
// rewound to the committed offset and all 206 records were read twice.
func TestKafkaAbortRereadsNothing(t *testing.T) {
	e := newEnv(t, 1)
	biz := e.collect(e.biz)
	dlq := e.collect(e.dlq)
	if _, err := kadm.NewClient(e.cl).CreateTopic(t.Context(), 1, 1, nil, e.delay+".taken"); err != nil {
		t.Fatal(err)
	}
	rec := func(id, topic string, due int64) *kgo.Record {
		return &kgo.Record{Topic: e.delay, Key: []byte(id), Value: []byte(id), Headers: []kgo.RecordHeader{
			{Key: kafkamode.HeaderDeliverAt, Value: []byte(strconv.FormatInt(due, 10))},
			{Key: kafkamode.HeaderBizTopic, Value: []byte(topic)}}}
	}
	now := time.Now().UnixMilli()
	if err := e.cl.ProduceSync(t.Context(), rec("head", e.biz, now+3600_000)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	const n, refused = 200, 5
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, rec("m"+strconv.Itoa(i), e.biz, now+2000+int64(i)*5))
		if i%(n/refused) == 0 {
			recs = append(recs, rec("r"+strconv.Itoa(i), e.delay+"_taken", now+2000+int64(i)*5))
		}
	}
	if err := e.cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	w := e.startWorker("w1")
	biz.waitFor(t, n, 60*time.Second)
	dlq.waitFor(t, refused, 30*time.Second)
	st := w.stop(t)
	if st["aborted_txns"] < 1 {
		t.Fatalf("no transaction aborted, so nothing was tested: %v", st)
	}
	if reread, ok := st["records_reread"]; !ok || reread != 0 {
		t.Errorf("the consumer delivered %d records again after %d aborts, want 0: %v", st["records_reread"], st["aborted_txns"], st)
	}
	// Every record was produced before the worker started, so each
	// delivery is counted as a take-over read, and is a first read, a
	// marker's skip or a re-read: the sum checks the counter above (at
	// def821c, where nothing pinned the rewind, 412 deliveries of 206).
	if got, want := st["takeover_records_read"], st["records_read"]+st["skipped_by_marker"]; got != want {
		t.Errorf("the consumer delivered %d records, %d of them first reads: %d read again", got, want, got-want)
	}
	if st["records_read"] != n+refused+1 || st["forwarded"] != n {
		t.Fatalf("counters %v: want %d read, %d forwarded", st, n+refused+1, n)
	}
}
