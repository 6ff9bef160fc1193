package vfs_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// failSyncs makes the next n File.Syncs through f fail with EIO.
func failSyncs(f *vfs.Faulty, n int) {
	f.Inject(func(op vfs.Op, _ string) error {
		if op != vfs.OpSync || n == 0 {
			return nil
		}
		n--
		return syscall.EIO
	})
}

// newSyncFailFile returns a Mem, a Faulty over it and a file "d/f" whose
// directory entry is durable and that durably holds durable.
func newSyncFailFile(t *testing.T, durable string) (*vfs.Mem, *vfs.Faulty, vfs.File) {
	t.Helper()
	m := newMemDir(t)
	f := vfs.NewFaulty(m)
	file := mustCreate(t, f, "d/f")
	mustSyncDir(t, f, "d")
	if durable != "" {
		mustWrite(t, file, durable, 0)
		mustSync(t, file)
	}
	return m, f, file
}

func wantSyncEIO(t *testing.T, file vfs.File) {
	t.Helper()
	if err := file.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("injected sync failure: %v, want EIO", err)
	}
}

// TestFailedSyncDropsPages is the fsyncgate pattern: write, a failed sync,
// a successful sync, a power loss. The successful sync does not write the
// pages the failed one dropped, so their data is gone, while what was
// synced before survives; reads before the crash still see the new bytes.
func TestFailedSyncDropsPages(t *testing.T) {
	m, f, file := newSyncFailFile(t, "synced before;")
	mustWrite(t, file, "lost", 14)
	failSyncs(f, 1)
	wantSyncEIO(t, file)
	mustSync(t, file) // "succeeds": the page is clean
	wantFile(t, m, "d/f", "synced before;lost")
	img := m.Crash(nil)
	// The length reached the disk with the successful sync, the bytes did
	// not: the dropped page keeps its durable content, zeros past the old
	// end.
	wantFile(t, img, "d/f", "synced before;\x00\x00\x00\x00")
	// The same in every random crash image.
	for seed := range uint64(20) {
		got := readFile(t, m.Crash(rand.New(rand.NewPCG(seed, 7))), "d/f")
		if !bytes.Equal(got, []byte("synced before;\x00\x00\x00\x00")) {
			t.Fatalf("seed %d: crash image %q", seed, got)
		}
	}
}

// TestFailedSyncWithoutLaterSync: with no sync after the failure the old
// length stays durable, and a random crash image never holds a dropped byte
// (writeback will not send a clean page).
func TestFailedSyncWithoutLaterSync(t *testing.T) {
	m, f, file := newSyncFailFile(t, "kept")
	mustWrite(t, file, strings.Repeat("L", 3*vfs.MemPageSize), 4)
	failSyncs(f, 1)
	wantSyncEIO(t, file)
	wantFile(t, m.Crash(nil), "d/f", "kept")
	for seed := range uint64(20) {
		got := readFile(t, m.Crash(rand.New(rand.NewPCG(seed, 3))), "d/f")
		if !bytes.HasPrefix(got, []byte("kept")) || bytes.IndexByte(got, 'L') >= 0 {
			t.Fatalf("seed %d: crash image holds dropped bytes: %q", seed, got[:min(len(got), 16)])
		}
	}
}

// TestFailedSyncOverwriteRevertsToOldContent: a dropped overwrite of
// durable bytes reverts to them.
func TestFailedSyncOverwriteRevertsToOldContent(t *testing.T) {
	m, f, file := newSyncFailFile(t, "old content")
	mustWrite(t, file, "NEW", 0)
	failSyncs(f, 1)
	wantSyncEIO(t, file)
	mustSync(t, file)
	wantFile(t, m, "d/f", "NEW content")
	wantFile(t, m.Crash(nil), "d/f", "old content")
}

// TestRewriteDirtiesWholePage: writing into a dropped page dirties all of
// it again, so the next sync writes its current bytes, the dropped ones
// included (the page cache writes pages, not byte ranges); a dropped page
// that is not touched again stays lost.
func TestRewriteDirtiesWholePage(t *testing.T) {
	const ps = vfs.MemPageSize
	m, f, file := newSyncFailFile(t, "")
	a := strings.Repeat("a", ps)
	b := strings.Repeat("b", ps)
	mustWrite(t, file, a+b, 0)
	failSyncs(f, 1)
	wantSyncEIO(t, file)
	mustWrite(t, file, "c", ps+10) // page 1 only
	mustSync(t, file)
	want := []byte(strings.Repeat("\x00", ps) + b)
	want[ps+10] = 'c'
	if got := readFile(t, m.Crash(nil), "d/f"); !bytes.Equal(got, want) {
		t.Fatalf("crash image: page 0 %q..., page 1 %q...; want page 0 lost, page 1 written", got[:4], got[ps:ps+12])
	}
}

// TestTruncateForgetsDroppedPages: cutting the file back to its durable
// length and writing again makes the new bytes durable at the next sync,
// so a writer that cuts away what a failed sync covered starts clean.
func TestTruncateForgetsDroppedPages(t *testing.T) {
	m, f, file := newSyncFailFile(t, "durable|")
	mustWrite(t, file, "dropped", 8)
	failSyncs(f, 1)
	wantSyncEIO(t, file)
	if err := file.Truncate(8); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, file, "again", 8)
	mustSync(t, file)
	wantFile(t, m.Crash(nil), "d/f", "durable|again")
}

// TestSyncKeepsDirtyMode: the old model, on request only: the failed data
// stays dirty and the next sync makes it durable.
func TestSyncKeepsDirtyMode(t *testing.T) {
	m, f, file := newSyncFailFile(t, "synced before;")
	f.SetSyncFailure(vfs.SyncKeepsDirty)
	mustWrite(t, file, "kept", 14)
	failSyncs(f, 1)
	wantSyncEIO(t, file)
	wantFile(t, m.Crash(nil), "d/f", "synced before;")
	mustSync(t, file)
	wantFile(t, m.Crash(nil), "d/f", "synced before;kept")
}

// TestDroppedPagesSurviveClone: Clone carries the dropped pages, so the
// clone's crash image equals the original's.
func TestDroppedPagesSurviveClone(t *testing.T) {
	m, f, file := newSyncFailFile(t, "old content")
	mustWrite(t, file, "NEW", 0)
	failSyncs(f, 1)
	wantSyncEIO(t, file)
	c := m.Clone()
	g, err := c.Open("d/f")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	mustSync(t, g)
	wantFile(t, c, "d/f", "NEW content")
	wantFile(t, c.Crash(nil), "d/f", "old content")
}

// TestFailedSyncThroughNestedFaulty: a Faulty over a Faulty over a Mem
// still drops the pages.
func TestFailedSyncThroughNestedFaulty(t *testing.T) {
	m := newMemDir(t)
	outer := vfs.NewFaulty(vfs.NewFaulty(m))
	file := mustCreate(t, outer, "d/f")
	mustSyncDir(t, outer, "d")
	mustWrite(t, file, "x", 0)
	failSyncs(outer, 1)
	wantSyncEIO(t, file)
	mustSync(t, file)
	wantFile(t, m.Crash(nil), "d/f", "\x00")
}

// TestSyncFailModel drives random writes, truncates, syncs and failed syncs
// through a Faulty over a Mem and compares the current and crash images
// with a plain page model: a failed sync marks every page that differs
// from its durable bytes lost; writes and truncates un-lose the pages they
// touch; a sync makes the current length durable and the bytes of every
// page that is not lost.
func TestSyncFailModel(t *testing.T) {
	const ps = vfs.MemPageSize
	rng := rand.New(rand.NewPCG(7, 11))
	m, f, file := newSyncFailFile(t, "")
	failNext := false
	f.Inject(func(op vfs.Op, _ string) error {
		if op == vfs.OpSync && failNext {
			return syscall.EIO
		}
		return nil
	})
	var cur, durable []byte
	lost := map[int]bool{}
	durableAt := func(i int) byte {
		if i < len(durable) {
			return durable[i]
		}
		return 0
	}
	touch := func(lo, hi int) {
		for p := range lost {
			if p*ps < hi && (p+1)*ps > lo {
				delete(lost, p)
			}
		}
	}
	for i := range 2000 {
		switch op := rng.IntN(12); {
		case op < 6:
			off := rng.IntN(len(cur) + ps)
			p := make([]byte, 1+rng.IntN(2*ps))
			for j := range p {
				p[j] = byte(1 + rng.IntN(255))
			}
			mustWrite(t, file, string(p), int64(off))
			end := off + len(p)
			touch(min(off, len(cur)), end)
			if end > len(cur) {
				cur = append(cur, make([]byte, end-len(cur))...)
			}
			copy(cur[off:], p)
		case op < 8:
			size := rng.IntN(len(cur) + ps)
			if err := file.Truncate(int64(size)); err != nil {
				t.Fatal(err)
			}
			touch(min(size, len(cur)), max(size, len(cur)))
			if size < len(cur) {
				cur = cur[:size:size]
			} else {
				cur = append(cur, make([]byte, size-len(cur))...)
			}
		case op < 10:
			failNext = true
			wantSyncEIO(t, file)
			failNext = false
			for i := range cur {
				if cur[i] != durableAt(i) {
					lost[i/ps] = true
				}
			}
		default:
			mustSync(t, file)
			next := bytes.Clone(cur)
			for i := range next {
				if lost[i/ps] {
					next[i] = durableAt(i)
				}
			}
			durable = next
		}
		if got := readAll(t, file); !bytes.Equal(got, cur) {
			t.Fatalf("step %d: current differs from the model", i)
		}
		if got := readFile(t, m.Crash(nil), "d/f"); !bytes.Equal(got, durable) {
			t.Fatalf("step %d: durable image differs from the model (%d vs %d bytes)", i, len(got), len(durable))
		}
	}
}
