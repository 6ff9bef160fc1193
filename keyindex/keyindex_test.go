package keyindex

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// open opens the index "keys.idx" in fs, which must succeed.
func open(t *testing.T, fs vfs.FS, keep int64) *Index {
	t.Helper()
	x, err := Open(fs, "keys.idx", keep, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// durable flushes and syncs x and returns the length a checkpoint records.
func durable(t *testing.T, x *Index) int64 {
	t.Helper()
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	return x.Len()
}

// wantCorrupt fails unless err is an ErrCorrupt naming keys.idx and off.
func wantCorrupt(t *testing.T, err error, off int64) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
	if want := fmt.Sprintf("keys.idx at offset %d", off); !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %q", err, want)
	}
}

func overwrite(t *testing.T, fs vfs.FS, p []byte, off int64) {
	t.Helper()
	f, err := fs.Open("keys.idx")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(p, off); err != nil {
		t.Fatal(err)
	}
}

func TestPutGetReopen(t *testing.T) {
	fs := vfs.NewMem()
	x := open(t, fs, 0)
	x.Put(1, 100)
	x.Put(2, 200)
	x.Put(1, 300)
	if p, ok := x.Get(1); !ok || p != 300 {
		t.Fatalf("get 1: %d %v", p, ok)
	}
	if _, ok := x.Get(3); ok {
		t.Fatal("get of a key never put")
	}
	if x.Unwritten() != 3 || x.Len() != 0 {
		t.Fatalf("unwritten %d, len %d before flush", x.Unwritten(), x.Len())
	}
	keep := durable(t, x)
	if keep != 3*EntrySize || x.Unwritten() != 0 {
		t.Fatalf("len %d, unwritten %d after flush", keep, x.Unwritten())
	}
	x.Put(2, 400) // after the checkpoint: cut at recovery
	durable(t, x)
	x.Close()
	y := open(t, fs.Crash(nil), keep)
	if p, _ := y.Get(1); p != 300 {
		t.Fatalf("after reopen, key 1 at %d", p)
	}
	if p, _ := y.Get(2); p != 200 || y.Len() != keep || y.Keys() != 2 {
		t.Fatalf("after reopen, key 2 at %d, len %d, %d keys", p, y.Len(), y.Keys())
	}
}

func TestZeroEntryFails(t *testing.T) {
	var zero [EntrySize]byte
	if _, _, ok := parseEntry(zero[:]); ok {
		t.Fatal("an all-zero entry passes its check")
	}
	fs := vfs.NewMem()
	x := open(t, fs, 0)
	x.Put(1, 1)
	x.Put(2, 2)
	keep := durable(t, x)
	overwrite(t, fs, zero[:], EntrySize)
	_, err := Open(fs, "keys.idx", keep, 0, nil)
	wantCorrupt(t, err, EntrySize)
}

// Every single-bit flip of an entry, the reserved field included, is
// caught.
func TestBitFlipsDetected(t *testing.T) {
	e := appendEntry(nil, 0x0123456789abcdef, 1<<40)
	if h, p, ok := parseEntry(e); !ok || h != 0x0123456789abcdef || p != 1<<40 {
		t.Fatalf("round trip: %x %d %v", h, p, ok)
	}
	for bit := 0; bit < EntrySize*8; bit++ {
		f := append([]byte(nil), e...)
		f[bit/8] ^= 1 << (bit % 8)
		if _, _, ok := parseEntry(f); ok {
			t.Fatalf("flip of bit %d passes", bit)
		}
	}
	// And Open refuses a flipped entry inside the checkpointed length.
	fs := vfs.NewMem()
	x := open(t, fs, 0)
	for i := uint64(0); i < 5; i++ {
		x.Put(i, i)
	}
	keep := durable(t, x)
	overwrite(t, fs, []byte{0x40}, 3*EntrySize+9)
	_, err := Open(fs, "keys.idx", keep, 0, nil)
	wantCorrupt(t, err, 3*EntrySize)
}

// Positions grow in log order, so the greatest wins whatever order Puts
// arrive in, live, after a flush and reopen, and with a partly cut file.
func TestLatestPositionWinsAnyOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for round := 0; round < 200; round++ {
		type put struct{ h, pos uint64 }
		var puts []put
		want := map[uint64]uint64{}
		for i := 0; i < 1+rng.IntN(60); i++ {
			p := put{h: rng.Uint64N(5), pos: rng.Uint64N(1000)}
			puts = append(puts, p)
			want[p.h] = max(want[p.h], p.pos)
		}
		rng.Shuffle(len(puts), func(i, j int) { puts[i], puts[j] = puts[j], puts[i] })
		fs := vfs.NewMem()
		x := open(t, fs, 0)
		for i, p := range puts {
			x.Put(p.h, p.pos)
			if rng.IntN(4) == 0 || i == len(puts)-1 {
				durable(t, x)
			}
		}
		y := open(t, fs.Crash(nil), x.Len())
		for _, idx := range []*Index{x, y} {
			if idx.Keys() != len(want) {
				t.Fatalf("round %d: %d keys, want %d", round, idx.Keys(), len(want))
			}
			for h, pos := range want {
				if got, ok := idx.Get(h); !ok || got != pos {
					t.Fatalf("round %d: key %d at %d, want %d (puts %v)", round, h, got, pos, puts)
				}
			}
		}
	}
}

// Concurrent Puts, as concurrent senders make them after their shared
// append, leave the greatest position, while Flush, Sync, Get and Len run
// alongside (the race detector checks the locking).
func TestConcurrentPutsLatestWins(t *testing.T) {
	fs := vfs.NewMem()
	x := open(t, fs, 0)
	stop, synced := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(synced)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := x.Sync(); err != nil {
				t.Error(err)
			}
			x.Get(3)
			x.Len()
		}
	}()
	done := make(chan struct{})
	for g := uint64(0); g < 8; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := uint64(0); i < 1000; i++ {
				x.Put(i%10, 1+i*8+g)
				if i%100 == 0 {
					if err := x.Flush(); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
	close(stop)
	<-synced
	keep := durable(t, x)
	y := open(t, fs.Crash(nil), keep)
	for h := uint64(0); h < 10; h++ {
		want := 1 + (990+h)*8 + 7
		if got, _ := x.Get(h); got != want {
			t.Fatalf("key %d at %d, want %d", h, got, want)
		}
		if got, _ := y.Get(h); got != want {
			t.Fatalf("after a crash, key %d at %d, want %d", h, got, want)
		}
	}
}

func TestMissingOrShortFileRefused(t *testing.T) {
	fs := vfs.NewMem()
	x := open(t, fs, 0)
	x.Put(1, 1)
	x.Put(2, 2)
	keep := durable(t, x)
	x.Close()
	f, _ := fs.Open("keys.idx")
	f.Truncate(keep - 3)
	f.Close()
	_, err := Open(fs, "keys.idx", keep, 0, nil)
	wantCorrupt(t, err, keep-3)
	fs.Remove("keys.idx")
	_, err = Open(fs, "keys.idx", keep, 0, nil)
	wantCorrupt(t, err, 0)
	_, err = Open(fs, "keys.idx", EntrySize+1, 0, nil)
	wantCorrupt(t, err, 0)
	// With nothing recorded, a missing file is created, durably.
	open(t, fs, 0)
	if _, err := fs.Crash(nil).Open("keys.idx"); err != nil {
		t.Fatalf("created index not durable: %v", err)
	}
}

// Bytes beyond the recorded length are cut, whatever they hold.
func TestTailBeyondKeepCut(t *testing.T) {
	fs := vfs.NewMem()
	x := open(t, fs, 0)
	x.Put(1, 10)
	keep := durable(t, x)
	x.Put(1, 20)
	durable(t, x)
	overwrite(t, fs, make([]byte, 30), x.Len()) // zeroed, torn
	y := open(t, fs, keep)
	if p, _ := y.Get(1); p != 10 || y.Len() != keep {
		t.Fatalf("key 1 at %d, len %d", p, y.Len())
	}
	if f, _ := fs.Open("keys.idx"); f != nil {
		if n, _ := f.Size(); n != keep {
			t.Fatalf("file is %d bytes after open, want %d", n, keep)
		}
		f.Close()
	}
}

// Retention: a key whose latest message is below the log's start is gone,
// live and at Open, the same way, even when an older message of the key
// was moved above it by compaction.
func TestDropBeforeMatchesOpen(t *testing.T) {
	moved := map[uint64]uint64{5: 900} // compaction moved message 5 to 900
	phys := func(p uint64) uint64 {
		if q, ok := moved[p]; ok {
			return q
		}
		return p
	}
	fs := vfs.NewMem()
	x, err := Open(fs, "keys.idx", 0, 0, phys)
	if err != nil {
		t.Fatal(err)
	}
	x.Put(1, 5)   // key 1: old message, moved above the cut
	x.Put(1, 50)  // key 1: latest, below the cut
	x.Put(2, 60)  // key 2: below the cut
	x.Put(3, 700) // key 3: above
	keep := durable(t, x)
	if n := x.DropBefore(500); n != 2 {
		t.Fatalf("dropped %d keys, want 2", n)
	}
	y, err := Open(fs, "keys.idx", keep, 500, phys)
	if err != nil {
		t.Fatal(err)
	}
	for _, idx := range []*Index{x, y} {
		_, ok1 := idx.Get(1)
		_, ok2 := idx.Get(2)
		p3, ok3 := idx.Get(3)
		if ok1 || ok2 || !ok3 || p3 != 700 || idx.Keys() != 1 {
			t.Fatalf("after retention: %v %v %d %v, %d keys", ok1, ok2, p3, ok3, idx.Keys())
		}
	}
}

func TestResetEmpties(t *testing.T) {
	fs := vfs.NewMem()
	x := open(t, fs, 0)
	x.Put(1, 1)
	durable(t, x)
	x.Put(2, 2)
	if err := x.Reset(); err != nil {
		t.Fatal(err)
	}
	if x.Keys() != 0 || x.Len() != 0 || x.Unwritten() != 0 {
		t.Fatalf("after reset: %d keys, len %d, unwritten %d", x.Keys(), x.Len(), x.Unwritten())
	}
	x.Put(3, 3)
	keep := durable(t, x)
	y := open(t, fs.Crash(nil), keep)
	if _, ok := y.Get(1); ok || y.Keys() != 1 {
		t.Fatalf("after reset and crash: %d keys", y.Keys())
	}
}

// I/O errors are returned as themselves, never read as an empty index; a
// failed Flush keeps its entries for the next one, in order.
func TestIOErrorsSurface(t *testing.T) {
	ffs := vfs.NewFaulty(vfs.NewMem())
	x := open(t, ffs, 0)
	x.Put(1, 1)
	keep := durable(t, x)
	x.Put(2, 2)
	ffs.FailAfter(vfs.OpWrite, 0, syscall.ENOSPC)
	if err := x.Flush(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("flush on a full disk: %v", err)
	}
	x.Put(3, 3)
	if err := x.Flush(); err == nil || x.Unwritten() != 2 || x.Len() != keep {
		t.Fatalf("second flush on a full disk: %v, unwritten %d, len %d", err, x.Unwritten(), x.Len())
	}
	ffs.Inject(nil)
	all := durable(t, x)
	if all != 3*EntrySize || x.Unwritten() != 0 {
		t.Fatalf("after space is back: len %d, unwritten %d", all, x.Unwritten())
	}
	for _, op := range []vfs.Op{vfs.OpOpen, vfs.OpRead, vfs.OpTruncate} {
		ffs.FailAfter(op, 0, syscall.EIO)
		_, err := Open(ffs, "keys.idx", EntrySize, 0, nil) // truncate: cuts 2 entries
		ffs.Inject(nil)
		if !errors.Is(err, syscall.EIO) || errors.Is(err, ErrCorrupt) {
			t.Fatalf("open with failing %v: %v, want EIO", op, err)
		}
	}
	ffs.FailAfter(vfs.OpTruncate, 0, syscall.EIO)
	if err := x.Reset(); !errors.Is(err, syscall.EIO) || x.Keys() != 3 {
		t.Fatalf("reset with failing truncate: %v, %d keys", err, x.Keys())
	}
	ffs.Inject(nil)
	// A missing directory is not an empty index either.
	if _, err := Open(ffs, "no/such/dir/keys.idx", 0, 0, nil); err == nil {
		t.Fatal("open in a missing directory succeeded")
	}
}

// A failed fsync may drop the pages it was to write (Linux), so a later
// Sync that succeeds proves nothing: Sync failure is final, and what it
// failed to make durable is never vouched for by a later Len.
func TestSyncFailureIsFinal(t *testing.T) {
	mem := vfs.NewMem()
	ffs := vfs.NewFaulty(mem)
	x := open(t, ffs, 0)
	x.Put(1, 1)
	keep := durable(t, x)
	x.Put(2, 2)
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	ffs.FailAfter(vfs.OpSync, 0, syscall.EIO)
	err := x.Sync()
	ffs.Inject(nil)
	if !errors.Is(err, ErrSyncFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("failed sync: %v", err)
	}
	x.Put(3, 3)
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := x.Sync(); !errors.Is(err, ErrSyncFailed) {
		t.Fatalf("sync after a failed one: %v, want ErrSyncFailed", err)
	}
	// What a retry would have vouched for is not on disk: the dropped
	// entry is gone after a power loss, and recovery from the last good
	// length is whole.
	img := mem.Crash(nil)
	if y, err := Open(img, "keys.idx", 3*EntrySize, 0, nil); err == nil {
		t.Fatalf("the length after the failed sync verified (%d keys): the model dropped nothing", y.Keys())
	}
	y := open(t, img, keep)
	if p, ok := y.Get(1); !ok || p != 1 || y.Keys() != 1 {
		t.Fatalf("recovery from the last good checkpoint: %d %v, %d keys", p, ok, y.Keys())
	}
	// Reset starts a file that can be vouched for again.
	if err := x.Reset(); err != nil {
		t.Fatal(err)
	}
	x.Put(4, 4)
	keep = durable(t, x)
	if y := open(t, mem.Crash(nil), keep); y.Keys() != 1 {
		t.Fatalf("after reset: %d keys", y.Keys())
	}
}

// DropBefore gives memory back: after most keys go, the map is a new,
// smaller one, and what remains is intact.
func TestDropBeforeShrinks(t *testing.T) {
	x := open(t, vfs.NewMem(), 0)
	for i := uint64(0); i < 10000; i++ {
		x.Put(i, i)
	}
	before := x.mu.m
	if n := x.DropBefore(9000); n != 9000 {
		t.Fatalf("dropped %d", n)
	}
	x.mu.Lock()
	same := fmt.Sprintf("%p", x.mu.m) == fmt.Sprintf("%p", before)
	x.mu.Unlock()
	if same || x.Keys() != 1000 {
		t.Fatalf("map not remade (%v) or %d keys", same, x.Keys())
	}
	if p, ok := x.Get(9500); !ok || p != 9500 {
		t.Fatalf("key 9500: %d %v", p, ok)
	}
}

// The format says the greatest position wins wherever it stands in the
// file. Put writes a hash's entries in increasing order, so only a file
// written otherwise (by another writer, or an older version) shows it.
func TestOpenGreatestWinsWhereverItStands(t *testing.T) {
	fs := vfs.NewMem()
	f, err := fs.Create("keys.idx")
	if err != nil {
		t.Fatal(err)
	}
	data := appendEntry(appendEntry(appendEntry(nil, 1, 20), 1, 10), 2, 5)
	f.WriteAt(data, 0)
	f.Close()
	x := open(t, fs, int64(len(data)))
	if p, _ := x.Get(1); p != 20 {
		t.Fatalf("key 1 at %d, want 20", p)
	}
}
