package commitlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

const testDir = "db/log"

// openLog opens a log on fsys in testDir and closes it at the end of the
// test, after checking its invariants.
func openLog(t testing.TB, fsys vfs.FS, opts Options) *Log {
	t.Helper()
	opts.FS, opts.Dir = fsys, testDir
	l, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if l.isClosed() {
			return
		}
		checkInvariants(t, l)
		if err := l.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

// checkInvariants verifies what must hold of any open log: segments chain,
// the last ends at Head, and a scan from Start visits contiguous, valid
// records up to Head.
func checkInvariants(t testing.TB, l *Log) {
	t.Helper()
	segs := l.Segments()
	if len(segs) == 0 {
		t.Fatal("no segments")
	}
	if segs[0].Base != l.Start() {
		t.Errorf("Start %d, first segment base %d", l.Start(), segs[0].Base)
	}
	for i := 1; i < len(segs); i++ {
		if segs[i].Base != segs[i-1].End {
			t.Errorf("segment %s starts at %d, predecessor ends at %d", segs[i].Name, segs[i].Base, segs[i-1].End)
		}
	}
	if end := segs[len(segs)-1].End; end != l.Head() {
		t.Errorf("last segment ends at %d, Head %d", end, l.Head())
	}
	next := l.Start()
	err := l.Scan(l.Start(), func(pos Pos, rec Record) error {
		if pos != next {
			return fmt.Errorf("record at %d, expected %d", pos, next)
		}
		next += Pos(frameSize(len(rec.Payload)))
		return nil
	})
	if err != nil {
		t.Errorf("invariant scan: %v", err)
	}
	if next != l.Head() && err == nil {
		t.Errorf("scan ended at %d, Head %d", next, l.Head())
	}
}

// newMem returns a Mem in which testDir's parent exists.
func newMem(t testing.TB) *vfs.Mem {
	t.Helper()
	m := vfs.NewMem()
	if err := m.MkdirAll(path.Dir(testDir)); err != nil {
		t.Fatal(err)
	}
	return m
}

// testPayload is a self-describing payload: who wrote it, its sequence
// number, and a filler of varying length derived from both, so that a
// recovered record can be checked without a model and sizes vary.
func testPayload(writer, seq, fill int) []byte {
	p := make([]byte, 8+fill)
	binary.LittleEndian.PutUint32(p[0:4], uint32(writer))
	binary.LittleEndian.PutUint32(p[4:8], uint32(seq))
	for i := range fill {
		p[8+i] = byte(writer*31 + seq*7 + i)
	}
	return p
}

// parsePayload undoes testPayload and reports whether p is well formed.
func parsePayload(p []byte) (writer, seq int, ok bool) {
	if len(p) < 8 {
		return 0, 0, false
	}
	writer = int(binary.LittleEndian.Uint32(p[0:4]))
	seq = int(binary.LittleEndian.Uint32(p[4:8]))
	return writer, seq, bytes.Equal(p, testPayload(writer, seq, len(p)-8))
}

// testType is the record type testPayload's records get.
func testType(seq int) Type { return Type(1 + seq%3) }

// mustAppend appends recs and fails the test on error.
func mustAppend(t testing.TB, l *Log, recs ...Record) []Pos {
	t.Helper()
	pos, err := l.Append(recs...)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if len(pos) != len(recs) {
		t.Fatalf("Append returned %d positions for %d records", len(pos), len(recs))
	}
	return pos
}

// scanAll returns every record from Start, with positions.
func scanAll(t testing.TB, l *Log) ([]Pos, []Record) {
	t.Helper()
	var ps []Pos
	var rs []Record
	if err := l.Scan(l.Start(), func(p Pos, r Record) error {
		ps = append(ps, p)
		rs = append(rs, r)
		return nil
	}); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return ps, rs
}

// readFile returns the whole content of name.
func readFile(t testing.TB, fsys vfs.FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return b
}

// writeFile replaces name with data, durably.
func writeFile(t testing.TB, fsys vfs.FS, name string, data []byte) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(path.Dir(name)); err != nil {
		t.Fatal(err)
	}
}

// rawFrames independently parses the frames of a segment file's bytes
// (without the package's decoder) and returns their file offsets; it stops
// at the first frame that does not check out.
func rawFrames(file []byte) (offsets []int, validEnd int) {
	off := HeaderSize
	for off+9 <= len(file) {
		n := int(binary.LittleEndian.Uint32(file[off:]))
		sum := binary.LittleEndian.Uint32(file[off+4:])
		if file[off+8] == 0 || off+9+n > len(file) || off+9+n < off {
			break
		}
		if crc32.Checksum(file[off+8:off+9+n], crc32.MakeTable(crc32.Castagnoli)) != sum {
			break
		}
		offsets = append(offsets, off)
		off += 9 + n
	}
	return offsets, off
}
