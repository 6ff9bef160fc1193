package commitlog

import (
	"bytes"
	"errors"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// checkExactly checks that a reopened log holds exactly the acknowledged
// records: all of them, at their positions, and nothing else.
func checkExactly(t *testing.T, l *Log, acked map[Pos][]byte) {
	t.Helper()
	ps, rs := scanAll(t, l)
	if len(ps) != len(acked) {
		t.Fatalf("log holds %d records, %d were acknowledged", len(ps), len(acked))
	}
	for i, p := range ps {
		if want, ok := acked[p]; !ok || !bytes.Equal(rs[i].Payload, want) {
			t.Fatalf("record at %d was not acknowledged or differs", p)
		}
	}
}

func TestDiskFull(t *testing.T) {
	mem := newMem(t)
	fsys := vfs.NewFaulty(mem)
	// The classic path: a roll creates its segment (the spare's own
	// disk-full cases are in prealloc_test.go).
	l := openLog(t, fsys, Options{SegmentBytes: 4096, NoPreallocate: true})
	acked := map[Pos][]byte{}
	seq := 0
	appendOne := func() error {
		p := testPayload(0, seq, 40)
		seq++
		head := l.Head()
		pos, err := l.Append(Record{Type: 1, Payload: p})
		if err != nil {
			if l.Head() != head {
				t.Fatalf("failed Append moved Head from %d to %d", head, l.Head())
			}
			return err
		}
		if pos[0] != head {
			t.Fatalf("Append at %d, Head was %d", pos[0], head)
		}
		acked[pos[0]] = p
		return nil
	}
	for range 50 {
		if err := appendOne(); err != nil {
			t.Fatal(err)
		}
	}

	// Room for two more records; then every Append fails with ENOSPC.
	fsys.SetLimit(fsys.Used() + 2*int64(frameSize(48)) + 10)
	var okN, failN int
	for range 10 {
		switch err := appendOne(); {
		case err == nil:
			okN++
		case errors.Is(err, ErrDiskFull) && errors.Is(err, syscall.ENOSPC):
			failN++
		default:
			t.Fatalf("Append on a full disk: %v", err)
		}
	}
	if okN != 2 || failN != 8 {
		t.Fatalf("%d appends succeeded and %d failed; want 2 and 8", okN, failN)
	}

	// A full disk at a roll: the new segment cannot get its header.
	fsys.SetLimit(-1)
	for l.Head()-l.Segments()[len(l.Segments())-1].Base+Pos(frameSize(48)) <= 4096 {
		if err := appendOne(); err != nil {
			t.Fatal(err)
		}
	}
	segs := l.Segments()
	fsys.SetLimit(fsys.Used())
	if err := appendOne(); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Append needing a roll on a full disk: %v", err)
	}
	if got := l.Segments(); !slices.Equal(got, segs) {
		t.Fatalf("failed roll changed segments: %v -> %v", segs, got)
	}
	names, _ := mem.List(testDir)
	if len(names) != len(segs) {
		t.Fatalf("failed roll left a file behind: %v", names)
	}

	// Space is freed: the log goes on where it stopped, with no hole.
	fsys.SetLimit(-1)
	for range 30 {
		if err := appendOne(); err != nil {
			t.Fatalf("Append after space was freed: %v", err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkExactly(t, openLog(t, mem.Crash(nil), Options{SegmentBytes: 4096}), acked)
}

// TestDiskFullConcurrent: producers racing on a disk that fills up get
// either a position or ErrDiskFull, and the log holds exactly the
// acknowledged records, before and after space is freed.
func TestDiskFullConcurrent(t *testing.T) {
	mem := newMem(t)
	fsys := vfs.NewFaulty(mem)
	l := openLog(t, fsys, Options{SegmentBytes: 2048})
	fsys.SetLimit(fsys.Used() + 6000)
	var mu sync.Mutex
	acked := map[Pos][]byte{}
	fails := 0
	var wg sync.WaitGroup
	run := func(first int) {
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for seq := first; seq < first+40; seq++ {
					p := testPayload(w, seq, 30)
					pos, err := l.Append(Record{Type: 1, Payload: p}, Record{Type: 2, Payload: p})
					mu.Lock()
					if err == nil {
						acked[pos[0]], acked[pos[1]] = p, p
					} else if errors.Is(err, ErrDiskFull) {
						fails++
					} else {
						t.Errorf("Append: %v", err)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	run(0)
	if fails == 0 || len(acked) == 0 {
		t.Fatalf("%d acknowledged, %d failed: the limit did not bite", len(acked), fails)
	}
	checkExactly(t, l, acked)
	fsys.SetLimit(-1)
	before := len(acked)
	run(1000)
	if len(acked) != before+8*40*2 {
		t.Fatalf("after freeing space %d of %d records were acknowledged", len(acked)-before, 8*40*2)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkExactly(t, openLog(t, mem.Crash(nil), Options{SegmentBytes: 2048}), acked)
}

// TestSyncFailure: a failed fdatasync stops the log (fail-stop): the batch
// fails, and so does every later Append and Sync, even once the disk works
// again, because a retried fsync would succeed without writing the pages the
// failure dropped. The failed batch is cut away, so neither a reopen in the
// same boot (page cache intact) nor one after a power loss finds it, and
// nothing acknowledged before is lost.
func TestSyncFailure(t *testing.T) {
	for _, cause := range []error{syscall.EIO, syscall.ENOSPC} {
		t.Run(cause.Error(), func(t *testing.T) {
			mem := newMem(t)
			fsys := vfs.NewFaulty(mem)
			l := openLog(t, fsys, Options{})
			acked := map[Pos][]byte{}
			p := mustAppend(t, l, Record{Type: 1, Payload: []byte("before")})
			acked[p[0]] = []byte("before")
			head := l.Head()
			fail := true
			fsys.Inject(func(op vfs.Op, name string) error {
				if op == vfs.OpSync && fail {
					fail = false
					return cause
				}
				return nil
			})
			_, err := l.Append(Record{Type: 1, Payload: []byte("lost")})
			if !errors.Is(err, cause) || !errors.Is(err, ErrFsyncFailed) || !errors.Is(err, ErrFailed) {
				t.Fatalf("Append with failing sync: %v, want %v wrapped with ErrFsyncFailed and ErrFailed", err, cause)
			}
			if l.Head() != head {
				t.Fatalf("Head moved from %d to %d past a failed sync", head, l.Head())
			}
			fsys.Inject(nil)
			if _, err2 := l.Append(Record{Type: 1, Payload: []byte("after")}); err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("Append after a failed sync: %v, want the sticky %v", err2, err)
			}
			if serr := l.Sync(); serr == nil || serr.Error() != err.Error() {
				t.Fatalf("Sync after a failed sync: %v, want the sticky %v", serr, err)
			}
			if cerr := l.Close(); !errors.Is(cerr, ErrFsyncFailed) {
				t.Fatalf("Close of a stopped log: %v", cerr)
			}
			for name, img := range map[string]vfs.FS{"reopen": mem.Clone(), "power loss": mem.Crash(nil)} {
				t.Run(name, func(t *testing.T) {
					l2 := openLog(t, img, Options{})
					checkExactly(t, l2, acked)
					mustAppend(t, l2, Record{Type: 1, Payload: []byte("after reopen")})
				})
			}
		})
	}
}

// TestStickyFailure: when the log cannot undo a failed write, every later
// Append fails with the same error, even after the fault is gone; what was
// acknowledged before survives.
func TestStickyFailure(t *testing.T) {
	mem := newMem(t)
	fsys := vfs.NewFaulty(mem)
	l := openLog(t, fsys, Options{})
	acked := map[Pos][]byte{}
	for i := range 5 {
		p := testPayload(0, i, 10)
		acked[mustAppend(t, l, Record{Type: 1, Payload: p})[0]] = p
	}
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpWrite || op == vfs.OpTruncate {
			return syscall.EIO
		}
		return nil
	})
	_, err := l.Append(Record{Type: 1, Payload: []byte("x")})
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "truncate") {
		t.Fatalf("Append: %v", err)
	}
	fsys.Inject(nil)
	_, err2 := l.Append(Record{Type: 1, Payload: []byte("y")})
	if err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("Append after an unrepaired failure: %v, want the sticky %v", err2, err)
	}
	if serr := l.Sync(); serr == nil || serr.Error() != err.Error() {
		t.Fatalf("Sync: %v", serr)
	}
	if cerr := l.Close(); cerr == nil {
		t.Fatal("Close of a failed log reported nothing")
	}
	checkExactly(t, openLog(t, mem.Crash(nil), Options{}), acked)
}

// TestAsyncSyncFailureIsSticky: under FlushAsync a failed background or
// explicit sync may have lost acknowledged records, so it is sticky.
func TestAsyncSyncFailureIsSticky(t *testing.T) {
	mem := newMem(t)
	fsys := vfs.NewFaulty(mem)
	l := openLog(t, fsys, Options{Flush: FlushAsync, FlushInterval: 1 << 40})
	mustAppend(t, l, Record{Type: 1, Payload: []byte("acked, not durable")})
	failSyncs(fsys, 1) // the cut-back's own sync works
	if err := l.Sync(); !errors.Is(err, syscall.EIO) || !errors.Is(err, ErrFsyncFailed) {
		t.Fatalf("Sync: %v", err)
	}
	// The unsynced records were cut away (see syncFailed): Head is back at
	// the last synced byte.
	if h := l.Head(); h != 0 {
		t.Fatalf("Head %d after a failed async sync; want 0, the last synced byte", h)
	}
	fsys.Inject(nil)
	if _, err := l.Append(Record{Type: 1}); !errors.Is(err, syscall.EIO) || !errors.Is(err, ErrFsyncFailed) {
		t.Fatalf("Append after failed async sync: %v", err)
	}
	l.Close()
}

// TestRollCleanupFailureIsSticky: a new segment whose header could not be
// written and that cannot be removed either would break the chain of
// segments, so the failure is sticky; recovery then removes the file.
func TestRollCleanupFailureIsSticky(t *testing.T) {
	mem := newMem(t)
	fsys := vfs.NewFaulty(mem)
	l := openLog(t, fsys, Options{SegmentBytes: 100})
	acked := map[Pos][]byte{}
	for i := range 3 {
		p := testPayload(0, i, 30)
		acked[mustAppend(t, l, Record{Type: 1, Payload: p})[0]] = p
	}
	segs := l.Segments()
	active := segs[len(segs)-1].Name
	fsys.Inject(func(op vfs.Op, name string) error {
		if (op == vfs.OpWrite || op == vfs.OpRemove) && path.Base(name) != active {
			return syscall.EIO
		}
		return nil
	})
	if _, err := l.Append(Record{Type: 1, Payload: make([]byte, 60)}); !errors.Is(err, errCleanup) {
		t.Fatalf("Append with failing roll: %v", err)
	}
	fsys.Inject(nil)
	if _, err := l.Append(Record{Type: 1}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Append after failed cleanup: %v", err)
	}
	l.Close()
	l2 := openLog(t, mem.Clone(), Options{SegmentBytes: 100})
	if info := l2.Recovery(); len(info.RemovedSegments) != 1 {
		t.Fatalf("recovery did not remove the stray segment: %+v", info)
	}
	checkExactly(t, l2, acked)
}
