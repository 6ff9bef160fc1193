package timerstore

import (
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// TestSizesSnapshotMatchesSizes: after random adds, sync jobs, removals,
// trims and a reset, every snapshot's map equals what Sizes returns at the
// same instant, although it copies only the buckets changed since the
// previous snapshot; earlier snapshots' maps do not change afterwards.
// Remove, which skips its scan while no bucket has ended, still forgets
// every bucket that has.
func TestSizesSnapshotMatchesSizes(t *testing.T) {
	s, err := Open(vfs.NewMem(), "timers", 1000)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, 8))
	type kept struct {
		snap *SizesSnap
		want map[int64]int64
	}
	var old []kept
	removedTo := int64(0)
	for step := range 400 {
		switch op := rng.IntN(10); {
		case op < 6:
			due := removedTo + rng.Int64N(50_000)
			if err := s.Add(Entry{Due: due, Pos: uint64(step + 1), Kind: 1}); err != nil {
				t.Fatal(err)
			}
		case op < 7:
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
		case op < 8:
			syncAll(t, s)
		case op < 9:
			removedTo += rng.Int64N(5_000)
			if _, err := s.Remove(removedTo); err != nil {
				t.Fatal(err)
			}
			for b := range s.sizes {
				if b+s.width <= removedTo {
					t.Fatalf("step %d: bucket %d ended by %d is still there after Remove", step, b, removedTo)
				}
			}
		default:
			// Cut one written bucket back to empty or to one entry, as
			// recovery's Trim would to what the checkpoint recorded
			// (recovery has nothing buffered or unsynced).
			syncAll(t, s)
			keep := s.Sizes()
			for b, n := range keep {
				if n > EntrySize && step%2 == 0 {
					keep[b] = EntrySize
				} else {
					delete(keep, b)
				}
				break
			}
			if err := s.Trim(keep); err != nil {
				t.Fatal(err)
			}
		}
		if step == 200 {
			if err := s.Reset(); err != nil {
				t.Fatal(err)
			}
		}
		if rng.IntN(3) == 0 {
			want := s.Sizes()
			p := s.SizesSnapshot()
			if got := p.Map(); !maps.Equal(got, want) {
				t.Fatalf("step %d: snapshot has %d buckets, Sizes %d", step, len(got), len(want))
			}
			old = append(old, kept{p, want})
		}
	}
	if len(old) < 50 {
		t.Fatalf("only %d snapshots taken", len(old))
	}
	for i, k := range old {
		if !maps.Equal(k.snap.Map(), k.want) {
			t.Fatalf("snapshot %d changed after it was taken", i)
		}
	}
}

// syncAll runs a sync job of s to its end.
func syncAll(t *testing.T, s *Store) {
	t.Helper()
	j := s.PrepareSync()
	err := j.Run(4)
	s.Complete(j, err)
	if err != nil {
		t.Fatal(err)
	}
}
