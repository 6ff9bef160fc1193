package keyindex

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// world is the property test's broker: an index, the puts of its "log",
// and what its durable checkpoint holds.
type world struct {
	t     *testing.T
	rng   *rand.Rand
	mem   *vfs.Mem
	x     *Index
	model map[uint64]uint64 // hash -> greatest position ever put
	log   []kv              // every put, in log order
	// stored is the state of the durable checkpoint, covering log[:mark].
	stored []byte
	mark   int
	// job is the outstanding job, prepared at log[:jobMark]; ran says
	// whether it has run, and runErr is what Run returned.
	job     *Job
	jobMark int
	ran     bool
	runErr  error
	pos     uint64
}

func (w *world) put() {
	w.pos += 10
	// Senders reach Put in lock order, not log order: jitter positions.
	p := w.pos - uint64(w.rng.IntN(25))
	h := spread(w.rng.IntN(300))
	w.x.Put(h, p)
	w.log = append(w.log, kv{h, p})
	w.model[h] = max(w.model[h], p)
}

// step advances the outstanding job, or prepares one.
func (w *world) step() {
	switch {
	case w.job == nil:
		j, err := w.x.Prepare()
		if err != nil {
			w.t.Fatal(err)
		}
		w.job, w.jobMark, w.ran = j, len(w.log), false
	case !w.ran:
		w.runErr, w.ran = w.job.Run(), true
	default:
		st, err := w.x.Complete(w.job, w.runErr)
		if err != nil {
			w.t.Fatal(err)
		}
		// Sometimes the caller's checkpoint write is lost: the stored
		// state stays the previous one and nothing is released.
		if w.rng.IntN(4) > 0 {
			w.stored, w.mark = st, w.jobMark
			if err := w.x.Release(w.job); err != nil {
				w.t.Fatal(err)
			}
		}
		w.job = nil
	}
}

// crash takes a power-loss image, opens it from the stored state and
// re-puts the log after the checkpoint, as the engine's recovery does.
func (w *world) crash() {
	w.x.Close()
	w.mem = w.mem.Crash(w.rng)
	x, err := Open(w.mem, dir, w.stored, 0)
	if err != nil {
		w.t.Fatalf("open after crash: %v", err)
	}
	for _, e := range w.log[w.mark:] {
		x.Put(e.h, e.pos)
	}
	w.x, w.job = x, nil
	w.checkAll()
}

func (w *world) checkAll() {
	for h, p := range w.model {
		wantGet(w.t, w.x, h, p)
	}
}

// TestProperty: under random sequences of Put, Prepare, Run, Complete,
// lost checkpoints and power losses at any point, Get answers the model's
// greatest position for every key.
func TestProperty(t *testing.T) {
	for seed := range uint64(10) {
		w := &world{t: t, rng: rand.New(rand.NewPCG(seed, 7)), mem: vfs.NewMem(), model: map[uint64]uint64{}, pos: 1000}
		x, err := Open(w.mem, dir, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		w.x = x
		for range 2000 {
			switch r := w.rng.IntN(100); {
			case r < 70:
				w.put()
			case r < 97:
				w.step()
			default:
				w.crash()
			}
			h := spread(w.rng.IntN(300))
			wantGet(t, w.x, h, w.model[h])
		}
		w.checkAll()
		w.x.Close()
	}
}

// TestConcurrentGets: Gets running alongside Puts, jobs, merges, Releases
// and a Close answer right or fail with ErrClosed (run with -race).
func TestConcurrentGets(t *testing.T) {
	x, err := Open(vfs.NewMem(), dir, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	const stable = 500
	for i := range stable {
		x.Put(spread(i), uint64(i+1))
	}
	checkpoint(t, x)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			for i := g; ; i++ {
				k := i % stable
				p, ok, err := x.Get(spread(k))
				if err == nil && (!ok || p != uint64(k+1)) {
					t.Errorf("key %d: %d %v", k, p, ok)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for c := range 40 {
		for i := range 50 {
			x.Put(spread(stable+c*50+i), 1)
		}
		checkpoint(t, x)
	}
	x.Close()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != ErrClosed {
			t.Fatal(err)
		}
	}
}
