// Package forecast counts pending messages by the second they fall due, so
// that "how many fall due in each minute of the next hour" costs in
// proportion to the number of buckets asked for, not to the number of
// pending messages. It is a leaf package: the engine feeds it (a message
// is added at its due second when sent or rescheduled, and taken out when it
// fires, is cancelled or is rescheduled away) and asks it.
//
// # Layout and cost
//
// Counts keeps three levels, each a map from a time index to a count:
//
//	minutes  minute index -> total of the minute, plus its per-second counts
//	hours    hour index   -> total of the hour
//	days     day index    -> total of the day (UTC days of 86,400 s)
//
// A minute whose messages all fall due in one second keeps only that second
// and its total (no per-second array); a minute with two or more distinct
// seconds gets an array of 60 counts. An update touches one entry of each
// level: O(1). Sum(a, b) walks at most 59 seconds, 59 minutes and 23 hours at
// each end of the range, and then either the whole days between (when
// fewer than the days held) or the days held: its cost is bounded by about
// 300 map look-ups plus the number of whole days in the range, whatever the
// number of pending messages.
//
// # Memory
//
// Bounded by the number of non-empty minutes, not by the number of
// messages: about 60 B for a minute with one distinct due second (its map
// slot and its record); a minute with several gets a page of 60 counts in
// the narrowest type that holds its largest (page.go): 64 B while no second
// holds more than 255 messages, as far-future minutes seldom do, up to 480 B
// for int64 counts. Plus about 40 B per non-empty hour and day. A minute,
// hour or day whose count returns to zero is deleted. The worst case is one
// int64 page for every minute of the maximum delay (576,000 minutes for 400
// days, about 330 MB), which needs more than 2^32 pending messages in one
// second of every one of those minutes; with at most 255 a second it is
// about 70 MB.
//
// Counts is not safe for concurrent use; its owner locks.
package forecast

// Seconds per level.
const (
	minute = 60
	hour   = 3600
	day    = 86400
)

// minuteCounts is one non-empty minute. While secs is nil, every message of
// the minute is due in second one (0..59) of it.
type minuteCounts struct {
	total int64
	one   int8
	secs  page
}

// Counts is the number of pending messages per due second, with minute,
// hour and day totals. The zero value is not ready; use New.
type Counts struct {
	minutes map[int64]*minuteCounts
	hours   map[int64]int64
	days    map[int64]int64
	total   int64
}

// New returns empty counts.
func New() *Counts {
	return &Counts{minutes: map[int64]*minuteCounts{}, hours: map[int64]int64{}, days: map[int64]int64{}}
}

// floorDiv is a/b rounded towards minus infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// SecondOf returns the second (of the Unix epoch) holding the Unix
// millisecond ms.
func SecondOf(ms int64) int64 { return floorDiv(ms, 1000) }

// Add adds delta (positive or negative) messages due at second sec. A
// count never goes below zero: taking out a message that was never added
// is a caller's bug, and it is clamped rather than left to poison later
// sums (Total tells it apart from what the caller expects).
func (c *Counts) Add(sec, delta int64) {
	if delta == 0 {
		return
	}
	mi := floorDiv(sec, minute)
	s := int8(sec - mi*minute)
	m := c.minutes[mi]
	if m == nil {
		if delta < 0 {
			return
		}
		m = &minuteCounts{one: s}
		c.minutes[mi] = m
	}
	switch {
	case m.secs == nil && m.one == s:
	case m.secs == nil:
		if delta < 0 {
			return // nothing is due at that second
		}
		m.secs = newPage(int(m.one), m.total)
		fallthrough
	default:
		if v := m.secs.get(int(s)); v+delta < 0 {
			delta = -v
		}
		m.secs = m.secs.add(int(s), delta)
	}
	if m.total+delta < 0 {
		delta = -m.total
	}
	if delta == 0 {
		return
	}
	m.total += delta
	if m.total == 0 {
		delete(c.minutes, mi)
	}
	addLevel(c.hours, floorDiv(sec, hour), delta)
	addLevel(c.days, floorDiv(sec, day), delta)
	c.total += delta
}

// AddMinute adds n[s] messages due at second s of minute mi (the seconds
// since the epoch divided by 60), for every s; the counts must not be
// negative. It updates the minute, its hour and its day once, so that
// counting many messages a minute at a time (recovery does) costs per
// minute, not per message.
func (c *Counts) AddMinute(mi int64, n *[60]int64) {
	var total int64
	distinct, last := 0, 0
	for s, v := range n {
		if v > 0 {
			total += v
			distinct++
			last = s
		}
	}
	if total == 0 {
		return
	}
	m := c.minutes[mi]
	if m == nil {
		m = &minuteCounts{one: int8(last)}
		c.minutes[mi] = m
	}
	if m.secs == nil && distinct == 1 && int(m.one) == last {
		m.total += total
	} else {
		if m.secs == nil {
			m.secs = newPage(int(m.one), m.total)
		}
		for s, v := range n {
			if v > 0 {
				m.secs = m.secs.add(s, v)
			}
		}
		m.total += total
	}
	addLevel(c.hours, floorDiv(mi*minute, hour), total)
	addLevel(c.days, floorDiv(mi*minute, day), total)
	c.total += total
}

func addLevel(m map[int64]int64, k, delta int64) {
	if v := m[k] + delta; v != 0 {
		m[k] = v
	} else {
		delete(m, k)
	}
}

// Total returns the number of messages counted.
func (c *Counts) Total() int64 { return c.total }

// Minutes returns the number of non-empty minutes held (for memory
// accounting).
func (c *Counts) Minutes() int { return len(c.minutes) }

// secRange sums the seconds [a, b) of one minute mi (0 <= a < b <= 60).
func (c *Counts) secRange(mi int64, a, b int64) int64 {
	m := c.minutes[mi]
	if m == nil {
		return 0
	}
	if a == 0 && b == minute {
		return m.total
	}
	if m.secs == nil {
		if int64(m.one) >= a && int64(m.one) < b {
			return m.total
		}
		return 0
	}
	return m.secs.sum(int(a), int(b))
}

func (c *Counts) minuteTotal(mi int64) int64 {
	if m := c.minutes[mi]; m != nil {
		return m.total
	}
	return 0
}

// Sum returns the number of messages due in the seconds [a, b).
func (c *Counts) Sum(a, b int64) int64 {
	if a >= b || c.total == 0 {
		return 0
	}
	var n int64
	// Seconds at both ends, up to whole minutes.
	ma, mb := floorDiv(a, minute), floorDiv(b, minute)
	if ma == mb {
		return c.secRange(ma, a-ma*minute, b-ma*minute)
	}
	if a != ma*minute {
		n += c.secRange(ma, a-ma*minute, minute)
		ma++
	}
	if b != mb*minute {
		n += c.secRange(mb, 0, b-mb*minute)
	}
	return n + c.sumMinutes(ma, mb)
}

// sumMinutes sums the whole minutes [a, b).
func (c *Counts) sumMinutes(a, b int64) int64 {
	return sumLevel(c.minuteTotal, a, b, hour/minute, c.sumHours)
}

// sumHours sums the whole hours [a, b).
func (c *Counts) sumHours(a, b int64) int64 {
	return sumLevel(func(h int64) int64 { return c.hours[h] }, a, b, day/hour, c.sumDays)
}

// sumLevel sums the units [a, b) of one level: unit by unit up to the
// boundaries of the next level (per units to one of it), and the whole
// units of the next level in between through next.
func sumLevel(get func(int64) int64, a, b, per int64, next func(a, b int64) int64) int64 {
	var n int64
	na, nb := floorDiv(a, per), floorDiv(b, per)
	if na == nb {
		for i := a; i < b; i++ {
			n += get(i)
		}
		return n
	}
	if a != na*per {
		for i := a; i < (na+1)*per; i++ {
			n += get(i)
		}
		na++
	}
	for i := nb * per; i < b; i++ {
		n += get(i)
	}
	return n + next(na, nb)
}

// sumDays sums the whole days [a, b): day by day when the range is shorter
// than the number of days held, else over the days held.
func (c *Counts) sumDays(a, b int64) int64 {
	var n int64
	if span := b - a; span >= 0 && span <= int64(len(c.days)) {
		for d := a; d < b; d++ {
			n += c.days[d]
		}
		return n
	}
	for d, v := range c.days {
		if d >= a && d < b {
			n += v
		}
	}
	return n
}

// SumAll returns the messages due before second b: SumAll(now+60) is what
// falls due within the next minute, including what is overdue and still
// waiting for dispatch.
func (c *Counts) SumAll(b int64) int64 {
	// The earliest second any message can be due at is the epoch's start
	// at the earliest; one day before it keeps the arithmetic away from
	// overflow.
	return c.Sum(min(-day, b), b)
}
