package forecast

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// MaxBuckets is the most buckets one forecast may ask for: enough for a
// week by the minute or a day by the 10 seconds, small enough that an
// answer stays cheap whatever the request.
const MaxBuckets = 10000

// ParseStep reads a bucket width: one of the words second, minute, hour,
// day, or a whole number of seconds, minutes, hours or days such as 30s,
// 5m, 2h or 7d (at most 99999 of a unit; the same grammar as the API
// document's pattern, so that what one accepts the other does).
func ParseStep(s string) (time.Duration, error) {
	switch s {
	case "second":
		return time.Second, nil
	case "minute":
		return time.Minute, nil
	case "hour":
		return time.Hour, nil
	case "day":
		return 24 * time.Hour, nil
	}
	m := stepPattern.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("step %q is not second, minute, hour, day or a whole number of s, m, h or d such as 30s, 5m or 7d", s)
	}
	n, _ := strconv.Atoi(m[1])
	return time.Duration(n) * units[m[2]], nil
}

// stepPattern is a step in units: 1 to 99999 of s, m, h or d.
var stepPattern = regexp.MustCompile(`^([1-9][0-9]{0,4})(s|m|h|d)$`)

var units = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}

// ParseSpan reads a time span for a command line: a Go duration (90m,
// 1h30m) or a whole number of days ("7d"); it must be positive.
func ParseSpan(s string) (time.Duration, error) {
	if m := stepPattern.FindStringSubmatch(s); m != nil && m[2] == "d" {
		n, _ := strconv.Atoi(m[1])
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration such as 90s, 1h or 7d", s)
	}
	return d, nil
}

// CheckStep checks a bucket width: at least a second, in whole seconds
// (the counts are kept per second).
func CheckStep(d time.Duration) error {
	if d < time.Second || d%time.Second != 0 {
		return fmt.Errorf("step %v must be a whole number of seconds, at least 1s (counts are kept per second)", d)
	}
	return nil
}

// maxTime is the latest time a forecast may reach: the end of 9999 (Unix ms).
const maxTime = 253402300799999

// Plan is a validated forecast request in whole seconds: buckets
// [From+i*Step, min(From+(i+1)*Step, To)) for i < N.
type Plan struct {
	From, To, Step int64
	N              int
}

// NewPlan checks a request for the buckets of [from, to) (Unix ms) of
// width step. from is rounded down and to up to whole seconds, since the
// counts are kept per second.
func NewPlan(from, to int64, step time.Duration) (Plan, error) {
	if err := CheckStep(step); err != nil {
		return Plan{}, err
	}
	if from < 0 {
		return Plan{}, fmt.Errorf("from %d is before the Unix epoch", from)
	}
	if to > maxTime {
		return Plan{}, fmt.Errorf("to %d is beyond the year 9999", to)
	}
	if from >= to {
		return Plan{}, fmt.Errorf("from %d must be before to %d", from, to)
	}
	p := Plan{From: SecondOf(from), To: SecondOf(to + 999), Step: int64(step / time.Second)}
	n := (p.To - p.From + p.Step - 1) / p.Step
	if n > MaxBuckets {
		return Plan{}, fmt.Errorf("[from, to) at step %v makes %d buckets; the limit is %d: use a larger step or a shorter range", step, n, MaxBuckets)
	}
	p.N = int(n)
	return p, nil
}

// Bucket is one bucket of a forecast: Count messages fall due in
// [Start, End), Unix milliseconds.
type Bucket struct {
	Start, End int64
	Count      int64
}

// Run answers the plan from c.
func (p Plan) Run(c *Counts) []Bucket {
	out := make([]Bucket, p.N)
	p.RunInto(c, out, 0, p.N)
	return out
}

// RunInto counts buckets [i, j) of the plan into out[i:j] (out has p.N
// buckets): a caller that guards c with a lock can release it between
// slices of a long plan.
func (p Plan) RunInto(c *Counts, out []Bucket, i, j int) {
	for ; i < j; i++ {
		a := p.From + int64(i)*p.Step
		b := min(a+p.Step, p.To)
		out[i] = Bucket{Start: a * 1000, End: b * 1000, Count: c.Sum(a, b)}
	}
}
