package timerstore

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// Random adds, flushes, sync jobs that succeed or fail (with Remove and
// Add between Prepare and Complete), removals; snapshots whose Map is
// built only at the end; checks: a failed job's buckets are in the next
// job; snapshots equal Sizes at their instant; after a successful job a
// fresh Store on the same files loads every timer prepared by then.
func TestStoreAgainstAModel(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		fs := vfs.NewMem()
		s, err := Open(fs, "timers", 1000)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, seed))
		type kept struct {
			snap *SizesSnap
			want map[int64]int64
		}
		var snaps []kept
		live := map[int64]map[uint64]bool{} // bucket -> positions added, not removed
		removedTo := int64(0)
		pos := uint64(0)
		var mustSync []int64
		var trace []string
		tr := func(f string, a ...any) { trace = append(trace, fmt.Sprintf(f, a...)) }
		defer func() {
			if t.Failed() {
				for _, l := range trace[max(0, len(trace)-40):] {
					t.Log(l)
				}
			}
		}()
		add := func() {
			pos++
			due := removedTo + rng.Int64N(40_000)
			if err := s.Add(Entry{Due: due, Pos: pos, Kind: 1}); err != nil {
				t.Fatal(err)
			}
			b := s.BucketOf(due)
			tr("add %d to bucket %d", pos, b)
			if live[b] == nil {
				live[b] = map[uint64]bool{}
			}
			live[b][pos] = true
		}
		remove := func() {
			removedTo += rng.Int64N(3000)
			tr("remove to %d", removedTo)
			if _, err := s.Remove(removedTo); err != nil {
				t.Fatal(err)
			}
			for b := range live {
				if b+1000 <= removedTo {
					delete(live, b)
				}
			}
		}
		for step := 0; step < 600; step++ {
			switch op := rng.IntN(10); {
			case op < 5:
				add()
			case op < 6:
				tr("flush")
				if err := s.Flush(); err != nil {
					t.Fatal(err)
				}
			case op < 7:
				remove()
			default:
				j := s.PrepareSync()
				tr("prepare: buckets %v", j.buckets)
				for _, b := range mustSync {
					if _, ok := s.sizes[b]; ok && !slices.Contains(j.buckets, b) {
						t.Fatalf("seed %d step %d: bucket %d of a failed job is not in the next job", seed, step, b)
					}
				}
				mustSync = nil
				// work between Prepare and Complete, as the engine allows
				for range rng.IntN(4) {
					if rng.IntN(3) == 0 {
						tr("flush")
						if err := s.Flush(); err != nil {
							t.Fatal(err)
						}
					} else {
						add()
					}
				}
				var err error
				if rng.IntN(3) == 0 {
					err = errors.New("injected")
					mustSync = slices.Clone(j.buckets)
				} else if err = j.Run(2); err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
				tr("complete %v", err)
				s.Complete(j, err)
				if err == nil && len(s.buf) == 0 && len(s.inflight) == 0 && len(s.dirty) == 0 {
					// everything is on disk: a fresh store must see it all
					s2, err := Open(fs, "timers", 1000)
					if err != nil {
						t.Fatal(err)
					}
					checkLive(t, s2, live, fmt.Sprintf("seed %d step %d, on disk", seed, step))
				}
			}
			if rng.IntN(4) == 0 {
				snaps = append(snaps, kept{s.SizesSnapshot(), s.Sizes()})
			}
			// in memory, Load sees every live timer
			if step%50 == 0 {
				checkLive(t, s, live, fmt.Sprintf("seed %d step %d", seed, step))
			}
		}
		for i := len(snaps) - 1; i >= 0; i-- { // newest first: lazy chains
			if !maps.Equal(snaps[i].snap.Map(), snaps[i].want) {
				t.Fatalf("seed %d: snapshot %d differs from Sizes at its instant", seed, i)
			}
		}
	}
}

// checkLive fails unless s loads every live timer (bucket -> positions).
func checkLive(t *testing.T, s *Store, live map[int64]map[uint64]bool, where string) {
	t.Helper()
	for b, ps := range live {
		es, err := s.Load(b)
		if err != nil {
			t.Fatal(err)
		}
		got := map[uint64]bool{}
		for _, e := range es {
			got[e.Pos] = true
		}
		for p := range ps {
			if !got[p] {
				t.Fatalf("%s: timer %d of bucket %d lost", where, p, b)
			}
		}
	}
}
