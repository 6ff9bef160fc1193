package timerstore

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// scanAll pages through s from `from` to hi, limit entries a page, as the
// engine's listing does: the next page starts just after the last entry.
func scanAll(t *testing.T, s *Store, from Entry, hi int64, limit int) (out []Entry, pages, blocks int) {
	t.Helper()
	for {
		res, err := s.ScanPlan(from, hi, limit).Read()
		if err != nil {
			t.Fatal(err)
		}
		pages++
		blocks += res.Blocks
		if len(res.Entries) > limit {
			t.Fatalf("page of %d entries, limit %d", len(res.Entries), limit)
		}
		out = append(out, res.Entries...)
		if !res.More {
			return out, pages, blocks
		}
		last := res.Entries[len(res.Entries)-1]
		from = Entry{Due: last.Due, Pos: last.Pos + 1}
	}
}

// TestScanPagesEveryLiveEntryOnce spreads entries over runs, a frozen
// memtable and the memtable, with pairs added twice and a cut, and checks
// that paging in every page size yields each live (due, pos) pair once,
// in order, within the range asked.
func TestScanPagesEveryLiveEntryOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	s := open(t, vfs.NewMem(), nil)
	model := map[[2]int64]Entry{}
	pos := uint64(0)
	add := func(n int) {
		for range n {
			pos++
			e := entry(rng.Int64N(300*width), pos)
			if rng.IntN(8) == 0 && len(model) > 0 {
				for _, o := range model { // a pair added again
					e = o
					break
				}
			}
			s.Add(e)
			model[[2]int64{e.Due, int64(e.Pos)}] = e
		}
	}
	add(3000)
	checkpoint(t, s)
	add(2000)
	checkpoint(t, s)
	add(500)
	if _, err := s.Prepare(); err != nil { // frozen, its job not run
		t.Fatal(err)
	}
	add(700)
	cut := int64(20 * width)
	s.Remove(cut + 5)
	var want []Entry
	for _, e := range model {
		if e.Due >= cut {
			want = append(want, e)
		}
	}
	slices.SortFunc(want, compareEntries)
	for _, limit := range []int{1, 7, 170, 1000, 100000} {
		got, pages, _ := scanAll(t, s, Entry{Due: math.MinInt64}, math.MaxInt64, limit)
		if !slices.Equal(got, want) {
			for i := range want {
				if i >= len(got) || got[i] != want[i] {
					t.Logf("first difference at %d: got %v, want %v (prev %v)", i, got[min(i, len(got)-1)], want[i], want[max(i-1, 0)])
					break
				}
			}
			t.Fatalf("limit %d: %d entries in %d pages, want %d", limit, len(got), pages, len(want))
		}
	}
	// A range: from the middle of a bucket, to another's middle.
	lo, hi := int64(100*width+333), int64(200*width+777)
	var wantRange []Entry
	for _, e := range want {
		if e.Due >= lo && e.Due < hi {
			wantRange = append(wantRange, e)
		}
	}
	got, _, _ := scanAll(t, s, Entry{Due: lo}, hi, 50)
	if !slices.Equal(got, wantRange) || len(got) == 0 {
		t.Fatalf("range: %d entries, want %d", len(got), len(wantRange))
	}
}

// TestScanPageReadsAPageOfBlocks holds a page's cost to the page: a page
// of 100 from the middle of a run of 100,000 entries reads a few blocks,
// not the run.
func TestScanPageReadsAPageOfBlocks(t *testing.T) {
	s := open(t, vfs.NewMem(), nil)
	for i := range 100_000 {
		s.Add(entry(int64(i)*10, uint64(i+1)))
	}
	checkpoint(t, s)
	res, err := s.ScanPlan(Entry{Due: 500_000}, math.MaxInt64, 100).Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 100 || res.Entries[0].Due != 500_000 || !res.More {
		t.Fatalf("page: %d entries from %d, more %v", len(res.Entries), res.Entries[0].Due, res.More)
	}
	if res.Blocks > 3 {
		t.Fatalf("a page of 100 read %d blocks; want at most 3 (170 entries a block)", res.Blocks)
	}
}
