package kafkamode_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/kafkamode"
)

// TestKafkaHeadersRoundTrip: a real worker forwards each record with its
// key, value and own headers (one whose name begins with '_' included),
// without the control headers, with hourglass-due-ms set to the scheduled
// time and hourglass-source naming the delay record; none arrives early,
// whether scheduled by _deliverAt, by _delayMs, or in the past.
func TestKafkaHeadersRoundTrip(t *testing.T) {
	e := newEnv(t, 3)
	c := e.collect(e.biz)
	metricsAddr := freeAddr(t)
	e.startWorker("w1", "--metrics-listen", metricsAddr)
	l := &ledger{due: map[string]int64{}}
	now := time.Now().UnixMilli()
	var msgs []msg
	for i := 0; i < 60; i++ {
		msgs = append(msgs, msg{id: fmt.Sprintf("m%02d", i), due: now + 500 + int64(i)*25,
			headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t" + strconv.Itoa(i))}, {Key: "_user", Value: []byte("kept")}}})
	}
	msgs = append(msgs, msg{id: "past", due: now - 60_000})
	e.produce(l, msgs)

	// One scheduled by _delayMs: due at its record timestamp + 700 ms.
	ts := time.Now()
	rec := &kgo.Record{Topic: e.delay, Key: []byte("rel"), Value: []byte("rel"), Timestamp: ts, Headers: []kgo.RecordHeader{
		{Key: kafkamode.HeaderDelayMs, Value: []byte("700")}, {Key: kafkamode.HeaderBizTopic, Value: []byte(e.biz)}}}
	if err := e.cl.ProduceSync(t.Context(), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	l.due["rel"] = ts.UnixMilli() + 700

	got := e.settle(c, l, 60*time.Second)
	v := l.check(got)
	if !v.ok() {
		t.Fatalf("%s", v)
	}
	t.Logf("lateness at a read_committed consumer: %s", v.latenessSummary())
	m := scrape(t, "http://"+metricsAddr+"/metrics")
	if m["hourglass_kafka_forwarded_total"] != 62 || m["hourglass_kafka_lateness_seconds_count"] != 62 ||
		m["hourglass_kafka_transactions_total{result=\"committed\"}"] < 1 || m["hourglass_kafka_rebalance_partitions_total{event=\"assigned\"}"] != 3 {
		t.Errorf("metrics: forwarded %v, lateness count %v, committed %v, assigned %v", m["hourglass_kafka_forwarded_total"],
			m["hourglass_kafka_lateness_seconds_count"], m["hourglass_kafka_transactions_total{result=\"committed\"}"],
			m["hourglass_kafka_rebalance_partitions_total{event=\"assigned\"}"])
	}
	perPartition := 0.0
	for p := 0; p < 3; p++ {
		if v, ok := m[fmt.Sprintf("hourglass_kafka_pending{partition=\"%d\"}", p)]; !ok || v != 0 {
			t.Errorf("pending of partition %d: %v (present %v), want 0", p, v, ok)
		}
		perPartition += m[fmt.Sprintf("hourglass_kafka_partition_lateness_seconds_count{partition=\"%d\"}", p)]
	}
	if perPartition != 62 {
		t.Errorf("the per-partition lateness histograms count %v forwards, want 62", perPartition)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.recs {
		id := string(r.Value)
		if id == "sentinel" {
			continue
		}
		if string(r.Key) != id {
			t.Errorf("%s: key %q", id, r.Key)
		}
		for _, h := range r.Headers {
			switch h.Key {
			case kafkamode.HeaderDeliverAt, kafkamode.HeaderDelayMs, kafkamode.HeaderBizTopic:
				t.Errorf("%s: control header %s was forwarded", id, h.Key)
			}
		}
		src, ok := header(r, kafkamode.HeaderSource)
		if !ok || !strings.HasPrefix(src, e.delay+"/") {
			t.Errorf("%s: source header %q", id, src)
		}
		if strings.HasPrefix(id, "m") {
			i, _ := strconv.Atoi(id[1:])
			if v, _ := header(r, "trace"); v != "t"+strconv.Itoa(i) {
				t.Errorf("%s: trace header %q", id, v)
			}
			if v, ok := header(r, "_user"); !ok || v != "kept" {
				t.Errorf("%s: the user's _user header was not kept (%q)", id, v)
			}
		}
	}
}

// TestKafkaDeadLetter: records with missing or bad control headers go to
// the dead-letter topic with a reason; a good record behind them in the
// same partition is forwarded all the same.
func TestKafkaDeadLetter(t *testing.T) {
	e := newEnv(t, 1)
	dlq := e.collect(e.dlq)
	biz := e.collect(e.biz)
	e.startWorker("w1")
	due := strconv.FormatInt(time.Now().UnixMilli()+200, 10)
	bad := []struct {
		id      string
		headers []kgo.RecordHeader
		reason  string
	}{
		{"no-time", []kgo.RecordHeader{{Key: "_bizTopic", Value: []byte(e.biz)}}, "neither"},
		{"no-topic", []kgo.RecordHeader{{Key: "_deliverAt", Value: []byte(due)}}, "_bizTopic is missing"},
		{"not-a-number", []kgo.RecordHeader{{Key: "_deliverAt", Value: []byte("soon")}, {Key: "_bizTopic", Value: []byte(e.biz)}}, "not a Unix time"},
		{"both", []kgo.RecordHeader{{Key: "_deliverAt", Value: []byte(due)}, {Key: "_delayMs", Value: []byte("5")}, {Key: "_bizTopic", Value: []byte(e.biz)}}, "both"},
		{"negative", []kgo.RecordHeader{{Key: "_delayMs", Value: []byte("-5")}, {Key: "_bizTopic", Value: []byte(e.biz)}}, "out of range"},
		{"bad-topic", []kgo.RecordHeader{{Key: "_delayMs", Value: []byte("5")}, {Key: "_bizTopic", Value: []byte("no spaces")}}, "has the character"},
		{"loop", []kgo.RecordHeader{{Key: "_delayMs", Value: []byte("5")}, {Key: "_bizTopic", Value: []byte(e.delay)}}, "delay topic itself"},
		{"to-state", []kgo.RecordHeader{{Key: "_delayMs", Value: []byte("5")}, {Key: "_bizTopic", Value: []byte(e.state)}}, "state topic"},
		{"to-dlq", []kgo.RecordHeader{{Key: "_delayMs", Value: []byte("5")}, {Key: "_bizTopic", Value: []byte(e.dlq)}}, "dead-letter topic"},
		{"beyond-horizon", []kgo.RecordHeader{{Key: "_deliverAt", Value: []byte(strconv.FormatInt(time.Now().UnixMilli()+kafkamode.MaxDelayMs+86_400_000, 10))},
			{Key: "_bizTopic", Value: []byte(e.biz)}}, "out of range"},
		{"in-seconds", []kgo.RecordHeader{{Key: "_deliverAt", Value: []byte(strconv.FormatInt(time.Now().Unix()+60, 10))},
			{Key: "_bizTopic", Value: []byte(e.biz)}}, "Unix seconds"},
		{"twice", []kgo.RecordHeader{{Key: "_deliverAt", Value: []byte(due)}, {Key: "_deliverAt", Value: []byte(due)},
			{Key: "_bizTopic", Value: []byte(e.biz)}}, "more than once"},
		{"empty-topic", []kgo.RecordHeader{{Key: "_deliverAt", Value: []byte(due)}, {Key: "_bizTopic"}}, "not a valid topic name"},
		{"empty-time", []kgo.RecordHeader{{Key: "_deliverAt"}, {Key: "_bizTopic", Value: []byte(e.biz)}}, "not a Unix time"},
		{"cancel-twice", []kgo.RecordHeader{{Key: "_cancel", Value: []byte("key")}, {Key: "_cancel", Value: []byte("key")}}, "more than once"},
		// Bad, with forged headers named like the worker's, in odd cases.
		{"forged", []kgo.RecordHeader{{Key: "_deliverAt", Value: []byte(due)}, {Key: "Hourglass-Source", Value: []byte(e.delay + "/0/0")},
			{Key: "HOURGLASS-DLQ-REASON", Value: []byte("forged")}, {Key: kafkamode.HeaderRedelivery, Value: []byte("1")}}, "_bizTopic is missing"},
	}
	var recs []*kgo.Record
	for _, b := range bad {
		recs = append(recs, &kgo.Record{Topic: e.delay, Key: []byte(b.id), Value: []byte(b.id), Headers: b.headers})
	}
	// A tombstone (null value) without control headers is dead-lettered
	// as a tombstone; one with them is forwarded as a tombstone, with a
	// null key too.
	recs = append(recs, &kgo.Record{Topic: e.delay, Key: []byte("tomb-bad")},
		&kgo.Record{Topic: e.delay, Key: []byte("good"), Value: []byte("good"), Headers: []kgo.RecordHeader{
			{Key: "_deliverAt", Value: []byte(due)}, {Key: "_bizTopic", Value: []byte(e.biz)}}},
		&kgo.Record{Topic: e.delay, Headers: []kgo.RecordHeader{{Key: "_deliverAt", Value: []byte(due)}, {Key: "_bizTopic", Value: []byte(e.biz)}}})
	if err := e.cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dlq.waitFor(t, len(bad)+1, 60*time.Second)
	biz.waitFor(t, 2, 30*time.Second)
	dlq.mu.Lock()
	defer dlq.mu.Unlock()
	byID := map[string]*kgo.Record{}
	for _, r := range dlq.recs {
		byID[string(r.Key)] = r
		var sources, reasons, others []string
		for _, h := range r.Headers {
			switch strings.ToLower(h.Key) {
			case kafkamode.HeaderSource:
				sources = append(sources, string(h.Value))
			case kafkamode.HeaderDLQReason:
				reasons = append(reasons, string(h.Value))
			default:
				if strings.HasPrefix(strings.ToLower(h.Key), "hourglass-") {
					others = append(others, h.Key)
				}
			}
		}
		want := e.delay + "/0/" + strconv.FormatInt(recOffset(recs, string(r.Key)), 10)
		if len(sources) != 1 || sources[0] != want || len(reasons) != 1 || reasons[0] == "forged" || len(others) != 0 {
			t.Errorf("%s's dead letter: sources %q (want once, %s), reasons %q, producer's hourglass- headers %q",
				r.Key, sources, want, reasons, others)
		}
	}
	for _, b := range bad {
		r := byID[b.id]
		if r == nil {
			t.Errorf("%s: not in the dead-letter topic", b.id)
			continue
		}
		reason, _ := header(r, kafkamode.HeaderDLQReason)
		if !strings.Contains(reason, b.reason) {
			t.Errorf("%s: reason %q, want it to mention %q", b.id, reason, b.reason)
		}
	}
	if r := byID["tomb-bad"]; r == nil || r.Value != nil {
		t.Errorf("the tombstone without control headers: dead letter %v, want one with a null value", r)
	}
	if len(dlq.recs) != len(bad)+1 {
		t.Errorf("%d dead letters for %d bad records", len(dlq.recs), len(bad)+1)
	}
	biz.mu.Lock()
	defer biz.mu.Unlock()
	tombs := 0
	for _, r := range biz.recs {
		if r.Key == nil && r.Value == nil {
			tombs++
		} else if string(r.Value) != "good" {
			t.Errorf("forwarded %q=%q, want good and a tombstone with a null key", r.Key, r.Value)
		}
	}
	if tombs != 1 || len(biz.recs) != 2 {
		t.Errorf("%d forwards, %d of them a tombstone with a null key; want 2 and 1", len(biz.recs), tombs)
	}
}

// recOffset is the offset the produce gave the record with key k (the
// null key: "").
func recOffset(recs []*kgo.Record, k string) int64 {
	for _, r := range recs {
		if string(r.Key) == k {
			return r.Offset
		}
	}
	return -1
}

// TestKafkaHugeHeaderDeadLettered: a control header of 600 KB (a digit
// string, a negative number, a cancel) is refused with a reason of a
// bounded size, so the dead letter keeps the record whole, body and
// headers, within Kafka's 1 MB limit: a reason quoting the whole value
// made the dead letter twice the record, refused, and the worker sent it
// again without its body.
func TestKafkaHugeHeaderDeadLettered(t *testing.T) {
	e := newEnv(t, 1)
	dlq := e.collect(e.dlq)
	e.startWorker("w1")
	huge := strings.Repeat("9", 600_000)
	cases := []struct {
		id      string
		headers []kgo.RecordHeader
		reason  string
	}{
		{"huge-at", []kgo.RecordHeader{{Key: "_deliverAt", Value: []byte(huge)}, {Key: "_bizTopic", Value: []byte(e.biz)}}, "out of range"},
		{"huge-negative", []kgo.RecordHeader{{Key: "_delayMs", Value: []byte("-" + huge)}, {Key: "_bizTopic", Value: []byte(e.biz)}}, "out of range"},
		{"huge-junk", []kgo.RecordHeader{{Key: "_delayMs", Value: []byte(huge + "x")}, {Key: "_bizTopic", Value: []byte(e.biz)}}, "not a number"},
		{"huge-cancel", []kgo.RecordHeader{{Key: "_cancel", Value: []byte("offset:" + huge + "x")}}, "_cancel"},
	}
	for _, c := range cases {
		r := &kgo.Record{Topic: e.delay, Key: []byte(c.id), Value: []byte(c.id), Headers: c.headers}
		if err := e.cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	dlq.waitFor(t, len(cases), 60*time.Second)
	dlq.mu.Lock()
	defer dlq.mu.Unlock()
	for i, c := range cases {
		r := dlq.recs[i]
		reason, _ := header(r, kafkamode.HeaderDLQReason)
		if string(r.Key) != c.id || string(r.Value) != c.id || len(r.Headers) != len(c.headers)+2 {
			t.Errorf("dead letter %d: key %q, value %q, %d headers; want %s whole, with %d headers", i, r.Key, r.Value, len(r.Headers), c.id, len(c.headers)+2)
		}
		if !strings.Contains(reason, c.reason) || len(reason) > 1000 {
			t.Errorf("%s: reason of %d bytes %.200q, want at most 1,000 mentioning %q", c.id, len(reason), reason, c.reason)
		}
	}
}
