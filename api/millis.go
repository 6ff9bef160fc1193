package api

import "time"

// Millis is an instant as Unix milliseconds, the API's wire format for
// times. Zero means "not set" or "not known" where a field says so.
type Millis int64

// MillisOf returns t as Millis.
func MillisOf(t time.Time) Millis { return Millis(t.UnixMilli()) }

// Time returns m as a time.Time (in the local zone).
func (m Millis) Time() time.Time { return time.UnixMilli(int64(m)) }

// RFC3339 renders m in RFC 3339, UTC, with milliseconds: the form of
// every *_time field of a response.
func (m Millis) RFC3339() string {
	return m.Time().UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// String is RFC3339, or "-" for zero.
func (m Millis) String() string {
	if m == 0 {
		return "-"
	}
	return m.RFC3339()
}
