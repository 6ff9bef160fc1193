package clock

import "time"

// The broker counts time in whole Unix milliseconds and fires a message
// once its millisecond clock reaches the due time. Its clock reads the
// wall clock rounded down, so "now >= due" holds only once the true time
// has reached due. A finer time that becomes a due time must therefore be
// rounded up: rounded down, a time 0.2 ms past a millisecond boundary
// would become due 0.2 ms before the time asked for, and fire then.

// CeilUnixMilli returns t in Unix milliseconds, rounded up to the next
// whole millisecond when t carries a fraction of one (toward +∞, also
// before 1970). Use it wherever a time becomes a due time or a deadline
// that must not pass early; display and bookkeeping keep UnixMilli.
func CeilUnixMilli(t time.Time) int64 {
	ms := t.UnixMilli() // rounds toward -∞: Nanosecond is never negative
	if t.Nanosecond()%int(time.Millisecond) != 0 {
		ms++
	}
	return ms
}

// CeilMillis returns d in whole milliseconds, rounded up (toward +∞), for a
// delay, lease or backoff that must not end early. 1.2 ms is 2; -1.2 ms
// is -1.
func CeilMillis(d time.Duration) int64 {
	ms := d.Milliseconds() // rounds toward zero
	if d > time.Duration(ms)*time.Millisecond {
		ms++
	}
	return ms
}
