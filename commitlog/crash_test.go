package commitlog

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/vfs"
)

// ack is an acknowledged record: where it went and what it was.
type ack struct {
	pos         Pos
	writer, seq int
}

// crashState is a power-loss image with the acknowledgements that must
// survive in it.
type crashState struct {
	img  *vfs.Mem
	acks []ack // every record acknowledged (durably) before the image
	seed uint64
}

// powerLossRun runs concurrent appenders on a fresh Mem and takes the image
// a power loss would leave just before every file operation of the log
// (before a write: the last durable state; before an fdatasync: a random
// prefix of the bytes in flight). Then it checks recovery of every image.
// It returns the number of crash states evaluated and how many of them
// needed a repair (a torn tail cut).
func powerLossRun(t *testing.T, run int, policy FlushPolicy, callsPerWriter int) (states, repaired int) {
	mem := newMem(t)
	fsys := vfs.NewFaulty(mem)
	l, err := Open(Options{FS: fsys, Dir: testDir, SegmentBytes: 384, Flush: policy, FlushInterval: 200 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	pl := &powerLoss{}
	rng := rand.New(rand.NewPCG(uint64(run), 99))
	fsys.Inject(func(op vfs.Op, name string) error {
		switch op {
		case vfs.OpWrite, vfs.OpSync, vfs.OpSyncDir, vfs.OpCreate, vfs.OpTruncate:
		default:
			return nil
		}
		// Acknowledged before the image, hence durable in it.
		pl.mu.Lock()
		st := crashState{acks: pl.acks[:pl.durable:pl.durable], seed: rng.Uint64()}
		pl.mu.Unlock()
		if op == vfs.OpSync || len(pl.imgs)%2 == 0 {
			st.img = mem.Crash(rand.New(rand.NewPCG(st.seed, 1)))
		} else {
			st.img = mem.Crash(nil)
		}
		pl.imgs = append(pl.imgs, st)
		return nil
	})
	const writers = 4
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() { pl.write(t, l, run, w, policy, callsPerWriter) })
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	fsys.Inject(nil)
	if len(l.Segments()) < 3 {
		t.Errorf("run %d: only %d segments; rolls were not exercised", run, len(l.Segments()))
	}
	return len(pl.imgs), checkCrashImages(t, run, policy, pl.imgs)
}

// powerLoss is the state of one power-loss run shared by its writers and
// the fault hook that takes the crash images.
type powerLoss struct {
	mu      sync.Mutex
	acks    []ack        // append-only, so a prefix never changes
	durable int          // acks[:durable] are durable (under FlushAsync, by Sync)
	imgs    []crashState // appended by the hook, on the writer goroutine
}

// write is writer w: callsPerWriter appends of 1 to 3 records, each
// acknowledged record noted in pl.acks; durable follows every append under
// FlushSync, and a Sync in about one call of four under FlushAsync.
func (pl *powerLoss) write(t *testing.T, l *Log, run, w int, policy FlushPolicy, callsPerWriter int) {
	rng := rand.New(rand.NewPCG(uint64(run), uint64(w)))
	for seq, call := 0, 0; call < callsPerWriter; call++ {
		recs := make([]Record, 1+rng.IntN(3))
		for i := range recs {
			recs[i] = Record{Type: testType(seq + i), Payload: testPayload(w, seq+i, rng.IntN(12))}
		}
		pos, err := l.Append(recs...)
		if err != nil {
			t.Errorf("Append: %v", err)
			return
		}
		pl.mu.Lock()
		for i := range recs {
			pl.acks = append(pl.acks, ack{pos[i], w, seq + i})
		}
		if policy == FlushSync {
			pl.durable = len(pl.acks)
		}
		n := len(pl.acks)
		pl.mu.Unlock()
		seq += len(recs)
		if policy == FlushAsync && rng.IntN(4) == 0 {
			if err := l.Sync(); err != nil {
				t.Errorf("Sync: %v", err)
				return
			}
			pl.mu.Lock()
			pl.durable = max(pl.durable, n)
			pl.mu.Unlock()
		}
	}
}

// checkCrashImages checks every crash image on both cores and returns how
// many of them needed a repair.
func checkCrashImages(t *testing.T, run int, policy FlushPolicy, imgs []crashState) int {
	var next, repairs atomic.Int64
	var vg sync.WaitGroup
	for range 2 {
		vg.Add(1)
		go func() {
			defer vg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(imgs) {
					return
				}
				repaired, err := checkCrashState(imgs[i], i)
				if err != nil {
					t.Errorf("run %d (%v) image %d: %v", run, policy, i, err)
					return
				}
				if repaired {
					repairs.Add(1)
				}
			}
		}()
	}
	vg.Wait()
	return int(repairs.Load())
}

// checkCrashState recovers one image and checks it: Open succeeds; every
// acknowledged record is present, at its position, unchanged; every record
// present is one that some writer appended (no garbage); each writer's
// records form a gapless prefix of its sequence, since a writer appends
// only after its previous Append returned; every sealed segment scrubs
// clean (its sum file, if any, matches); and the log takes new appends.
// It reports whether recovery had to repair anything.
func checkCrashState(st crashState, i int) (repaired bool, err error) {
	l, err := Open(Options{FS: st.img, Dir: testDir, SegmentBytes: 384})
	if err != nil {
		return false, fmt.Errorf("Open: %w", err)
	}
	info := l.Recovery()
	repaired = info.TruncatedBytes > 0 || len(info.RemovedSegments) > 0
	defer l.Close()
	if l.Start() != 0 {
		return false, fmt.Errorf("Start %d", l.Start())
	}
	var found []ack // in position order
	nextSeq := make([]int, 4)
	err = l.Scan(0, func(pos Pos, rec Record) error {
		w, seq, ok := parsePayload(rec.Payload)
		if !ok || rec.Type != testType(seq) || w >= len(nextSeq) {
			return fmt.Errorf("garbage record at %d", pos)
		}
		if seq != nextSeq[w] {
			return fmt.Errorf("writer %d: seq %d at %d, want %d", w, seq, pos, nextSeq[w])
		}
		nextSeq[w]++
		found = append(found, ack{pos, w, seq})
		return nil
	})
	if err != nil {
		return false, err
	}
	for _, a := range st.acks {
		i, ok := slices.BinarySearchFunc(found, a.pos, func(f ack, p Pos) int { return cmp.Compare(f.pos, p) })
		if !ok || found[i] != a {
			return false, fmt.Errorf("acknowledged record writer %d seq %d at %d lost", a.writer, a.seq, a.pos)
		}
	}
	// Every sealed segment scrubs clean: a power loss while a sum file
	// was written leaves none or one that does not validate itself (its
	// segment was synced first), never one that makes good bytes damage.
	segs := l.Segments()
	for _, s := range segs[:len(segs)-1] {
		if s.End == s.Base {
			continue
		}
		res, err := l.Scrub(s.Base, nil)
		if err != nil || len(res.Damage) > 0 || res.SumState == SumMismatch {
			return false, fmt.Errorf("scrub of sealed %s after recovery: %+v, %v", s.Name, res, err)
		}
	}
	head := l.Head()
	if i%8 == 0 {
		// Recovery's repair is durable: crash again at once, same result.
		again, err := Open(Options{FS: st.img.Crash(rand.New(rand.NewPCG(st.seed, 2))), Dir: testDir})
		if err != nil {
			return false, fmt.Errorf("reopen after repair: %w", err)
		}
		h2, info2 := again.Head(), again.Recovery()
		again.Close()
		if h2 != head || info2.TruncatedBytes != 0 {
			return false, fmt.Errorf("second recovery: Head %d (want %d), %+v", h2, head, info2)
		}
	}
	if i%4 == 0 {
		pos, err := l.Append(Record{Type: 1, Payload: testPayload(99, 0, 5)})
		if err != nil || pos[0] != head {
			return false, fmt.Errorf("append after recovery at %v, Head was %d: %v", pos, head, err)
		}
		if rec, _, err := l.Read(pos[0]); err != nil || rec.Type != 1 {
			return false, errors.Join(errors.New("read back after recovery"), err)
		}
	}
	return repaired, nil
}

// TestPowerLoss evaluates at least 10,000 crash states of concurrent
// appenders under FlushSync, half of them with random prefixes of unsynced
// writes, across many small runs with frequent segment rolls.
func TestPowerLoss(t *testing.T) {
	// The states per run depend on how the appends batch, so run until
	// there are enough; the cap only catches a run that yields none.
	const maxRuns, calls = 200, 40
	want := 10000
	if testing.Short() {
		want = 2000
		t.Logf("-short: at least %d crash states, not 10,000; `make test-durability` (CI) runs the full size", want)
	}
	total, repaired := 0, 0
	for run := 0; run < maxRuns && total < want; run++ {
		n, r := powerLossRun(t, run, FlushSync, calls)
		total += n
		repaired += r
		if t.Failed() {
			return
		}
	}
	if total < want {
		t.Fatalf("evaluated %d crash states, want at least %d", total, want)
	}
	// Guard against a test that only ever crashes between batches: a good
	// share of the images must have caught a write in flight.
	if repaired < total/20 {
		t.Fatalf("only %d of %d crash states needed a repair", repaired, total)
	}
	t.Logf("%d crash states, %d with a torn tail or incomplete segment", total, repaired)
}

// TestPowerLossAsync: under FlushAsync what was acknowledged before a
// completed Sync survives; later acknowledged records may be lost, but
// never leave garbage or a gap behind.
func TestPowerLossAsync(t *testing.T) {
	total, repaired := 0, 0
	for run := range 10 {
		n, r := powerLossRun(t, 1000+run, FlushAsync, 40)
		total += n
		repaired += r
		if t.Failed() {
			return
		}
	}
	if repaired == 0 {
		t.Fatalf("none of %d crash states needed a repair", total)
	}
}
