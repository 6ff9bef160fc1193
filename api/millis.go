package api

import (
	"time"

	"github.com/hourglass-mq/hourglass/clock"
)

// Millis is an instant as Unix milliseconds, the API's wire format for
// times. Zero means "not set" or "not known" where a field says so.
type Millis int64

// MillisOf returns t as Millis, rounded down: for times reported or
// compared, not for due times.
func MillisOf(t time.Time) Millis { return Millis(t.UnixMilli()) }

// DueMillisOf returns t as Millis rounded up to the next whole millisecond
// when it carries a fraction of one: the form of a due time. The broker
// fires a message once its millisecond clock reaches the due time, so a
// due time rounded down would fire up to 1 ms before t.
func DueMillisOf(t time.Time) Millis { return Millis(clock.CeilUnixMilli(t)) }

// Time returns m as a time.Time (in the local zone).
func (m Millis) Time() time.Time { return time.UnixMilli(int64(m)) }

// RFC3339 renders m in RFC 3339, UTC, with milliseconds: the form of
// every *_time field of a response.
func (m Millis) RFC3339() string {
	var b [len(rfc3339Millis)]byte
	return string(m.AppendRFC3339(b[:0]))
}

// rfc3339Millis is the layout of RFC3339.
const rfc3339Millis = "2006-01-02T15:04:05.000Z07:00"

// AppendRFC3339 appends m's RFC3339 form to b.
func (m Millis) AppendRFC3339(b []byte) []byte {
	return m.Time().UTC().AppendFormat(b, rfc3339Millis)
}

// String is RFC3339, or "-" for zero.
func (m Millis) String() string {
	if m == 0 {
		return "-"
	}
	return m.RFC3339()
}
