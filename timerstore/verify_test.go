package timerstore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// synced returns a store in dir "timers" (width 1000) holding es, synced,
// and the sizes a checkpoint would record.
func synced(t *testing.T, fs vfs.FS, es ...Entry) (*Store, map[int64]int64) {
	t.Helper()
	s, err := Open(fs, "timers", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if err := s.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	return s, s.Sizes()
}

// recovered opens the store in fs as recovery does: Open, Trim and Verify
// against the checkpoint's sizes keep, each of which must succeed.
func recovered(t *testing.T, fs vfs.FS, width int64, keep map[int64]int64) *Store {
	t.Helper()
	s, err := Open(fs, "timers", width)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Trim(keep); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(keep); err != nil {
		t.Fatal(err)
	}
	return s
}

// overwrite writes p at off in the file name.
func overwrite(t *testing.T, fs vfs.FS, name string, p []byte, off int64) {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(p, off); err != nil {
		t.Fatal(err)
	}
}

// wantCorrupt fails unless err is an ErrCorrupt whose text names the file
// and the offset.
func wantCorrupt(t *testing.T, err error, name string, off int64) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
	if want := fmt.Sprintf("%s at offset %d", name, off); !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %q", err, want)
	}
}

func TestZeroEntryFails(t *testing.T) {
	var zero [EntrySize]byte
	if entryCheck(zero[:]) == 0 {
		t.Fatal("the check of an all-zero entry is zero: an unwritten entry would pass")
	}
	// A file extended with zeros inside the recorded length (what a lost
	// write of a synced region would look like) is refused by Verify and
	// by Load, at the zeroed entry.
	fs := vfs.NewMem()
	s, keep := synced(t, fs, Entry{Due: 10, Pos: 1, Kind: 1}, Entry{Due: 20, Pos: 2, Kind: 1})
	overwrite(t, fs, "timers/0.tb", zero[:], EntrySize)
	wantCorrupt(t, s.Verify(keep), "timers/0.tb", EntrySize)
	_, err := s.Load(0)
	wantCorrupt(t, err, "timers/0.tb", EntrySize)
}

// Every single-bit flip of an entry is caught: CRC-32C detects all of them.
func TestBitFlipsDetected(t *testing.T) {
	in := []Entry{{Due: 999, Pos: 1 << 40, Topic: 7, Queue: 3, Kind: 2}, {Due: 0, Pos: 5, Kind: 1}}
	for bit := 0; bit < EntrySize*8; bit++ {
		fs := vfs.NewMem()
		s, keep := synced(t, fs, in...)
		var buf [1]byte
		f, _ := fs.Open("timers/0.tb")
		f.ReadAt(buf[:], int64(bit/8))
		buf[0] ^= 1 << (bit % 8)
		f.WriteAt(buf[:], int64(bit/8))
		f.Close()
		wantCorrupt(t, s.Verify(keep), "timers/0.tb", 0)
		if got, err := s.Load(0); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bit %d: flipped entry loaded: %+v %v", bit, got, err)
		}
	}
}

func TestTrimRefusesMissingOrShortFile(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(fs *vfs.Mem)
		// Trim names the end of the last whole entry, Verify the end of
		// the file.
		off, verifyOff int64
	}{
		{"missing", func(fs *vfs.Mem) { fs.Remove("timers/5000.tb") }, 0, 0},
		{"short", func(fs *vfs.Mem) {
			f, _ := fs.Open("timers/5000.tb")
			f.Truncate(EntrySize + 5)
			f.Close()
		}, EntrySize, EntrySize + 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			_, keep := synced(t, fs, Entry{Due: 10, Pos: 1, Kind: 1}, Entry{Due: 5010, Pos: 2, Kind: 1}, Entry{Due: 5020, Pos: 3, Kind: 1})
			c.damage(fs)
			s, err := Open(fs, "timers", 1000)
			if err != nil {
				t.Fatal(err)
			}
			wantCorrupt(t, s.Trim(keep), "timers/5000.tb", c.off)
			wantCorrupt(t, s.Verify(keep), "timers/5000.tb", c.verifyOff)
			// Trim changed nothing before it refused: the other bucket
			// is whole.
			if got, err := s.Load(0); err != nil || len(got) != 1 {
				t.Fatalf("bucket 0 after a refused trim: %+v %v", got, err)
			}
		})
	}
}

func TestTrimRefusesOddRecordedLength(t *testing.T) {
	fs := vfs.NewMem()
	s, keep := synced(t, fs, Entry{Due: 10, Pos: 1, Kind: 1})
	keep[0] = EntrySize - 1
	wantCorrupt(t, s.Trim(keep), "timers/0.tb", 0)
	keep[0] = -EntrySize
	wantCorrupt(t, s.Verify(keep), "timers/0.tb", 0)
}

// Bytes beyond the recorded length may be torn: Trim cuts them, whatever
// they hold, and what remains verifies and loads.
func TestTornTailBeyondCheckpointIsCut(t *testing.T) {
	fs := vfs.NewMem()
	s, keep := synced(t, fs, Entry{Due: 10, Pos: 1, Kind: 1})
	s.Add(Entry{Due: 20, Pos: 2, Kind: 1})
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	overwrite(t, fs, "timers/0.tb", make([]byte, EntrySize+7), EntrySize) // a zeroed, torn tail
	s2 := recovered(t, fs, 1000, keep)
	if got, err := s2.Load(0); err != nil || len(got) != 1 || got[0].Pos != 1 {
		t.Fatalf("after trim: %+v %v", got, err)
	}
}

// A bucket whose file vanished under a running store is damage, not an
// empty bucket.
func TestLoadRefusesVanishedFile(t *testing.T) {
	fs := vfs.NewMem()
	s, _ := synced(t, fs, Entry{Due: 10, Pos: 1, Kind: 1})
	fs.Remove("timers/0.tb")
	_, err := s.Load(0)
	wantCorrupt(t, err, "timers/0.tb", 0)
}

// I/O errors are returned as themselves: never read as an empty bucket,
// never reported as corruption.
func TestIOErrorsSurface(t *testing.T) {
	mem := vfs.NewMem()
	ffs := vfs.NewFaulty(mem)
	s, keep := synced(t, ffs, Entry{Due: 10, Pos: 1, Kind: 1}, Entry{Due: 2010, Pos: 2, Kind: 1})
	s.Add(Entry{Due: 30, Pos: 3, Kind: 1})
	s.Flush()
	check := func(what string, op vfs.Op, f func() error) {
		t.Helper()
		ffs.FailAfter(op, 0, syscall.EIO)
		err := f()
		ffs.Inject(nil)
		if !errors.Is(err, syscall.EIO) || errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s with failing %v: %v, want EIO", what, op, err)
		}
	}
	check("load", vfs.OpRead, func() error { _, err := s.Load(0); return err })
	check("load", vfs.OpOpen, func() error { _, err := s.Load(0); return err })
	check("verify", vfs.OpRead, func() error { return s.Verify(keep) })
	check("open", vfs.OpList, func() error { _, err := Open(ffs, "timers", 1000); return err })
	check("open", vfs.OpOpen, func() error { _, err := Open(ffs, "timers", 1000); return err })
	check("trim", vfs.OpTruncate, func() error { return s.Trim(keep) })
	check("reset", vfs.OpRemove, func() error { return s.Reset() })
	check("reset", vfs.OpList, func() error { return s.Reset() })
}

func TestReset(t *testing.T) {
	fs := vfs.NewMem()
	s, _ := synced(t, fs, Entry{Due: 10, Pos: 1, Kind: 1}, Entry{Due: 7010, Pos: 2, Kind: 1})
	s.Add(Entry{Due: 9010, Pos: 3, Kind: 1}) // buffered only
	// A file the store never knew.
	if f, err := fs.Create("timers/123000.tb"); err == nil {
		f.Close()
	}
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	if n, bytes := s.Buckets(); n != 0 || bytes != 0 {
		t.Fatalf("after reset: %d buckets, %d bytes", n, bytes)
	}
	if b, ok := s.NextBucket(0); ok {
		t.Fatalf("after reset, bucket %d remains", b)
	}
	if names, _ := fs.List("timers"); len(names) != 0 {
		t.Fatalf("files left after reset: %v", names)
	}
	// The reset is durable, and the store is usable again.
	if names, _ := fs.Crash(nil).List("timers"); len(names) != 0 {
		t.Fatalf("files back after a crash: %v", names)
	}
	if err := s.Add(Entry{Due: 20, Pos: 4, Kind: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(0); err != nil || len(got) != 1 || got[0].Pos != 4 {
		t.Fatalf("after reset and add: %+v %v", got, err)
	}
}

func TestWidthBounds(t *testing.T) {
	if _, err := Open(vfs.NewMem(), "t", MaxWidth+1); err == nil {
		t.Fatal("a width beyond MaxWidth was accepted")
	}
	// A directory written at one width and opened at a smaller one that
	// divides it: entries beyond the new width are refused, not misread.
	fs := vfs.NewMem()
	synced(t, fs, Entry{Due: 900, Pos: 1, Kind: 1})
	s, err := Open(fs, "timers", 500)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Load(0)
	wantCorrupt(t, err, "timers/0.tb", 0)
}

// Random entries, over wide widths and negative times, come back exactly
// through Add, Sync, a crash, Open, Trim, Verify and Load.
func TestRoundTripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, width := range []int64{1, 1000, 86_400_000, MaxWidth} {
		fs := vfs.NewMem()
		s, err := Open(fs, "timers", width)
		if err != nil {
			t.Fatal(err)
		}
		want := map[int64]map[Entry]bool{}
		for i := 0; i < 500; i++ {
			e := Entry{Due: rng.Int64N(8*width) - 4*width, Pos: rng.Uint64(), Topic: rng.Uint32(), Queue: uint16(rng.Uint32()), Kind: uint8(rng.Uint32())}
			if err := s.Add(e); err != nil {
				t.Fatal(err)
			}
			b := s.BucketOf(e.Due)
			if want[b] == nil {
				want[b] = map[Entry]bool{}
			}
			want[b][e] = true
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		keep := s.Sizes()
		s2 := recovered(t, fs.Crash(nil), width, keep)
		for b, es := range want {
			got, err := s2.Load(b)
			if err != nil || len(got) != len(es) {
				t.Fatalf("width %d bucket %d: %d entries, want %d (%v)", width, b, len(got), len(es), err)
			}
			for _, e := range got {
				if !es[e] {
					t.Fatalf("width %d bucket %d: unexpected %+v", width, b, e)
				}
			}
		}
	}
}

// BenchmarkVerify measures recovery's full check of the timer cache: one
// million entries over 100 buckets, on the OS filesystem (warm cache).
func BenchmarkVerify(b *testing.B) {
	s, err := Open(vfs.OS, b.TempDir(), 60_000)
	if err != nil {
		b.Fatal(err)
	}
	const n = 1_000_000
	for i := 0; i < n; i++ {
		if err := s.Add(Entry{Due: int64(i%100) * 60_000, Pos: uint64(i), Kind: 1}); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil {
		b.Fatal(err)
	}
	keep := s.Sizes()
	b.SetBytes(n * EntrySize)
	b.ResetTimer()
	for range b.N {
		if err := s.Verify(keep); err != nil {
			b.Fatal(err)
		}
	}
}

// Remove deletes a file only at its next call, after the engine's next
// checkpoint: until then the latest checkpoint may still record it, and a
// recovery from that checkpoint must find it whole.
func TestRemoveDeletesAfterTheNextCheckpoint(t *testing.T) {
	fs := vfs.NewMem()
	s, keep1 := synced(t, fs, Entry{Due: 10, Pos: 1, Kind: 1}, Entry{Due: 1010, Pos: 2, Kind: 1}, Entry{Due: 5010, Pos: 3, Kind: 1})
	if n, err := s.Remove(2000); err != nil || n != 2 {
		t.Fatalf("remove: %d %v", n, err)
	}
	if _, ok := s.Sizes()[0]; ok {
		t.Fatal("a removed bucket is still in Sizes")
	}
	s.Add(Entry{Due: 1020, Pos: 4, Kind: 1}) // bucket 1000 comes back
	// A crash now recovers from the checkpoint that records bucket 0.
	r := recovered(t, fs.Crash(nil), 1000, keep1)
	if got, err := r.Load(0); err != nil || len(got) != 1 {
		t.Fatalf("bucket 0 after a crash: %+v %v", got, err)
	}
	// The next checkpoint no longer records bucket 0; the next Remove
	// deletes its file, and not the file of bucket 1000, which came back.
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	keep2 := s.Sizes()
	if _, err := s.Remove(0); err != nil {
		t.Fatal(err)
	}
	names, err := fs.List("timers")
	if err != nil || len(names) != 2 || names[0] != "1000.tb" || names[1] != "5000.tb" {
		t.Fatalf("files after the second remove: %v %v", names, err)
	}
	r = recovered(t, fs, 1000, keep2)
	if got, err := r.Load(1000); err != nil || len(got) != 1 || got[0].Pos != 4 {
		t.Fatalf("bucket 1000 after the second remove: %+v %v", got, err)
	}
}
