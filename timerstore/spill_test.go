package timerstore

import (
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// spill runs a PrepareSpill job to its Complete and returns the state.
func spill(t *testing.T, s *Store) []byte {
	t.Helper()
	j, err := s.PrepareSpill()
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Complete(j, j.Run())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSpillMergesNoRun: a spill writes only what it froze, where a
// checkpoint's Prepare would merge the run before into it (the older runs
// grow with the pending timers, not with what recovery replays), until
// the run set would exceed maxRuns; every entry still loads, and a reopen
// counts each bucket's entries again.
func TestSpillMergesNoRun(t *testing.T) {
	mem := vfs.NewMem()
	s := open(t, mem, nil)
	pos := uint64(0)
	add := func(n int) {
		for range n {
			pos++
			s.Add(entry(int64(pos*7)%(50*width), pos))
		}
	}
	add(100)
	checkpoint(t, s)
	add(100)
	st := spill(t, s)
	if s.Runs() != 2 {
		t.Fatalf("%d runs after a spill beside a run of the same size, want 2 (no merge)", s.Runs())
	}
	for s.Runs() < maxRuns {
		add(100)
		st = spill(t, s)
	}
	add(100)
	st = spill(t, s)
	if s.Runs() > maxRuns {
		t.Fatalf("%d runs after spills, want at most %d", s.Runs(), maxRuns)
	}
	if err := s.Release()(); err != nil {
		t.Fatal(err)
	}
	nb, _ := s.Buckets()
	want := map[int64]int{}
	for p := uint64(1); p <= pos; p++ {
		want[s.BucketOf(int64(p*7)%(50*width))]++
	}
	if nb != len(want) {
		t.Fatalf("%d live buckets, want %d", nb, len(want))
	}
	s2 := open(t, mem, st)
	if nb2, _ := s2.Buckets(); nb2 != nb {
		t.Fatalf("reopened: %d live buckets, want %d", nb2, nb)
	}
	for b, n := range want {
		if got := len(load(t, s2, b)); got != n || s2.count[b] != int64(n) {
			t.Fatalf("bucket %d: loads %d, counted %d, want %d", b, got, s2.count[b], n)
		}
	}
}
