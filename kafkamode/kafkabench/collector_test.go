package kafkabench

import (
	"testing"
	"time"
)

// TestScoreCountsEveryArrival: the strict counts see each way a message
// can go wrong: never arriving, arriving twice, arriving before its due
// time, and a record nobody produced; the lateness after a kill covers
// only the messages due from the kill on.
func TestScoreCountsEveryArrival(t *testing.T) {
	p := produced{due: map[string]int64{"a": 1000, "b": 2000, "c": 3000, "d": 4000}, tier: map[string]time.Duration{}}
	col := &collector{arr: map[string][]int64{
		"a":     {1010},       // 10 ms late
		"b":     {1990, 2100}, // early, then again
		"d":     {4500},       // 500 ms late, after the kill
		"stray": {5000},       // not produced by the run
	}}
	var r Result
	col.score(p, 0, time.UnixMilli(3500), &r)
	if r.Lost != 1 || r.Dup != 2 || r.Early != 1 {
		t.Fatalf("lost %d, duplicated %d, early %d; want 1, 2, 1", r.Lost, r.Dup, r.Early)
	}
	if r.P50 != 10 || r.Max != 500 || r.AfterKillMax != 500 || r.AfterKillP99 != 500 {
		t.Fatalf("p50 %d, max %d, after kill p99 %d / max %d; want 10, 500, 500, 500", r.P50, r.Max, r.AfterKillP99, r.AfterKillMax)
	}
}

// TestRankIsNearestRank: p99 of 100 values is the 99th, not the 100th;
// of 10 values, the 10th.
func TestRankIsNearestRank(t *testing.T) {
	v := make([]int64, 100)
	for i := range v {
		v[i] = int64(100 - i)
	}
	if got := rank(v, 99); got != 99 {
		t.Errorf("p99 of 1..100 = %d, want 99", got)
	}
	if got := rank(v[:10], 99); got != 10 {
		t.Errorf("p99 of ten values = %d, want the largest, 10", got)
	}
	if got := rank(nil, 50); got != 0 {
		t.Errorf("p50 of none = %d, want 0", got)
	}
}
