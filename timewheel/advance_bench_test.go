package timewheel

import (
	"slices"
	"testing"
	"time"
)

// herdSize is the herd of issue 8: a million timers due at one instant.
const herdSize = 1_000_000

// herdBudget is the AdvanceN budget the benchmarks use: about what one
// fire batch of the engine takes.
const herdBudget = 4096

// benchHerd measures expiring a herd of herdSize timers due at one tick,
// ahead ticks after the clock (1: in a level-0 bucket; 1000 with 512 slots:
// in a level-1 bucket, so that it first moves down a level), with advance.
// One op is the whole herd; the timers are reused, so the steady state
// allocates nothing. It reports the calls per herd and the mean, 99th
// percentile and longest time of one call: how long a caller holding its
// lock around each call keeps others waiting. On a loaded machine the
// longest includes the call being descheduled; the percentile does not.
func benchHerd(b *testing.B, ahead int64, advance func(w *Wheel[int], now int64, fire func(*Timer[int])) bool) {
	w := New[int](1, 512, 0)
	timers := make([]Timer[int], herdSize)
	fired := 0
	fire := func(*Timer[int]) { fired++ }
	var now int64
	var total time.Duration
	// Room for every call, made before the clock starts: at most two
	// passes (move down, fire) of herdSize/herdBudget calls per herd.
	took := make([]time.Duration, 0, b.N*(2*herdSize/herdBudget+4))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for i := range timers {
			w.Add(&timers[i], now+ahead)
		}
		now += ahead
		b.StartTimer()
		for more := true; more; {
			start := time.Now()
			more = advance(w, now, fire)
			d := time.Since(start)
			total += d
			took = append(took, d)
		}
	}
	if fired != b.N*herdSize || w.Len() != 0 {
		b.Fatalf("fired %d of %d, Len %d", fired, b.N*herdSize, w.Len())
	}
	b.StopTimer()
	slices.Sort(took)
	calls := len(took)
	b.ReportMetric(float64(calls)/float64(b.N), "calls/op")
	b.ReportMetric(float64(total.Nanoseconds())/float64(calls), "ns/call")
	b.ReportMetric(float64(took[calls*99/100].Nanoseconds()), "p99-ns/call")
	b.ReportMetric(float64(took[calls-1].Nanoseconds()), "max-ns/call")
}

// advanceAll is one Advance: the whole herd in one call.
func advanceAll(w *Wheel[int], now int64, fire func(*Timer[int])) bool {
	w.Advance(now, fire)
	return false
}

// advanceBudget is one AdvanceN call with the herd budget.
func advanceBudget(w *Wheel[int], now int64, fire func(*Timer[int])) bool {
	_, more := w.AdvanceN(now, herdBudget, fire)
	return more
}

// BenchmarkHerdAdvance is the baseline: a herd of 1M due at the next tick,
// expired by one Advance.
func BenchmarkHerdAdvance(b *testing.B) { benchHerd(b, 1, advanceAll) }

// BenchmarkHerdAdvanceN expires the same herd with AdvanceN(now, 4096).
func BenchmarkHerdAdvanceN(b *testing.B) { benchHerd(b, 1, advanceBudget) }

// BenchmarkHerdCascadeAdvance is the baseline for a herd that first moves
// down from a level-1 bucket: one Advance straight to its tick.
func BenchmarkHerdCascadeAdvance(b *testing.B) { benchHerd(b, 1000, advanceAll) }

// BenchmarkHerdCascadeAdvanceN is the same with AdvanceN(now, 4096); the
// move down a level is spread over calls as well.
func BenchmarkHerdCascadeAdvanceN(b *testing.B) { benchHerd(b, 1000, advanceBudget) }
