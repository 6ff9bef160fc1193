package queueindex

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"syscall"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// openMem opens a fresh index "d/q.qi" on a Faulty over a Mem whose
// directory "d" exists, and appends es.
func openMem(t *testing.T, es ...Entry) (*vfs.Mem, *vfs.Faulty, *Index) {
	t.Helper()
	mem := vfs.NewMem()
	if err := mem.MkdirAll("d"); err != nil {
		t.Fatal(err)
	}
	ffs := vfs.NewFaulty(mem)
	x, err := Open(ffs, "d/q.qi", -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	if len(es) > 0 {
		if _, err := x.Append(es); err != nil {
			t.Fatal(err)
		}
	}
	return mem, ffs, x
}

// overwrite writes b at off of name, behind the Index's back.
func overwrite(t *testing.T, fs vfs.FS, name string, b []byte, off int64) {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func entry(i int) Entry {
	return Entry{Pos: uint64(1000 + i*77), Due: int64(1_700_000_000_000 + i), Visible: int64(1_700_000_000_500 + i), Size: uint32(i)}
}

// TestEntryLayout pins the on-disk format drawn in the package doc: the
// fields at their offsets, and the CRC32C of bytes 0..27 XOR "QIDX".
func TestEntryLayout(t *testing.T) {
	mem, _, _ := openMem(t, entry(5))
	f, err := mem.Open("d/q.qi")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, EntrySize)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	e := entry(5)
	if le.Uint64(b[0:]) != e.Pos || int64(le.Uint64(b[8:])) != e.Due || int64(le.Uint64(b[16:])) != e.Visible || le.Uint32(b[24:]) != e.Size {
		t.Fatalf("fields not where the layout says: %x", b)
	}
	want := crc32.Checksum(b[:28], crc32.MakeTable(crc32.Castagnoli)) ^ 0x51494458
	if got := le.Uint32(b[28:]); got != want {
		t.Fatalf("check field %08x, want CRC32C(bytes 0..27) ^ QIDX = %08x", got, want)
	}
}

// TestZeroEntryRejected: a zero-filled entry (a hole, or a page that
// never reached the disk) fails its check; the old 32-bit mix passed it.
func TestZeroEntryRejected(t *testing.T) {
	mem, _, x := openMem(t, entry(0), entry(1), entry(2))
	overwrite(t, mem, "d/q.qi", make([]byte, EntrySize), EntrySize)
	if _, err := x.Read(0, 3, x.Len()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read over an all-zero entry: %v, want ErrCorrupt", err)
	}
	if err := x.Verify(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify over an all-zero entry: %v, want ErrCorrupt", err)
	}
	if got, err := x.Read(0, 1, x.Len()); err != nil || got[0] != entry(0) {
		t.Fatalf("the entry before the damage: %v %v", got, err)
	}
}

// TestBitFlipsRejected: flipping any single bit of an entry is caught.
func TestBitFlipsRejected(t *testing.T) {
	mem, _, x := openMem(t, entry(7))
	f, err := mem.Open("d/q.qi")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	orig := make([]byte, EntrySize)
	if _, err := f.ReadAt(orig, 0); err != nil {
		t.Fatal(err)
	}
	for bit := range EntrySize * 8 {
		b := append([]byte(nil), orig...)
		b[bit/8] ^= 1 << (bit % 8)
		if _, err := f.WriteAt(b, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := x.Read(0, 1, 1); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bit %d flipped: %v, want ErrCorrupt", bit, err)
		}
	}
	if _, err := f.WriteAt(orig, 0); err != nil {
		t.Fatal(err)
	}
	if got, err := x.Read(0, 1, 1); err != nil || got[0] != entry(7) {
		t.Fatalf("restored entry: %v %v", got, err)
	}
}

// TestReadErrorsSurface: an I/O error and a file shorter than the entries
// asked for are errors, never "no entries".
func TestReadErrorsSurface(t *testing.T) {
	mem, ffs, x := openMem(t, entry(0), entry(1), entry(2))
	ffs.FailAfter(vfs.OpRead, 0, syscall.EIO)
	if got, err := x.Read(0, 3, x.Len()); !errors.Is(err, syscall.EIO) || got != nil {
		t.Fatalf("read with EIO: %v %v, want EIO and no entries", got, err)
	}
	if err := x.Verify(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Verify with EIO: %v", err)
	}
	ffs.Inject(nil)
	f, err := mem.Open("d/q.qi")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(EntrySize + 5); err != nil { // behind the Index's back
		t.Fatal(err)
	}
	f.Close()
	if got, err := x.Read(0, 3, x.Len()); !errors.Is(err, io.ErrUnexpectedEOF) || got != nil {
		t.Fatalf("read past a short file: %v %v, want io.ErrUnexpectedEOF", got, err)
	}
	if got, err := x.Read(2, 1, x.Len()); !errors.Is(err, io.ErrUnexpectedEOF) || got != nil {
		t.Fatalf("read wholly past a short file: %v %v, want io.ErrUnexpectedEOF", got, err)
	}
}

// TestSyncFailureIsSticky: after a failed fsync the kernel may have dropped
// the entries' pages, and a retried fsync would succeed without writing
// them (the vfs model does exactly that). So every later Sync fails, and
// Durable stays at the length the last successful Sync covered, which is
// what survives a power loss.
func TestSyncFailureIsSticky(t *testing.T) {
	mem, ffs, x := openMem(t, entry(0), entry(1), entry(2))
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	if x.Durable() != 3 || x.Err() != nil {
		t.Fatalf("Durable %d, Err %v after a good sync", x.Durable(), x.Err())
	}
	if _, err := x.Append([]Entry{entry(3), entry(4)}); err != nil {
		t.Fatal(err)
	}
	ffs.FailAfter(vfs.OpSync, 0, syscall.EIO)
	err := x.Sync()
	if !errors.Is(err, ErrSyncFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("failed sync: %v, want ErrSyncFailed and EIO", err)
	}
	ffs.Inject(nil)
	if err2 := x.Sync(); err2 != err {
		t.Fatalf("sync after a failed sync: %v, want the sticky %v", err2, err)
	}
	if x.Durable() != 3 || x.Err() != err {
		t.Fatalf("Durable %d, Err %v after a failed sync; want 3 and the sticky error", x.Durable(), x.Err())
	}
	// The entries still serve this process.
	if got, err := x.Read(3, 2, x.Len()); err != nil || got[1] != entry(4) {
		t.Fatalf("read after a failed sync: %v %v", got, err)
	}
	// After a power loss what Durable promised is there and checks out;
	// the rest is gone, so a checkpoint that recorded it would be refused.
	img := mem.Crash(nil)
	y, err := Open(img, "d/q.qi", int64(x.Durable()))
	if err != nil {
		t.Fatal(err)
	}
	if err := y.Verify(); err != nil || y.Len() != 3 {
		t.Fatalf("reopened at Durable: len %d, %v", y.Len(), err)
	}
	y.Close()
	if _, err := Open(img, "d/q.qi", 5); err == nil {
		t.Fatal("the entries of the failed sync survived the power loss; the model did not drop them")
	}
}

// TestSyncMakesCreatedFileDurable: the first Sync of a created index also
// makes its directory entry durable, so a checkpoint recording its length
// finds the file after a power loss; a failed directory sync is sticky.
func TestSyncMakesCreatedFileDurable(t *testing.T) {
	mem, _, x := openMem(t, entry(0))
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	y, err := Open(mem.Crash(nil), "d/q.qi", 1)
	if err != nil {
		t.Fatalf("after a power loss: %v", err)
	}
	y.Close()

	_, ffs, z := openMem(t, entry(0))
	ffs.FailAfter(vfs.OpSyncDir, 0, syscall.EIO)
	if err := z.Sync(); !errors.Is(err, ErrSyncFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync with a failing directory sync: %v", err)
	}
	ffs.Inject(nil)
	if err := z.Sync(); !errors.Is(err, ErrSyncFailed) || z.Durable() != 0 {
		t.Fatalf("sync after a failed directory sync: %v, Durable %d", err, z.Durable())
	}
}
