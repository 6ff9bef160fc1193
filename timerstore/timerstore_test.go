package timerstore

import (
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

func TestAddLoadDedupeAndReopen(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open(fs, "timers", 1000)
	if err != nil {
		t.Fatal(err)
	}
	in := []Entry{{Due: 2500, Pos: 7, Topic: 1, Queue: 2, Kind: 1}, {Due: 2100, Pos: 9, Topic: 1, Kind: 1}, {Due: 5000, Pos: 11, Kind: 1}}
	for _, e := range in {
		if err := s.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Add(in[0]); err != nil { // a replayed duplicate
		t.Fatal(err)
	}
	// Buffered entries are visible to Load before any flush.
	got, err := s.Load(2000)
	if err != nil || len(got) != 2 || got[0] != in[1] || got[1] != in[0] {
		t.Fatalf("load buffered: %+v %v", got, err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	// After a power loss the synced buckets are complete.
	crashed := fs.Crash(nil)
	s2, err := Open(crashed, "timers", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := s2.NextBucket(0); !ok || b != 2000 {
		t.Fatalf("next bucket %d %v", b, ok)
	}
	if b, ok := s2.NextBucket(3000); !ok || b != 5000 {
		t.Fatalf("next bucket after 3000: %d %v", b, ok)
	}
	got, _ = s2.Load(2000)
	if len(got) != 2 {
		t.Fatalf("after crash: %+v", got)
	}
	n, err := s2.Remove(3000)
	if err != nil || n != 1 {
		t.Fatalf("remove: %d %v", n, err)
	}
	if got, _ := s2.Load(2000); len(got) != 0 {
		t.Fatalf("removed bucket still loads %+v", got)
	}
	if _, err := Open(crashed, "timers", 300); err == nil {
		t.Fatal("a different bucket width was accepted for the same directory")
	}
}

func TestBucketOfNegative(t *testing.T) {
	s, _ := Open(vfs.NewMem(), "t", 1000)
	for _, c := range [][2]int64{{0, 0}, {999, 0}, {1000, 1000}, {-1, -1000}, {-1000, -1000}} {
		if got := s.BucketOf(c[0]); got != c[1] {
			t.Errorf("BucketOf(%d) = %d, want %d", c[0], got, c[1])
		}
	}
}

func TestTrimToCheckpoint(t *testing.T) {
	fs := vfs.NewMem()
	s, _ := Open(fs, "timers", 1000)
	s.Add(Entry{Due: 10, Pos: 1, Kind: 1})
	s.Add(Entry{Due: 5010, Pos: 2, Kind: 1})
	s.Sync()
	keep := s.Sizes()
	// Written after the checkpoint: one more entry in an old bucket and a new bucket.
	s.Add(Entry{Due: 20, Pos: 3, Kind: 1})
	s.Add(Entry{Due: 9010, Pos: 4, Kind: 1})
	s.Sync()
	s2, _ := Open(fs, "timers", 1000)
	if err := s2.Trim(keep); err != nil {
		t.Fatal(err)
	}
	if got, _ := s2.Load(0); len(got) != 1 || got[0].Pos != 1 {
		t.Fatalf("bucket 0 after trim: %+v", got)
	}
	if got, _ := s2.Load(9000); len(got) != 0 {
		t.Fatalf("bucket created after the checkpoint survived: %+v", got)
	}
	if n, _ := s2.Buckets(); n != 2 {
		t.Fatalf("%d buckets after trim, want 2", n)
	}
}

func TestSyncJobOutsideTheLock(t *testing.T) {
	fs := vfs.NewMem()
	s, _ := Open(fs, "timers", 1000)
	s.Add(Entry{Due: 10, Pos: 1, Kind: 1})
	j := s.PrepareSync()
	// Before the job runs, the entry is still loadable and later adds to
	// the same (not yet created) file stay buffered through a Flush.
	s.Add(Entry{Due: 20, Pos: 2, Kind: 1})
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(0); err != nil || len(got) != 2 {
		t.Fatalf("load during a pending job: %+v %v", got, err)
	}
	if err := j.Run(2); err != nil {
		t.Fatal(err)
	}
	s.Complete(j, nil)
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	// Both entries reached the disk durably, in order.
	s2, _ := Open(fs.Crash(nil), "timers", 1000)
	got, err := s2.Load(0)
	if err != nil || len(got) != 2 || got[0].Pos != 1 || got[1].Pos != 2 {
		t.Fatalf("after crash: %+v %v", got, err)
	}
}
