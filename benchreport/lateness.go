package benchreport

import (
	"math"
	"slices"
	"time"
)

// Lateness summarises a set of lateness observations (arrival minus due
// time). All values are milliseconds with microsecond resolution; a
// negative value is an early arrival. The quantiles use the nearest-rank
// definition: Pq is the smallest observation such that at least q% of the
// observations are at or below it, so every reported value is one that
// was actually observed.
type Lateness struct {
	// Count is the number of observations summarised.
	Count int     `json:"count"`
	Min   float64 `json:"min_ms"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p99_9_ms"`
	Max   float64 `json:"max_ms"`
}

// percentile returns the nearest-rank q-th percentile (0 < q <= 100) of
// sorted, which must be sorted ascending and not empty.
func percentile(sorted []int64, q float64) int64 {
	n := len(sorted)
	// The rank is ceil(q/100 * n), computed in integers where possible so
	// that q = 99.9 over 1000 values gives rank 999, not 1000 through a
	// rounding error.
	rank := int(math.Ceil(q*float64(n)/100 - 1e-9))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// Summarize returns the summary of the lateness values ns (nanoseconds).
// It sorts ns in place. An empty input gives a zero Lateness.
func Summarize(ns []int64) Lateness {
	if len(ns) == 0 {
		return Lateness{}
	}
	slices.Sort(ns)
	var sum float64
	for _, v := range ns {
		sum += float64(v)
	}
	return Lateness{
		Count: len(ns),
		Min:   NsToMs(ns[0]),
		Mean:  roundMs(sum / float64(len(ns)) / 1e6),
		P50:   NsToMs(percentile(ns, 50)),
		P95:   NsToMs(percentile(ns, 95)),
		P99:   NsToMs(percentile(ns, 99)),
		P999:  NsToMs(percentile(ns, 99.9)),
		Max:   NsToMs(ns[len(ns)-1]),
	}
}

// NsToMs converts nanoseconds to milliseconds rounded to the microsecond.
func NsToMs(ns int64) float64 { return roundMs(float64(ns) / 1e6) }

// roundMs rounds a millisecond value to three decimals (microseconds).
func roundMs(ms float64) float64 { return math.Round(ms*1000) / 1000 }

// Rate is count per second over the span [from, to] (Unix ns); zero when
// the span is empty. A single event gives zero, not infinity.
func Rate(count int, from, to int64) float64 {
	if count < 2 || to <= from {
		return 0
	}
	return math.Round(float64(count)/(time.Duration(to-from).Seconds())*10) / 10
}
