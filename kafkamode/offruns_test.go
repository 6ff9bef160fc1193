package kafkamode

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOffsetRunsMatchesASlice drives offsetRuns and a plain ascending
// slice with the same random pushes (gaps of 0 to 2 offsets) and front
// drops, and requires the same offsets after every step.
func TestOffsetRunsMatchesASlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var r offsetRuns
	var model []int64
	next := int64(rng.IntN(100))
	for step := 0; step < 20_000; step++ {
		if rng.IntN(3) > 0 || len(model) == 0 {
			next += int64(rng.IntN(3))
			r.push(next)
			model = append(model, next)
			next++
		} else {
			k := rng.IntN(len(model) + 1)
			r.dropFront(k)
			model = model[k:]
		}
		if r.len() != len(model) {
			t.Fatalf("step %d: len %d, want %d", step, r.len(), len(model))
		}
		if step%97 == 0 && !slices.Equal(r.values(), model) {
			t.Fatalf("step %d: %v, want %v", step, r.values(), model)
		}
	}
	if !slices.Equal(r.values(), model) {
		t.Fatalf("at the end: %v, want %v", r.values(), model)
	}
}

// TestOffsetRunsGaplessIsOneRun: a million consecutive pending offsets
// (a delay partition written without transactions) take one run, not a
// million slots; a gap (a transaction's commit marker) starts a second.
func TestOffsetRunsGaplessIsOneRun(t *testing.T) {
	var r offsetRuns
	for o := int64(0); o < 1_000_000; o++ {
		r.push(o)
	}
	if len(r.runs) != 1 || r.len() != 1_000_000 {
		t.Fatalf("%d runs holding %d offsets, want 1 run of 1,000,000", len(r.runs), r.len())
	}
	r.push(1_000_001)
	r.dropFront(999_999)
	if got := r.values(); !slices.Equal(got, []int64{999_999, 1_000_001}) || len(r.runs) != 2 {
		t.Fatalf("after a gap and a drop: %v in %d runs, want [999999 1000001] in 2", got, len(r.runs))
	}
}
