package kafkamode_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKafkaWarmsNewBusinessTopic: a record naming a business topic that
// does not exist yet makes the worker have it created (the broker allows
// auto-creation) when the record is read, well before the record is due,
// not in the transaction that forwards it. The record is then delivered
// once, not early.
func TestKafkaWarmsNewBusinessTopic(t *testing.T) {
	e := newEnv(t, 1)
	e.biz = e.group + ".auto" // never created by the test
	e.startWorker("w1")
	l := &ledger{due: map[string]int64{}}
	due := time.Now().UnixMilli() + 6000
	e.produce(l, []msg{{id: "a1", due: due}})
	for !topicExists(t, e, e.biz) {
		if time.Now().UnixMilli() >= due-1000 {
			t.Fatalf("topic %s did not exist 1 s before its first record was due", e.biz)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c := e.collect(e.biz)
	if v := l.check(e.settle(c, l, 60*time.Second)); !v.ok() {
		t.Fatalf("%s", v)
	}
}

// topicExists asks a broker directly (no client cache, no auto-creation)
// whether topic exists with at least one partition.
func topicExists(t *testing.T, e *env, topic string) bool {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(t.Context(), e.cl)
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0 && len(resp.Topics[0].Partitions) > 0
}
