package kafkamode_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/kafkamode"
)

// TestKafkaForgedCopiedFrom (issue 27, defect 2): a producer writes B to
// A's partition with hourglass-copied-from naming A's offset (what a
// genuine copy forward of A would carry), due before A, and hourglass-
// headers of other names. Both are forwarded, each with its own position
// as hourglass-source, and a consumer that drops duplicates by that
// header keeps both; no producer's hourglass- header reaches the business
// topic. At def821c B's forward named A, and the deduplicating consumer
// dropped the genuine A.
func TestKafkaForgedCopiedFrom(t *testing.T) {
	e := newEnv(t, 1)
	c := e.collect(e.biz)
	now := time.Now().UnixMilli()
	hdr := func(due int64, extra ...kgo.RecordHeader) []kgo.RecordHeader {
		return append([]kgo.RecordHeader{
			{Key: kafkamode.HeaderDeliverAt, Value: []byte(strconv.FormatInt(due, 10))},
			{Key: kafkamode.HeaderBizTopic, Value: []byte(e.biz)}}, extra...)
	}
	a := &kgo.Record{Topic: e.delay, Partition: 0, Key: []byte("A"), Value: []byte("A"), Headers: hdr(now + 4000)}
	if err := e.manual().ProduceSync(t.Context(), a).FirstErr(); err != nil {
		t.Fatal(err)
	}
	aSource := e.delay + "/0/" + strconv.FormatInt(a.Offset, 10)
	b := &kgo.Record{Topic: e.delay, Partition: 0, Key: []byte("B"), Value: []byte("B"), Headers: hdr(now+2000,
		kgo.RecordHeader{Key: kafkamode.HeaderCopiedFrom, Value: []byte(aSource)},
		kgo.RecordHeader{Key: "Hourglass-Source", Value: []byte(aSource)},
		kgo.RecordHeader{Key: "hourglass-redelivery", Value: []byte("1")},
		kgo.RecordHeader{Key: "HOURGLAſS-source", Value: []byte(aSource)})} // a long s: Java's equalsIgnoreCase reads hourglass-source
	if err := e.manual().ProduceSync(t.Context(), b).FirstErr(); err != nil {
		t.Fatal(err)
	}
	bSource := e.delay + "/0/" + strconv.FormatInt(b.Offset, 10)
	e.startWorker("w1")
	l := &ledger{due: map[string]int64{"A": now + 4000, "B": now + 2000}}
	got := e.settle(c, l, 60*time.Second)
	if v := l.check(got); !v.ok() {
		t.Fatal(v)
	}
	want := map[string]string{"A": aSource, "B": bSource}
	bySource := map[string]string{} // what a consumer deduplicating by source keeps
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.recs {
		if string(r.Value) == "sentinel" {
			continue
		}
		var sources []string
		for _, h := range r.Headers {
			if h.Key == kafkamode.HeaderSource {
				sources = append(sources, string(h.Value))
			} else if kafkamode.IsOwnHeader(h.Key) && h.Key != kafkamode.HeaderDueMs {
				t.Errorf("%s's forward carries the producer's header %s=%q", r.Value, h.Key, h.Value)
			}
		}
		if len(sources) != 1 || sources[0] != want[string(r.Value)] {
			t.Errorf("%s's forward: hourglass-source %q, want once, %s", r.Value, sources, want[string(r.Value)])
		}
		if _, dup := bySource[sources[0]]; !dup {
			bySource[sources[0]] = string(r.Value)
		}
	}
	if len(bySource) != 2 {
		t.Errorf("a consumer deduplicating by %s keeps %v, want both A and B", kafkamode.HeaderSource, bySource)
	}
}
