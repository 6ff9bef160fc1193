package kafkamode

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestParseScheduleHostileHeaders: control headers a careless or hostile
// producer may write. Each either schedules the record at the due time it
// plainly states or is refused with a reason (the dead letter's); none is
// read as a time the producer did not mean.
func TestParseScheduleHostileHeaders(t *testing.T) {
	cfg, err := Config{Brokers: []string{"k:9092"}, DelayTopic: "hg.delay", Group: "g", WorkerID: "w", Partitions: 1, Replication: 1}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	now := ts.UnixMilli()
	at := strconv.FormatInt(now+5000, 10)
	cases := []struct {
		name    string
		headers []string
		due     int64  // when accepted
		reason  string // when refused: part of the reason
	}{
		{"plain", []string{HeaderDeliverAt, at, HeaderBizTopic, "orders"}, now + 5000, ""},
		{"past", []string{HeaderDeliverAt, strconv.FormatInt(now-60_000, 10), HeaderBizTopic, "orders"}, now - 60_000, ""},
		{"zero", []string{HeaderDeliverAt, "0", HeaderBizTopic, "orders"}, 0, ""},
		{"delay", []string{HeaderDelayMs, "250", HeaderBizTopic, "orders"}, now + 250, ""},
		// In Unix seconds: read as milliseconds it is January 1970, and
		// the message, meant for the future, would be forwarded at once.
		{"seconds", []string{HeaderDeliverAt, strconv.FormatInt(now/1000+3600, 10), HeaderBizTopic, "orders"}, 0, "seconds"},
		{"seconds now", []string{HeaderDeliverAt, strconv.FormatInt(now/1000, 10), HeaderBizTopic, "orders"}, 0, "seconds"},
		// Not the decimal ASCII the headers are documented as.
		{"leading space", []string{HeaderDeliverAt, " " + at, HeaderBizTopic, "orders"}, 0, "not a Unix time"},
		{"trailing newline", []string{HeaderDeliverAt, at + "\n", HeaderBizTopic, "orders"}, 0, "not a Unix time"},
		{"plus", []string{HeaderDeliverAt, "+" + at, HeaderBizTopic, "orders"}, 0, "not a Unix time"},
		{"delay plus", []string{HeaderDelayMs, "+5", HeaderBizTopic, "orders"}, 0, "not a number"},
		{"delay space", []string{HeaderDelayMs, " 5", HeaderBizTopic, "orders"}, 0, "not a number"},
		{"negative", []string{HeaderDeliverAt, "-1", HeaderBizTopic, "orders"}, 0, "out of range"},
		{"float", []string{HeaderDeliverAt, at + ".0", HeaderBizTopic, "orders"}, 0, "not a Unix time"},
		{"huge", []string{HeaderDeliverAt, "99999999999999999999", HeaderBizTopic, "orders"}, 0, "out of range"},
		{"huge delay", []string{HeaderDelayMs, "99999999999999999999", HeaderBizTopic, "orders"}, 0, "out of range"},
		// A value of any size is quoted in part: the reason (a dead
		// letter's header) stays small.
		{"long junk", []string{HeaderDeliverAt, strings.Repeat("x", 100_000), HeaderBizTopic, "orders"}, 0, "(100000 bytes)"},
		{"long negative", []string{HeaderDelayMs, "-" + strings.Repeat("9", 100_000), HeaderBizTopic, "orders"}, 0, "(100001 bytes)"},
		{"non-UTF-8", []string{HeaderDeliverAt, "\xff", HeaderBizTopic, "orders"}, 0, "not a Unix time"},
		// Topics a forward must never write to: the worker's own.
		{"delay topic", []string{HeaderDeliverAt, at, HeaderBizTopic, "hg.delay"}, 0, "delay topic"},
		{"state topic", []string{HeaderDeliverAt, at, HeaderBizTopic, "hg.delay.state"}, 0, "state topic"},
		{"dead-letter topic", []string{HeaderDeliverAt, at, HeaderBizTopic, "hg.delay.dlq"}, 0, "dead-letter topic"},
	}
	for _, c := range cases {
		r := &kgo.Record{Topic: cfg.DelayTopic, Offset: 7, Timestamp: ts}
		for i := 0; i < len(c.headers); i += 2 {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: c.headers[i], Value: []byte(c.headers[i+1])})
		}
		s, err := cfg.scheduleOf(r)
		switch {
		case c.reason == "" && err != nil:
			t.Errorf("%s: refused (%v), want due %d", c.name, err, c.due)
		case c.reason == "" && s.due != c.due:
			t.Errorf("%s: due %d, want %d", c.name, s.due, c.due)
		case c.reason != "" && err == nil:
			t.Errorf("%s: accepted (due %d, topic %s), want refused saying %q", c.name, s.due, s.bizTopic, c.reason)
		case c.reason != "" && !strings.Contains(err.Error(), c.reason):
			t.Errorf("%s: reason %.300q, want it to mention %q", c.name, err, c.reason)
		case c.reason != "" && len(err.Error()) > 300:
			t.Errorf("%s: reason of %d bytes, want at most 300", c.name, len(err.Error()))
		}
	}
}

// TestParseScheduleTimestampRange: Kafka takes a record whose timestamp is
// far beyond any date (2^62 ms, or just below int64's end) or before
// 1970. _delayMs counts from it: such a due time overflowed to a negative
// number and the record was forwarded at once, or was a nonsense date;
// it is refused. _deliverAt does not depend on the timestamp (its range
// check must not overflow either).
func TestParseScheduleTimestampRange(t *testing.T) {
	cfg := Config{DelayTopic: "hg.delay", StateTopic: "hg.delay.state", DLQTopic: "hg.delay.dlq"}
	at := strconv.FormatInt(time.Now().UnixMilli()+5000, 10)
	for _, ts := range []int64{math.MaxInt64 - 10, 1 << 62, -5} {
		r := &kgo.Record{Timestamp: time.UnixMilli(ts), Headers: []kgo.RecordHeader{
			{Key: HeaderDelayMs, Value: []byte("1000")}, {Key: HeaderBizTopic, Value: []byte("orders")}}}
		if s, err := cfg.scheduleOf(r); err == nil || !strings.Contains(err.Error(), "timestamp") {
			t.Errorf("timestamp %d, _delayMs=1000: due %d, err %v; want refused for its timestamp", ts, s.due, err)
		}
		r.Headers[0] = kgo.RecordHeader{Key: HeaderDeliverAt, Value: []byte(at)}
		if s, err := cfg.scheduleOf(r); err != nil || strconv.FormatInt(s.due, 10) != at {
			t.Errorf("timestamp %d, _deliverAt=%s: due %d, err %v; want it due then", ts, at, s.due, err)
		}
		r.Headers[0].Value = []byte("4000000000000000000") // year 126 million: within 100 years of 2^62
		if s, err := cfg.scheduleOf(r); err == nil {
			t.Errorf("timestamp %d, _deliverAt=4e18: due %d; want refused", ts, s.due)
		}
	}
}

// TestParseCancelOwnOffset: a cancel may name only an earlier offset of
// its partition, never its own or a later one, nor a negative one.
func TestParseCancelOwnOffset(t *testing.T) {
	for _, v := range []string{"offset:7", "offset:8", "offset:-1", "offset:", "offset:+3", "offset: 3", "key "} {
		r := &kgo.Record{Offset: 7, Key: []byte("k"), Headers: []kgo.RecordHeader{{Key: HeaderCancel, Value: []byte(v)}}}
		if _, ok, err := parseCancel(r); !ok || err == nil {
			t.Errorf("_cancel=%q at offset 7: ok %v, err %v; want refused", v, ok, err)
		}
	}
	r := &kgo.Record{Offset: 7, Key: []byte("k"), Headers: []kgo.RecordHeader{{Key: HeaderCancel, Value: []byte("offset:6")}}}
	if spec, ok, err := parseCancel(r); !ok || err != nil || spec.byKey || spec.offset != 6 {
		t.Errorf("_cancel=offset:6 at offset 7: %+v %v %v", spec, ok, err)
	}
}

// TestForwardRecordOwnHeaders: a record re-delayed by a consumer (a
// forward produced to the delay topic again) or forged carries headers
// named like the worker's; its forward carries exactly one
// hourglass-due-ms and one hourglass-source, the worker's, so a consumer
// reading either header (first or last) sees the truth. No
// hourglass-copied-from, however plausible (an earlier offset of the same
// partition is what a genuine copy names), renames the source: only the
// worker's state does (the source argument), and no hourglass- header of
// the producer's reaches the business topic, whatever its case.
func TestForwardRecordOwnHeaders(t *testing.T) {
	const src = "hg.delay/3/100"
	for _, copied := range []string{"hg.delay/3/7", "hg.delay/3/99", "hg.delay/2/5", "hg.delay/3/100", "hg.delay/3/101", "other/3/5", "hg.delay/3/x", "junk"} {
		r := &kgo.Record{Topic: "hg.delay", Partition: 3, Offset: 100, Key: []byte("k"), Value: []byte("v"), Headers: []kgo.RecordHeader{
			{Key: HeaderDueMs, Value: []byte("1")}, {Key: HeaderSource, Value: []byte("forged/0/0")}, {Key: "trace", Value: []byte("t")},
			{Key: HeaderCopiedFrom, Value: []byte(copied)}, {Key: HeaderDeliverAt, Value: []byte("1796079994801")},
			{Key: "Hourglass-Source", Value: []byte(copied)}, {Key: "hourglass-anything", Value: []byte("x")}}}
		out := forwardRecord(r, "orders", src, 1796079994801)
		got := map[string][]string{}
		for _, h := range out.Headers {
			got[h.Key] = append(got[h.Key], string(h.Value))
		}
		if d := got[HeaderDueMs]; len(d) != 1 || d[0] != "1796079994801" {
			t.Errorf("copied-from %q: hourglass-due-ms %q, want once, the due time", copied, d)
		}
		if s := got[HeaderSource]; len(s) != 1 || s[0] != src {
			t.Errorf("copied-from %q: hourglass-source %q, want once, %s", copied, s, src)
		}
		if len(got) != 3 || len(got["trace"]) != 1 {
			t.Errorf("copied-from %q: headers %v, want trace and the worker's two", copied, got)
		}
	}
}

// TestCopyRecordDropsProducersOwnHeaders: a copy forward names the origin
// the worker's state gives, never a hourglass- header of the record.
func TestCopyRecordDropsProducersOwnHeaders(t *testing.T) {
	r := &kgo.Record{Topic: "hg.delay", Partition: 3, Offset: 100, Headers: []kgo.RecordHeader{
		{Key: HeaderCopiedFrom, Value: []byte("hg.delay/3/7")}, {Key: "HOURGLASS-COPIED-FROM", Value: []byte("hg.delay/3/8")},
		{Key: HeaderSource, Value: []byte("hg.delay/3/9")}, {Key: "trace", Value: []byte("t")}}}
	out := copyRecord(r, "hg.delay", 3, "hg.delay/3/100", 5)
	got := map[string][]string{}
	for _, h := range out.Headers {
		got[h.Key] = append(got[h.Key], string(h.Value))
	}
	if c := got[HeaderCopiedFrom]; len(c) != 1 || c[0] != "hg.delay/3/100" || len(got) != 3 || len(got["trace"]) != 1 {
		t.Errorf("copy headers %v, want trace, _deliverAt and copied-from hg.delay/3/100", got)
	}
}

// TestDeadLetterOwnHeaders: a dead letter produced to the delay topic again
// (retried) and dead-lettered a second time, or a bad record carrying
// forged hourglass- headers in any case, carries one reason and one
// source, the worker's, and no other header named like the worker's, so a
// reader of the dead-letter topic that matches names without case (or
// takes the first) sees the truth; its control headers and the user's
// stay, so the producer sees what it sent.
func TestDeadLetterOwnHeaders(t *testing.T) {
	r := &kgo.Record{Key: []byte("k"), Headers: []kgo.RecordHeader{{Key: HeaderDLQReason, Value: []byte("old")},
		{Key: "HOURGLASS-DLQ-REASON", Value: []byte("forged")}, {Key: "Hourglass-Source", Value: []byte("hg.delay/0/0")},
		{Key: HeaderRedelivery, Value: []byte("1")}, {Key: HeaderCopiedFrom, Value: []byte("hg.delay/0/2")},
		{Key: HeaderSource, Value: []byte("hg.delay/0/1")}, {Key: HeaderDeliverAt, Value: []byte("x")},
		{Key: "trace", Value: []byte("t")}, {Key: "hourglass", Value: []byte("kept")}}}
	out := deadLetterRecord(r, "hg.delay.dlq", "hg.delay/0/9", "new")
	got := map[string][]string{}
	for _, h := range out.Headers {
		got[strings.ToLower(h.Key)] = append(got[strings.ToLower(h.Key)], string(h.Value))
	}
	if len(got[HeaderDLQReason]) != 1 || got[HeaderDLQReason][0] != "new" || len(got[HeaderSource]) != 1 ||
		got[HeaderSource][0] != "hg.delay/0/9" || len(got[strings.ToLower(HeaderDeliverAt)]) != 1 ||
		len(got["trace"]) != 1 || len(got["hourglass"]) != 1 || len(got) != 5 {
		t.Errorf("dead letter headers %v, want the worker's reason and source, _deliverAt, trace and hourglass", got)
	}
}

// TestIsOwnHeader: a header name beginning with "hourglass-" in any case,
// under Unicode's simple folding too (a long s, which Java's
// equalsIgnoreCase takes for an s), is the worker's; a name that only
// looks alike, or is shorter, is the user's.
func TestIsOwnHeader(t *testing.T) {
	for _, k := range []string{"hourglass-", "hourglass-source", "Hourglass-Source", "HOURGLASS-DUE-MS", "hourglaſs-source", "HOURGLAſſ-x", "hOuRgLaSs-redelivery"} {
		if !IsOwnHeader(k) {
			t.Errorf("%q: not the worker's, want it to be", k)
		}
	}
	for _, k := range []string{"", "hourglass", "hourglass_source", "hourglas-source", "x-hourglass-source", "hourglass\u2010source", "\xffhourglass-", "hourglasss-"} {
		if IsOwnHeader(k) {
			t.Errorf("%q: the worker's, want the user's", k)
		}
	}
	r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "HOURGLAſS-source", Value: []byte("forged")}, {Key: "trace", Value: []byte("t")}}}
	out := forwardRecord(r, "orders", "hg.delay/0/1", 5)
	for _, h := range out.Headers {
		if string(h.Value) == "forged" {
			t.Errorf("forwarded the producer's %q", h.Key)
		}
	}
}
