package commitlog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// failSyncs makes the next n File.Syncs through fsys fail with EIO; the
// vfs model then drops the pages they covered, as Linux does.
func failSyncs(fsys *vfs.Faulty, n int) {
	var left atomic.Int64
	left.Store(int64(n))
	fsys.Inject(func(op vfs.Op, name string) error {
		// A segment's sum file is advisory: its failed sync is no failure
		// of the log (sum.go), so it does not count here; nor does the
		// spare's, which holds no record (prealloc.go).
		if op == vfs.OpSync && !strings.HasSuffix(name, sumFileSuffix) && path.Base(name) != SpareName && left.Add(-1) >= 0 {
			return syscall.EIO
		}
		return nil
	})
}

// wantStopped checks that err is the fail-stop error of a failed fsync.
func wantStopped(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrFsyncFailed) || !errors.Is(err, ErrFailed) {
		t.Fatalf("%s: %v, want an error wrapping ErrFsyncFailed and ErrFailed", what, err)
	}
}

// ackBook records what a test's producers were told: where each record
// (identified by its writer and sequence number) was acknowledged, and
// which acknowledgements promised durability.
type ackBook struct {
	mu      sync.Mutex
	at      map[[2]int]Pos // (writer, seq) -> acknowledged position
	durable map[[2]int]bool
}

func newAckBook() *ackBook {
	return &ackBook{at: map[[2]int]Pos{}, durable: map[[2]int]bool{}}
}

// check opens the log on img and checks that every durable record is in it
// at its position and that every record in it was acknowledged there.
func (b *ackBook) check(t *testing.T, img vfs.FS, opts Options, what string) {
	t.Helper()
	l := openLog(t, img, opts)
	ps, rs := scanAll(t, l)
	found := map[[2]int]bool{}
	for i, p := range ps {
		w, seq, ok := parsePayload(rs[i].Payload)
		if !ok {
			t.Fatalf("%s: record at %d is not a test payload", what, p)
		}
		if at, acked := b.at[[2]int{w, seq}]; !acked || at != p {
			t.Fatalf("%s: record (%d, %d) at %d was never acknowledged there", what, w, seq, p)
		}
		found[[2]int{w, seq}] = true
	}
	for k := range b.durable {
		if !found[k] {
			t.Fatalf("%s: durable record (%d, %d) at %d is lost", what, k[0], k[1], b.at[k])
		}
	}
	if err := l.Close(); err != nil {
		t.Fatalf("%s: Close: %v", what, err)
	}
}

// TestTransientSyncFailuresLoseNothingAcked is the fsyncgate scenario: two
// transient EIOs on fdatasync, each followed by a restart in the same boot
// (the page cache still holds the bytes the kernel dropped), then more
// appends and a power loss. Nothing acknowledged as durable may be lost:
// under FlushSync every acknowledged Append, under FlushAsync every record
// a successful Sync covered. Records of 0.5 to 2 KiB make batches share and
// straddle pages.
func TestTransientSyncFailuresLoseNothingAcked(t *testing.T) {
	for _, policy := range []FlushPolicy{FlushSync, FlushAsync} {
		t.Run(policy.String(), func(t *testing.T) {
			mem := newMem(t)
			fsys := vfs.NewFaulty(mem)
			opts := Options{SegmentBytes: 16 << 10, Flush: policy, FlushInterval: 1 << 40}
			book := newAckBook()
			rng := rand.New(rand.NewPCG(uint64(policy), 4))
			seq := 0
			boot := func(failAt int) {
				l := openLog(t, fsys, opts)
				var unsynced [][2]int // FlushAsync: acknowledged, not yet covered by a Sync
				stopped := false
				for i := range 40 {
					if i == failAt {
						failSyncs(fsys, 1)
					}
					recs := make([]Record, 1+rng.IntN(3))
					keys := make([][2]int, len(recs))
					for j := range recs {
						recs[j] = Record{Type: testType(seq), Payload: testPayload(0, seq, 500+rng.IntN(1500))}
						keys[j] = [2]int{0, seq}
						seq++
					}
					pos, err := l.Append(recs...)
					if err != nil {
						wantStopped(t, fmt.Sprintf("append %d", i), err)
						stopped = true
						continue
					}
					if stopped {
						t.Fatalf("append %d acknowledged after the log stopped", i)
					}
					for j, k := range keys {
						book.at[k] = pos[j]
						if policy == FlushSync {
							book.durable[k] = true
						} else {
							unsynced = append(unsynced, k)
						}
					}
					if policy == FlushAsync && i%4 == 3 {
						if err := l.Sync(); err != nil {
							wantStopped(t, "Sync", err)
							stopped = true
							continue
						}
						for _, k := range unsynced {
							book.durable[k] = true
						}
						unsynced = unsynced[:0]
					}
				}
				if failAt >= 0 && !stopped {
					t.Fatalf("the injected sync failure did not stop the log")
				}
				fsys.Inject(nil)
				err := l.Close()
				if (err != nil) != stopped {
					t.Fatalf("Close: %v (stopped %v)", err, stopped)
				}
				if err == nil {
					for _, k := range unsynced { // Close synced them
						book.durable[k] = true
					}
				}
			}
			boot(9)
			boot(22)
			boot(-1)
			book.check(t, mem.Clone(), opts, "restart")
			book.check(t, mem.Crash(nil), opts, "power loss")
			for seed := range uint64(8) {
				book.check(t, mem.Crash(rand.New(rand.NewPCG(seed, 1))), opts, fmt.Sprintf("power loss, seed %d", seed))
			}
		})
	}
}

// TestNoAckAfterSyncFailure: with concurrent producers, no Append that
// began after an fdatasync failed is acknowledged, Head never passes the
// last acknowledged record, and the log holds exactly the acknowledged
// records after a restart and after a power loss.
func TestNoAckAfterSyncFailure(t *testing.T) {
	mem := newMem(t)
	fsys := vfs.NewFaulty(mem)
	l := openLog(t, fsys, Options{SegmentBytes: 8 << 10})
	var syncs atomic.Int64
	var failed atomic.Bool
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpSync && path.Base(name) != SpareName && syncs.Add(1) == 20 {
			failed.Store(true)
			return syscall.EIO
		}
		return nil
	})
	var mu sync.Mutex
	acked := map[Pos][]byte{}
	var end Pos
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for seq := 0; ; seq++ {
				p := testPayload(w, seq, 100+seq%300)
				late := failed.Load()
				pos, err := l.Append(Record{Type: 1, Payload: p})
				if err != nil {
					if !errors.Is(err, ErrFsyncFailed) {
						t.Errorf("writer %d: %v", w, err)
					}
					return
				}
				if late {
					t.Errorf("writer %d: Append begun after the failed sync was acknowledged", w)
					return
				}
				mu.Lock()
				acked[pos[0]] = p
				end = max(end, pos[0]+Pos(frameSize(len(p))))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if !failed.Load() {
		t.Fatal("no sync failed")
	}
	if h := l.Head(); h != end {
		t.Fatalf("Head %d after the failure, last acknowledged record ends at %d", h, end)
	}
	wantStopped(t, "Sync", l.Sync())
	if err := l.Close(); err == nil {
		t.Fatal("Close of a stopped log reported nothing")
	}
	fsys.Inject(nil)
	checkExactly(t, openLog(t, mem.Clone(), Options{SegmentBytes: 8 << 10}), acked)
	checkExactly(t, openLog(t, mem.Crash(nil), Options{SegmentBytes: 8 << 10}), acked)
}

// TestEveryFsyncFailureStops: each fsync the log makes, when it fails,
// stops the log, whatever it was for; a failed write alone does not.
func TestEveryFsyncFailureStops(t *testing.T) {
	big := Record{Type: 1, Payload: make([]byte, 300)}
	failOp := func(want vfs.Op, pick func(name string) bool) func(*vfs.Faulty, string) {
		return func(fsys *vfs.Faulty, active string) {
			fsys.Inject(func(op vfs.Op, name string) error {
				if op == want && pick(name) {
					return syscall.EIO
				}
				return nil
			})
		}
	}
	appendBig := func(l *Log) error { _, err := l.Append(big); return err }
	for _, sc := range []fsyncScenario{
		{
			name: "new segment header sync",
			opts: Options{SegmentBytes: 400},
			inject: func(fsys *vfs.Faulty, active string) {
				failOp(vfs.OpSync, func(name string) bool { return path.Base(name) != active })(fsys, active)
			},
			act: appendBig,
		},
		{
			name:   "directory sync at a roll",
			opts:   Options{SegmentBytes: 400},
			inject: failOp(vfs.OpSyncDir, func(string) bool { return true }),
			act:    appendBig,
		},
		{
			name:   "sync before a roll (async)",
			opts:   Options{SegmentBytes: 400, Flush: FlushAsync, FlushInterval: 1 << 40},
			inject: func(fsys *vfs.Faulty, _ string) { failSyncs(fsys, 1) },
			act: func(l *Log) error {
				// Acknowledged but unsynced: the roll must sync it first.
				if _, err := l.Append(Record{Type: 1, Payload: []byte("small")}); err != nil {
					return fmt.Errorf("small append: %w", err)
				}
				if _, err := l.Append(big); err != nil {
					return err
				}
				return errors.New("the roll's sync did not fail")
			},
		},
		{
			name: "sync of the cut after a failed write",
			opts: Options{},
			inject: func(fsys *vfs.Faulty, _ string) {
				fsys.Inject(func(op vfs.Op, _ string) error {
					if op == vfs.OpWrite || op == vfs.OpSync {
						return syscall.ENOSPC
					}
					return nil
				})
			},
			act: appendBig,
		},
		{
			name:   "directory sync after a delete",
			opts:   Options{SegmentBytes: 400},
			inject: failOp(vfs.OpSyncDir, func(string) bool { return true }),
			act: func(l *Log) error {
				n, err := l.DeleteBefore(l.Head())
				if n != 1 {
					return fmt.Errorf("deleted %d segments, want 1", n)
				}
				return err
			},
		},
	} {
		t.Run(sc.name, func(t *testing.T) { runFsyncScenario(t, sc) })
	}
}

// fsyncScenario is a sync that fails: inject arms the fault (active is the
// active segment's name) and act is the call that must meet it.
type fsyncScenario struct {
	name   string
	opts   Options
	inject func(fsys *vfs.Faulty, active string)
	act    func(l *Log) error
}

// runFsyncScenario appends and syncs two records, arms the fault, and
// checks that the failing call and every later append report the log
// stopped, and that a crash image then holds exactly the acknowledged
// records (except after a delete, whose records are meant to go).
func runFsyncScenario(t *testing.T, sc fsyncScenario) {
	mem := newMem(t)
	fsys := vfs.NewFaulty(mem)
	l := openLog(t, fsys, sc.opts)
	acked := map[Pos][]byte{}
	for i := range 2 {
		p := testPayload(0, i, 250)
		acked[mustAppend(t, l, Record{Type: 1, Payload: p})[0]] = p
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	sc.inject(fsys, segs[len(segs)-1].Name)
	wantStopped(t, "the failing call", sc.act(l))
	fsys.Inject(nil)
	_, err := l.Append(Record{Type: 1, Payload: []byte("later")})
	wantStopped(t, "Append once the fault is gone", err)
	l.Close()
	if sc.name == "directory sync after a delete" {
		return // the deleted segment's records are meant to go
	}
	checkExactly(t, openLog(t, mem.Crash(nil), sc.opts), acked)
}

// TestWriteFailureIsNotSticky: ENOSPC on write (not on sync) fails the
// batch, cuts it away and lets later Appends through: disk full refuses
// writes with a clear error and loses nothing, and does not stop the log.
func TestWriteFailureIsNotSticky(t *testing.T) {
	mem := newMem(t)
	fsys := vfs.NewFaulty(mem)
	l := openLog(t, fsys, Options{})
	acked := map[Pos][]byte{}
	acked[mustAppend(t, l, Record{Type: 1, Payload: []byte("a")})[0]] = []byte("a")
	fsys.FailAfter(vfs.OpWrite, 0, syscall.ENOSPC)
	_, err := l.Append(Record{Type: 1, Payload: []byte("refused")})
	if !errors.Is(err, ErrDiskFull) || errors.Is(err, ErrFailed) {
		t.Fatalf("Append on a full disk: %v, want ErrDiskFull and not ErrFailed", err)
	}
	fsys.Inject(nil)
	acked[mustAppend(t, l, Record{Type: 1, Payload: []byte("b")})[0]] = []byte("b")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkExactly(t, openLog(t, mem.Crash(nil), Options{}), acked)
}
