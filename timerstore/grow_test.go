package timerstore

import (
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// TestBufferGrowsByAQuarter: a bucket's buffer grows by a quarter (at
// least two entries), so a bucket with a few entries more than a power of
// two does not hold twice the room it needs; and what it holds loads back
// intact.
func TestBufferGrowsByAQuarter(t *testing.T) {
	s, err := Open(vfs.NewMem(), "timers", 60_000)
	if err != nil {
		t.Fatal(err)
	}
	s.ManualFlush = true
	for n := 1; n <= 40; n++ {
		if err := s.Add(Entry{Due: int64(n), Pos: uint64(n), Topic: 3, Kind: 1}); err != nil {
			t.Fatal(err)
		}
		room := cap(s.buf[0]) / EntrySize
		if limit := max(n+2, n+n/4+2); room > limit {
			t.Fatalf("%d entries buffered in room for %d, want at most %d", n, room, limit)
		}
	}
	got, err := s.Load(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 40 || got[0].Pos != 1 || got[39].Due != 40 || got[39].Topic != 3 {
		t.Fatalf("loaded %d entries: first %+v, last %+v", len(got), got[0], got[len(got)-1])
	}
}
