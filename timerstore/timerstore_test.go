package timerstore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

const (
	dir   = "timers"
	width = 1000
)

func open(t testing.TB, fs vfs.FS, st []byte) *Store {
	t.Helper()
	s, err := Open(fs, dir, width, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// checkpoint runs a whole job cycle, releasing as the engine does once its
// checkpoint is durable, and returns the state.
func checkpoint(t testing.TB, s *Store) []byte {
	t.Helper()
	j, err := s.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Complete(j, j.Run())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release()(); err != nil {
		t.Fatal(err)
	}
	return st
}

func entry(due int64, pos uint64) Entry {
	return Entry{Due: due, Pos: pos, Topic: uint32(pos % 7), Queue: uint16(pos % 3), Kind: uint8(pos % 2)}
}

func load(t testing.TB, s *Store, b int64) []Entry {
	t.Helper()
	es, err := s.Load(b)
	if err != nil {
		t.Fatalf("load %d: %v", b, err)
	}
	return es
}

func runFiles(t testing.TB, fs vfs.FS) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// TestModel drives a store with random adds, removals, checkpoints (some
// failing), loads and reopens, against a model of the live entries.
func TestModel(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, seed) })
	}
}

func runModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	ffs := vfs.NewFaulty(vfs.NewMem())
	s, err := Open(ffs, dir, width, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	live := map[Entry]bool{}
	var state []byte
	var sinceState []Entry // added after the Prepare of the durable state
	var afterPrep []Entry  // added after the last Prepare
	// removedSince holds what Removes took since the durable state was
	// completed: that state still holds it live, so a reopen brings it
	// back (the engine's loads filter such entries as already visible).
	removedSince := map[Entry]bool{}
	cutMax := int64(-1 << 62)
	pos := uint64(0)
	for step := range 3000 {
		switch op := rng.IntN(100); {
		case op < 60:
			pos++
			e := entry(rng.Int64N(200*width), pos)
			if rng.IntN(10) == 0 && len(sinceState) > 0 {
				e = sinceState[rng.IntN(len(sinceState))] // a pair added twice
			}
			s.Add(e)
			live[e] = true
			sinceState, afterPrep = append(sinceState, e), append(afterPrep, e)
		case op < 65:
			t0 := rng.Int64N(200 * width)
			s.Remove(t0)
			cut := s.BucketOf(t0)
			cutMax = max(cutMax, cut)
			for e := range live {
				if e.Due < cut {
					delete(live, e)
					removedSince[e] = true
				}
			}
		case op < 75:
			j, err := s.Prepare()
			if err != nil {
				t.Fatal(err)
			}
			prepared := afterPrep
			afterPrep = nil
			if rng.IntN(4) == 0 {
				// A failure somewhere in the job: a full disk, a failed
				// fsync of the file or of the directory.
				n := rng.IntN(6)
				ffs.Inject(func(op vfs.Op, _ string) error {
					if op != vfs.OpWrite && op != vfs.OpSync && op != vfs.OpSyncDir && op != vfs.OpCreate {
						return nil
					}
					if n--; n < 0 {
						return syscall.EIO
					}
					return nil
				})
			}
			err = j.Run()
			ffs.Inject(nil)
			st, err := s.Complete(j, err)
			if err != nil {
				if !errors.Is(err, syscall.EIO) {
					t.Fatalf("step %d: %v", step, err)
				}
				afterPrep = append(prepared, afterPrep...) // the next job writes them
				continue
			}
			if err := s.Release()(); err != nil {
				t.Fatal(err)
			}
			state, sinceState = st, slices.Clone(afterPrep)
			clear(removedSince)
		case op < 95:
			b := s.BucketOf(rng.Int64N(200 * width))
			checkBucket(t, s, live, b, step)
		default:
			// Crash and recover: the durable state, then what the log holds
			// after it re-added.
			s.Close()
			var err error
			if s, err = Open(ffs, dir, width, state, nil); err != nil {
				t.Fatalf("step %d: reopen: %v", step, err)
			}
			for _, e := range sinceState {
				s.Add(e)
				live[e] = true
			}
			for e := range removedSince {
				live[e] = true
			}
			afterPrep = slices.Clone(sinceState)
			for b := s.BucketOf(max(cutMax, 0)); b < 200*width; b += width * 17 {
				checkBucket(t, s, live, b, step)
			}
		}
	}
	s.Close()
}

// checkBucket compares a load of bucket b with the model.
func checkBucket(t *testing.T, s *Store, live map[Entry]bool, b int64, step int) {
	t.Helper()
	var want []Entry
	for e := range live {
		if e.Due >= b && e.Due < b+width {
			want = append(want, e)
		}
	}
	slices.SortFunc(want, func(a, b Entry) int {
		if a.before(b) {
			return -1
		}
		return 1
	})
	got := load(t, s, b)
	if !slices.Equal(got, want) {
		t.Fatalf("step %d: bucket %d: got %d entries %v\nwant %d %v", step, b, len(got), got, len(want), want)
	}
}
