package timerstore

import (
	"maps"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

func TestTouchCompactionKeepsSnapshotsExact(t *testing.T) {
	s, _ := Open(vfs.NewMem(), "timers", 1000)
	s.Add(Entry{Due: 5, Pos: 1, Kind: 1})
	s.Flush()
	p0 := s.SizesSnapshot()
	w0 := s.Sizes()
	for i := 0; i < 10000; i++ {
		s.Add(Entry{Due: int64(i%7) * 1000, Pos: uint64(i + 2), Kind: 1})
		if i%3 == 0 {
			s.Flush()
		} else if i%3 == 1 {
			j := s.PrepareSync()
			s.Complete(j, j.Run(1))
		}
		if i == 6000 {
			s.Remove(3000)
		}
	}
	if len(s.changed) > 2*len(s.sizes)+4096 {
		t.Fatalf("changed %d", len(s.changed))
	}
	w1 := s.Sizes()
	p1 := s.SizesSnapshot()
	if !maps.Equal(p1.Map(), w1) || !maps.Equal(p0.Map(), w0) {
		t.Fatal("differs")
	}
}
