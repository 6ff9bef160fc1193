package kafkamode

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The control headers a producer sets on a record of the delay topic. They
// are the first seed's names; the worker strips them when it forwards.
const (
	// HeaderDeliverAt is the due time in Unix milliseconds (decimal ASCII).
	HeaderDeliverAt = "_deliverAt"
	// HeaderDelayMs is the delay in milliseconds (decimal ASCII, >= 0),
	// counted from the record's timestamp (its create time unless the topic
	// uses log-append time), so every worker that reads the record computes
	// the same due time.
	HeaderDelayMs = "_delayMs"
	// HeaderBizTopic names the topic the record is forwarded to at its due
	// time.
	HeaderBizTopic = "_bizTopic"
	// HeaderCancel makes a record of the delay topic a cancel, never
	// forwarded: "key" cancels every pending message of the same partition
	// with the cancel record's key, produced before it (produce the cancel
	// with the message's key and the default partitioner puts it in the
	// same partition); "offset:<n>" cancels the pending message at offset n
	// of the cancel record's partition. A message already forwarded is not
	// affected. A cancel record that also carries _bizTopic and a due time
	// is a reschedule: it cancels as above and is itself scheduled.
	HeaderCancel = "_cancel"
)

// hasScheduleHeaders reports whether r carries any of the scheduling
// headers (a cancel record that does is a reschedule).
func hasScheduleHeaders(r *kgo.Record) bool {
	for _, h := range r.Headers {
		if h.Key == HeaderDeliverAt || h.Key == HeaderDelayMs || h.Key == HeaderBizTopic {
			return true
		}
	}
	return false
}

// cancelSpec is what a cancel record asks.
type cancelSpec struct {
	byKey  bool
	offset int64 // for !byKey
}

// parseCancel reads the _cancel header of r; ok is false when r has none.
func parseCancel(r *kgo.Record) (spec *cancelSpec, ok bool, err error) {
	var v *string
	for i := range r.Headers {
		if r.Headers[i].Key == HeaderCancel {
			if v != nil {
				return nil, true, fmt.Errorf("header %s appears more than once", HeaderCancel)
			}
			s := string(r.Headers[i].Value)
			v = &s
		}
	}
	if v == nil {
		return nil, false, nil
	}
	switch {
	case *v == "key":
		if len(r.Key) == 0 {
			return nil, true, fmt.Errorf("%s=key needs a record key (the key of the messages to cancel)", HeaderCancel)
		}
		return &cancelSpec{byKey: true}, true, nil
	case strings.HasPrefix(*v, "offset:"):
		o, err := parseDecimal((*v)[len("offset:"):])
		if err != nil || o >= r.Offset {
			return nil, true, fmt.Errorf("%s=%s: want offset:<n> with n an offset before the cancel record's own (%d)", HeaderCancel, quoteShort(*v), r.Offset)
		}
		return &cancelSpec{offset: o}, true, nil
	}
	return nil, true, fmt.Errorf("%s=%s: want \"key\" or \"offset:<n>\"", HeaderCancel, quoteShort(*v))
}

// The headers the worker adds.
const (
	// HeaderDueMs is set on a forwarded record: the due time it was
	// scheduled for, in Unix milliseconds. A consumer measures lateness as
	// its arrival minus this.
	HeaderDueMs = "hourglass-due-ms"
	// HeaderSource is set on forwarded and dead-lettered records:
	// "<delay topic>/<partition>/<offset>", the delay record's position.
	// It is unique per scheduled message, so a consumer can use it to
	// detect a duplicate (there are none for read_committed consumers).
	HeaderSource = "hourglass-source"
	// HeaderRedelivery ("1") is set, in at-least-once mode
	// (DeliveryAtLeastOnce), on a forward that may be a second delivery:
	// its message was due before its partition came to this worker, so
	// the previous owner may have forwarded it and crashed before
	// committing that. A consumer that has seen the forward's
	// hourglass-source before drops it. A forward without it is a first
	// delivery.
	HeaderRedelivery = "hourglass-redelivery"
	// HeaderDLQReason is set on a dead-lettered record: why it could not be
	// scheduled, in English.
	HeaderDLQReason = "hourglass-dlq-reason"
	// HeaderCopiedFrom is set on a record the worker copied forward within
	// the delay topic (before retention would delete the original):
	// "<delay topic>/<partition>/<offset>" of the original, kept through
	// further copies. The forward names the original in hourglass-source
	// and drops this header, so a copied message reaches its business
	// topic just as it would have uncopied. The worker never reads it: it
	// knows its copies from its own state (copyState), and drops every
	// hourglass- header a record of the delay topic carries (IsOwnHeader).
	HeaderCopiedFrom = "hourglass-copied-from"
)

// secondsFloor and secondsCeil bound the _deliverAt values refused as Unix
// seconds: read as milliseconds they fall in January 1970 to March 1973,
// while as seconds they are 2001 to 5138. A due time in the past is
// forwarded at once, so such a record, meant for later, would arrive
// early. Smaller values (0, 1, ...) plainly mean "now" and are kept.
const (
	secondsFloor = 1_000_000_000
	secondsCeil  = 100_000_000_000
)

// errOutOfRange is parseDecimal's answer to a negative number, or one
// beyond int64.
var errOutOfRange = errors.New("out of range")

// parseDecimal reads a header's number: decimal ASCII digits, nothing
// else (no '+', no spaces), as documented; a '-' and digits, or more
// digits than int64 holds, is refused with errOutOfRange.
func parseDecimal(v string) (int64, error) {
	digits, neg := strings.CutPrefix(v, "-")
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, fmt.Errorf("%s is not decimal digits", quoteShort(v))
	}
	if neg {
		return 0, errOutOfRange
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, errOutOfRange
	}
	return n, nil
}

// maxQuoted bounds how much of a header's value a refusal quotes.
const maxQuoted = 64

// quoteShort quotes a header's value for a refusal (a dead letter's
// reason), at most maxQuoted bytes of it: a reason quoting a value of
// any size made the dead letter as large again as the record, past
// Kafka's size limit, and it was dead-lettered without its body.
func quoteShort(v string) string {
	if len(v) <= maxQuoted {
		return strconv.Quote(v)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(v[:maxQuoted]), len(v))
}

// maxTimestampMs is the last millisecond of year 9999: a record timestamp
// beyond it (Kafka takes one) is no time _delayMs can count from.
const maxTimestampMs = 253402300799999

// MaxDelayMs bounds _delayMs and how far _deliverAt may lie in the future
// (100 years): beyond it the arithmetic of due times would overflow, and such
// a record is almost certainly a unit mistake (seconds for ms, or ns).
const MaxDelayMs = 100 * 365 * 24 * 3600 * 1000

// schedule is what the control headers of one delay record say.
type schedule struct {
	due      int64  // Unix ms
	bizTopic string // where it goes
}

// parseSchedule is scheduleOf for a worker of delayTopic with the default
// state and dead-letter topics.
func parseSchedule(r *kgo.Record, delayTopic string) (schedule, error) {
	c := Config{DelayTopic: delayTopic, StateTopic: delayTopic + ".state", DLQTopic: delayTopic + ".dlq"}
	return c.scheduleOf(r)
}

// scheduleOf reads the control headers of r, a record of c's delay
// topic. It returns an error that says what is wrong (it becomes the
// dead-letter reason) when a header is missing, repeated, not decimal
// digits, out of range, a _deliverAt in seconds, or when _bizTopic is not
// a valid topic name or is one of the worker's own topics: the delay
// topic (a forwarding loop), the state topic (a forward there could forge
// progress markers) or the dead-letter topic.
func (c *Config) scheduleOf(r *kgo.Record) (schedule, error) {
	var at, delay, biz *string
	for i := range r.Headers {
		h := &r.Headers[i]
		var dst **string
		switch h.Key {
		case HeaderDeliverAt:
			dst = &at
		case HeaderDelayMs:
			dst = &delay
		case HeaderBizTopic:
			dst = &biz
		default:
			continue
		}
		if *dst != nil {
			return schedule{}, fmt.Errorf("header %s appears more than once", h.Key)
		}
		v := string(h.Value)
		*dst = &v
	}
	var s schedule
	switch {
	case at != nil && delay != nil:
		return s, fmt.Errorf("both %s and %s are set; set one", HeaderDeliverAt, HeaderDelayMs)
	case at != nil:
		ms, err := parseDecimal(*at)
		if errors.Is(err, errOutOfRange) {
			return s, fmt.Errorf("header %s=%s is out of range (0 to 100 years after the record's timestamp)", HeaderDeliverAt, quoteShort(*at))
		}
		if err != nil {
			return s, fmt.Errorf("header %s=%s is not a Unix time in milliseconds (decimal digits)", HeaderDeliverAt, quoteShort(*at))
		}
		if ms >= secondsFloor && ms < secondsCeil {
			return s, fmt.Errorf("header %s=%d looks like Unix seconds (as milliseconds it is %s); give Unix milliseconds",
				HeaderDeliverAt, ms, time.UnixMilli(ms).UTC().Format(time.DateOnly))
		}
		if ms > maxTimestampMs || ms-MaxDelayMs > r.Timestamp.UnixMilli() { // no overflow: 0 <= ms
			return s, fmt.Errorf("header %s=%d is out of range (0 to 100 years after the record's timestamp)", HeaderDeliverAt, ms)
		}
		s.due = ms
	case delay != nil:
		ms, err := parseDecimal(*delay)
		if errors.Is(err, errOutOfRange) {
			return s, fmt.Errorf("header %s=%s is out of range (0 to 100 years)", HeaderDelayMs, quoteShort(*delay))
		}
		if err != nil {
			return s, fmt.Errorf("header %s=%s is not a number of milliseconds (decimal digits)", HeaderDelayMs, quoteShort(*delay))
		}
		if ms > MaxDelayMs {
			return s, fmt.Errorf("header %s=%d is out of range (0 to 100 years)", HeaderDelayMs, ms)
		}
		if ts := r.Timestamp.UnixMilli(); ts < 0 || ts > maxTimestampMs {
			return s, fmt.Errorf("header %s counts from the record's timestamp, and %d is not a time (Unix ms, 1970 to 9999): give %s",
				HeaderDelayMs, ts, HeaderDeliverAt)
		}
		s.due = r.Timestamp.UnixMilli() + ms
	default:
		return s, fmt.Errorf("neither %s nor %s is set", HeaderDeliverAt, HeaderDelayMs)
	}
	if biz == nil {
		return s, fmt.Errorf("header %s is missing", HeaderBizTopic)
	}
	if err := validTopic(*biz); err != nil {
		return s, fmt.Errorf("header %s: %v", HeaderBizTopic, err)
	}
	switch *biz {
	case c.DelayTopic:
		return s, fmt.Errorf("header %s names the delay topic itself", HeaderBizTopic)
	case c.StateTopic:
		return s, fmt.Errorf("header %s names the worker's state topic", HeaderBizTopic)
	case c.DLQTopic:
		return s, fmt.Errorf("header %s names the dead-letter topic", HeaderBizTopic)
	}
	s.bizTopic = *biz
	return s, nil
}

// validTopic applies Kafka's rules for topic names: 1 to 249 characters
// from [a-zA-Z0-9._-], and not "." or "..".
func validTopic(t string) error {
	if t == "" || t == "." || t == ".." {
		return fmt.Errorf("%q is not a valid topic name", t)
	}
	if len(t) > 249 {
		return fmt.Errorf("topic name of %d characters is longer than 249", len(t))
	}
	if strings.HasPrefix(t, "__") {
		return fmt.Errorf("topic name %q begins with \"__\": Kafka keeps such names for its internal topics", t)
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic name %q has the character %q (allowed: letters, digits, '.', '_', '-')", t, c)
		}
	}
	return nil
}

// isControlHeader reports whether a header is one of the control headers
// the worker strips when it forwards. Other headers, even ones whose name
// begins with '_', are the user's and are kept.
func isControlHeader(key string) bool {
	return key == HeaderDeliverAt || key == HeaderDelayMs || key == HeaderBizTopic || key == HeaderCancel
}

// ownHeaderPrefix begins the name of every header the worker writes.
// Kafka header names are case-sensitive, but a consumer (or an HTTP
// bridge) may match them without case, so the prefix is matched that way.
const ownHeaderPrefix = "hourglass-"

// IsOwnHeader reports whether a header is named like one the worker
// writes: its name begins with "hourglass-" in any case, rune by rune
// under Unicode's simple case folding, as a consumer that matches names
// without case (Java's equalsIgnoreCase) reads it, so "HOURGLAſS-source"
// (a long s) is one too. On a record read from the delay topic such a
// header came from a producer (a forward produced to the delay topic
// again, or a forgery): it is never trusted and never forwarded. What
// the worker itself knows about a record (where its message was first
// sent, for a copy forward) it keeps in its own state (copyState, the
// snapshots' back), never in a header it reads back. The HTTP API refuses
// a property so named, which the worker would drop.
func IsOwnHeader(key string) bool {
	rest := key
	for _, p := range ownHeaderPrefix {
		r, n := utf8.DecodeRuneInString(rest)
		if n == 0 || r != p && !strings.EqualFold(string(r), string(p)) {
			return false
		}
		rest = rest[n:]
	}
	return true
}

// forwardRecord is the record produced to the business topic for the delay
// record r due at due: r's key, value and headers without the control
// headers and without any hourglass- header, plus hourglass-due-ms and
// hourglass-source = source.
//
// source is the position at which the message was first sent, as the
// worker's own state says (firstOffset): a copy forward's original, else
// r's own. A hourglass-copied-from (or hourglass-source) header on r is
// not read: any producer of the delay topic can write one, and a forged
// one naming another message's position would give two forwards the same
// source, so a consumer that drops duplicates by it would drop a message.
func forwardRecord(r *kgo.Record, bizTopic, source string, due int64) *kgo.Record {
	out := &kgo.Record{Topic: bizTopic, Key: r.Key, Value: r.Value}
	out.Headers = make([]kgo.RecordHeader, 0, len(r.Headers)+2)
	for _, h := range r.Headers {
		if !isControlHeader(h.Key) && !IsOwnHeader(h.Key) {
			out.Headers = append(out.Headers, h)
		}
	}
	out.Headers = append(out.Headers,
		kgo.RecordHeader{Key: HeaderDueMs, Value: strconv.AppendInt(nil, due, 10)},
		kgo.RecordHeader{Key: HeaderSource, Value: []byte(source)})
	return out
}

// deadLetterRecord is the record produced to the dead-letter topic for the
// delay record r: r's key, value and headers (control headers included,
// so the producer can see what it sent) without any hourglass- header
// (IsOwnHeader, whatever its case: an earlier dead letter's, or a
// producer's forgery that a reader of the dead-letter topic, matching
// names without case or taking the first, would take for the worker's),
// plus the reason and the source position.
func deadLetterRecord(r *kgo.Record, dlqTopic, source, reason string) *kgo.Record {
	out := &kgo.Record{Topic: dlqTopic, Key: r.Key, Value: r.Value}
	out.Headers = make([]kgo.RecordHeader, 0, len(r.Headers)+2)
	for _, h := range r.Headers {
		if !IsOwnHeader(h.Key) {
			out.Headers = append(out.Headers, h)
		}
	}
	out.Headers = append(out.Headers,
		kgo.RecordHeader{Key: HeaderDLQReason, Value: []byte(reason)},
		kgo.RecordHeader{Key: HeaderSource, Value: []byte(source)})
	return out
}

// copyRecord is the copy forward of the delay record r (due at due) into
// partition p of the delay topic: r's key, value and headers, with the
// due time made absolute (_deliverAt replaces _delayMs, which counts from
// a timestamp the copy does not keep), without _cancel (the cancel half
// of a reschedule was applied when the original was read), without any
// hourglass- header r carried, and with hourglass-copied-from = origin,
// the position at which the message was first sent (firstOffset: the
// worker's state, never r's header). The header is for people and the
// Locator; the worker itself learns a copy's origin from its copy records
// (copyState), so a producer that writes the header changes nothing.
func copyRecord(r *kgo.Record, delayTopic string, p int32, origin string, due int64) *kgo.Record {
	out := &kgo.Record{Topic: delayTopic, Partition: p, Key: r.Key, Value: r.Value}
	out.Headers = make([]kgo.RecordHeader, 0, len(r.Headers)+1)
	for _, h := range r.Headers {
		switch {
		case h.Key == HeaderDeliverAt, h.Key == HeaderDelayMs, h.Key == HeaderCancel, IsOwnHeader(h.Key):
		default:
			out.Headers = append(out.Headers, h)
		}
	}
	out.Headers = append(out.Headers,
		kgo.RecordHeader{Key: HeaderDeliverAt, Value: strconv.AppendInt(nil, due, 10)},
		kgo.RecordHeader{Key: HeaderCopiedFrom, Value: []byte(origin)})
	return out
}
