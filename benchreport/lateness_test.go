package benchreport

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestSummarizeKnownData(t *testing.T) {
	// 1 ms .. 1000 ms in random order: the nearest-rank percentiles are
	// the values of rank ceil(q% of 1000).
	ns := make([]int64, 1000)
	for i := range ns {
		ns[i] = int64(i+1) * int64(time.Millisecond)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(ns), func(i, j int) { ns[i], ns[j] = ns[j], ns[i] })
	got := Summarize(ns)
	want := Lateness{Count: 1000, Min: 1, Mean: 500.5, P50: 500, P95: 950, P99: 990, P999: 999, Max: 1000}
	if got != want {
		t.Errorf("Summarize(1..1000 ms) = %+v, want %+v", got, want)
	}
}

func TestSummarizeSmallAndSkewed(t *testing.T) {
	cases := []struct {
		name string
		in   []int64 // microseconds
		want Lateness
	}{
		{"one value", []int64{1500}, Lateness{Count: 1, Min: 1.5, Mean: 1.5, P50: 1.5, P95: 1.5, P99: 1.5, P999: 1.5, Max: 1.5}},
		// Ten values: p50 is rank 5, p95 rank ceil(9.5) = 10.
		{"ten values", []int64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100},
			Lateness{Count: 10, Min: 0.01, Mean: 0.055, P50: 0.05, P95: 0.1, P99: 0.1, P999: 0.1, Max: 0.1}},
		// An early arrival stays negative; one outlier owns the tail.
		{"negative and outlier", []int64{-250, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 2_000_000},
			Lateness{Count: 10, Min: -0.25, Mean: 200.775, P50: 1, P95: 2000, P99: 2000, P999: 2000, Max: 2000}},
	}
	for _, c := range cases {
		ns := make([]int64, len(c.in))
		for i, us := range c.in {
			ns[i] = us * int64(time.Microsecond)
		}
		if got := Summarize(ns); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
	if got := Summarize(nil); got != (Lateness{}) {
		t.Errorf("Summarize(nil) = %+v, want the zero value", got)
	}
}

func TestPercentileRanks(t *testing.T) {
	// 100,000 values 1..100000: p99.9 is rank 99,900 exactly, a case
	// where floating-point rounding could pick the next rank.
	ns := make([]int64, 100000)
	for i := range ns {
		ns[i] = int64(i + 1)
	}
	for _, c := range []struct {
		q    float64
		want int64
	}{{50, 50000}, {95, 95000}, {99, 99000}, {99.9, 99900}, {100, 100000}, {0.0001, 1}} {
		if got := percentile(ns, c.q); got != c.want {
			t.Errorf("percentile(1..100000, %g) = %d, want %d", c.q, got, c.want)
		}
	}
}

func TestRate(t *testing.T) {
	sec := int64(time.Second)
	if got := Rate(1000, 0, 2*sec); got != 500 {
		t.Errorf("Rate(1000 over 2s) = %v, want 500", got)
	}
	if got := Rate(1, 5, 5); got != 0 {
		t.Errorf("rate of one event = %v, want 0", got)
	}
	if got := Rate(10, 3*sec, 3*sec); got != 0 {
		t.Errorf("rate over an empty span = %v, want 0", got)
	}
}
