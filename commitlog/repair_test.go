package commitlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// lastSegment returns the path and bytes of the fixture's last segment in
// img.
func (f damageFixture) lastSegment(t *testing.T, img vfs.FS) (string, Segment, []byte) {
	t.Helper()
	last := f.segs[len(f.segs)-1]
	name := path.Join(testDir, last.Name)
	return name, last, readFile(t, img, name)
}

// recordsIn returns the indexes of the fixture's records in segment s.
func (f damageFixture) recordsIn(s Segment) []int {
	var out []int
	for i, p := range f.pos {
		if p >= s.Base && p < s.End {
			out = append(out, i)
		}
	}
	return out
}

// flipPayloadByte damages record i of segment s in file (its bytes) by
// flipping a bit of its payload, or of its CRC if it has none.
func (f damageFixture) flipPayloadByte(file []byte, s Segment, i int) {
	off := HeaderSize + int(f.pos[i]-s.Base) + FrameHeaderSize
	if len(f.payload[i]) == 0 {
		off -= 2
	}
	file[off] ^= 0x10
}

// expectSalvaged checks that l holds every fixture record except those in
// lost at its old position, that Read of a lost one fails with ErrCorrupt,
// and that Scan passes over the skip frames. It closes l, because the
// invariant check of openLog's cleanup wants records without gaps.
func (f damageFixture) expectSalvaged(t *testing.T, l *Log, lost ...int) {
	t.Helper()
	for i := range f.pos {
		rec, _, err := l.Read(f.pos[i])
		if slices.Contains(lost, i) {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Read of damaged record %d at %d: %v, want ErrCorrupt", i, f.pos[i], err)
			}
			continue
		}
		if err != nil || !bytes.Equal(rec.Payload, f.payload[i]) || rec.Type != testType(i) {
			t.Fatalf("Read of record %d at %d after salvage: %v", i, f.pos[i], err)
		}
	}
	ps, _ := scanAll(t, l)
	var want []Pos
	for i, p := range f.pos {
		if !slices.Contains(lost, i) {
			want = append(want, p)
		}
	}
	if !slices.Equal(ps, want) {
		t.Fatalf("Scan visits %v, want %v", ps, want)
	}
	end := f.pos[len(f.pos)-1] + Pos(frameSize(len(f.payload[len(f.pos)-1])))
	if l.Head() != end {
		t.Fatalf("Head %d, want %d", l.Head(), end)
	}
	p := mustAppend(t, l, Record{Type: 1, Payload: []byte("after repair")})
	if rec, _, err := l.Read(p[0]); err != nil || string(rec.Payload) != "after repair" || p[0] != end {
		t.Fatalf("Read of a new record at %d: %v", p[0], err)
	}
	l.Close()
}

func TestOpenRefusesMediaDamage(t *testing.T) {
	f := newDamageFixture(t, 60, 1000)
	name, last, file := f.lastSegment(t, f.fs)
	recs := f.recordsIn(last)
	if len(recs) < 4 {
		t.Fatalf("last segment holds %d records, want 4+", len(recs))
	}
	victim := recs[1]
	damaged := slices.Clone(file)
	f.flipPayloadByte(damaged, last, victim)
	writeFile(t, f.fs, name, damaged)

	l, err := Open(Options{FS: f.fs, Dir: testDir})
	if err == nil {
		l.Close()
		t.Fatal("Open accepted a damaged record followed by acknowledged ones")
	}
	var de *DamageError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &de) {
		t.Fatalf("Open: %v, want a *DamageError wrapping ErrCorrupt", err)
	}
	length := frameSize(len(f.payload[victim]))
	after := len(recs) - 2
	var afterBytes int64
	for _, i := range recs[2:] {
		afterBytes += int64(frameSize(len(f.payload[i])))
	}
	r := de.Ranges[0]
	if len(de.Ranges) != 1 || r.Pos != f.pos[victim] || r.Length != int64(length) || r.Tail ||
		r.RecordsAfter != after || r.BytesAfter != afterBytes || r.Offset != HeaderSize+int64(f.pos[victim]-last.Base) {
		t.Fatalf("damage %+v; want pos %d, %d bytes, %d records (%d bytes) after", de.Ranges, f.pos[victim], length, after, afterBytes)
	}
	msg := err.Error()
	for _, want := range []string{
		last.Name, "position " + strconv.Itoa(int(f.pos[victim])), strconv.Itoa(length) + " damaged bytes",
		strconv.Itoa(after) + " valid records", "hourglass repair --data-dir " + path.Dir(testDir),
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if !bytes.Equal(readFile(t, f.fs, name), damaged) {
		t.Fatal("a refused Open changed the segment")
	}
	// The refusal is stable: nothing was cut that a second Open could miss.
	if _, err := Open(Options{FS: f.fs.Crash(nil), Dir: testDir}); !errors.As(err, &de) {
		t.Fatalf("second Open: %v", err)
	}
}

// TestTornTailKinds: what a crash leaves after the last acknowledged
// record (a partial frame, garbage that frames nothing, zeros then
// garbage) is cut as before, and Recovery says it was a torn tail. Zeros
// alone are no torn tail but preallocated space: kept, not cut, and
// counted in PreallocatedBytes.
func TestTornTailKinds(t *testing.T) {
	f := newDamageFixture(t, 30, 1<<20)
	name, last, file := f.lastSegment(t, f.fs)
	next := appendFrame(nil, Record{Type: 2, Payload: []byte("never acknowledged")}, recordCRC(2, []byte("never acknowledged")))
	garbage := make([]byte, 300)
	for i := range garbage {
		garbage[i] = byte(i*131 + 7)
	}
	lastRec := len(f.pos) - 1
	lastOff := HeaderSize + int(f.pos[lastRec]-last.Base)
	for _, tc := range []struct {
		name  string
		image []byte
		keep  int // records that survive
		zeros int // the zeros after them, when nothing else follows
	}{
		{"partial frame", append(slices.Clone(file), next[:len(next)-3]...), len(f.pos), 0},
		{"partial header", append(slices.Clone(file), next[:5]...), len(f.pos), 0},
		{"zeros", append(slices.Clone(file), make([]byte, 4096)...), len(f.pos), 4096},
		{"garbage", append(slices.Clone(file), garbage...), len(f.pos), 0},
		{"zeroed last record", append(slices.Clone(file[:lastOff]), make([]byte, len(file)-lastOff)...), lastRec, len(file) - lastOff},
		{"zeros then garbage", append(append(slices.Clone(file), make([]byte, 100)...), garbage...), len(f.pos), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := f.fs.Clone()
			writeFile(t, img, name, tc.image)
			l := openLog(t, img, Options{})
			info := l.Recovery()
			switch {
			case tc.zeros > 0 && (info.TruncatedBytes != 0 || info.Reason != "" || info.PreallocatedBytes != int64(tc.zeros)):
				t.Fatalf("zeros: recovery %+v", info)
			case tc.zeros == 0 && (info.TruncatedBytes == 0 || !strings.HasPrefix(info.Reason, "torn tail")):
				t.Fatalf("recovery %+v", info)
			}
			f.expectPrefix(t, l, tc.keep)
		})
	}
}

func TestRepairSalvage(t *testing.T) {
	f := newDamageFixture(t, 80, 1000)
	name, last, file := f.lastSegment(t, f.fs)
	recs := f.recordsIn(last)
	a, b := recs[1], recs[len(recs)-3] // two ranges, valid records after each
	damaged := slices.Clone(file)
	f.flipPayloadByte(damaged, last, a)
	f.flipPayloadByte(damaged, last, b)
	// The length field of b is damaged too, so the range's end is found by
	// searching rather than from the length.
	damaged[HeaderSize+int(f.pos[b]-last.Base)+2] ^= 0x01
	writeFile(t, f.fs, name, damaged)

	rep, err := Repair(Options{FS: f.fs, Dir: testDir}, RepairSalvage)
	if err != nil {
		t.Fatalf("Repair: %v", err)
	}
	if len(rep.Ranges) != 2 || rep.RecordsLost != 0 || rep.RecordsKept != len(recs)-3 {
		t.Fatalf("report %+v", rep)
	}
	var lostBytes int64
	for k, i := range []int{a, b} {
		r := rep.Ranges[k]
		n := frameSize(len(f.payload[i]))
		lostBytes += int64(n)
		if r.Action != ActionSkip || r.Pos != f.pos[i] || r.Length != int64(n) || r.Segment != last.Name {
			t.Fatalf("range %d: %+v, want skip of %d bytes at %d", k, r, n, f.pos[i])
		}
		// The quarantine file holds the original, damaged bytes.
		q := readFile(t, f.fs, path.Join(testDir, r.Quarantine))
		if !bytes.Equal(q, damaged[r.Offset:r.Offset+r.Length]) {
			t.Fatalf("quarantine %s does not hold the damaged bytes", r.Quarantine)
		}
	}
	if rep.BytesQuarantined != lostBytes || rep.BytesLost != lostBytes {
		t.Fatalf("report bytes %+v, want %d", rep, lostBytes)
	}

	// Everything Repair did is durable: a power loss now changes nothing.
	img := f.fs.Crash(nil)
	l := openLog(t, img, Options{})
	if info := l.Recovery(); info.TruncatedBytes != 0 {
		t.Fatalf("Open after salvage cut %+v", info)
	}
	// A position inside a skip frame reads as corrupt, not as a record.
	if _, _, err := l.Read(f.pos[a] + FrameHeaderSize); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read inside a skip frame: %v", err)
	}
	f.expectSalvaged(t, l, a, b)

	// A second Repair finds nothing to do.
	again, err := Repair(Options{FS: f.fs, Dir: testDir}, RepairSalvage)
	if err != nil || len(again.Ranges) != 0 {
		t.Fatalf("second Repair: %+v, %v", again, err)
	}
}

func TestRepairTruncate(t *testing.T) {
	f := newDamageFixture(t, 60, 1000)
	name, last, file := f.lastSegment(t, f.fs)
	recs := f.recordsIn(last)
	victim := recs[2]
	damaged := slices.Clone(file)
	f.flipPayloadByte(damaged, last, victim)
	writeFile(t, f.fs, name, damaged)

	rep, err := Repair(Options{FS: f.fs, Dir: testDir}, RepairTruncate)
	if err != nil {
		t.Fatalf("Repair: %v", err)
	}
	cutFrom := HeaderSize + int(f.pos[victim]-last.Base)
	if len(rep.Ranges) != 1 || rep.Ranges[0].Action != ActionCut || rep.Ranges[0].Pos != f.pos[victim] ||
		rep.Ranges[0].Length != int64(len(file)-cutFrom) || rep.RecordsLost != len(recs)-3 || rep.Mode != "truncate" {
		t.Fatalf("report %+v", rep)
	}
	if q := readFile(t, f.fs, path.Join(testDir, rep.Ranges[0].Quarantine)); !bytes.Equal(q, damaged[cutFrom:]) {
		t.Fatal("quarantine file does not hold the cut bytes")
	}
	l := openLog(t, f.fs.Crash(nil), Options{})
	f.expectPrefix(t, l, victim)
}

// TestEmbeddedRecordNotResurrected: a payload can hold bytes that frame
// valid records (a client controls its bodies). When the record holding
// them is damaged, they must not come back as records.
func TestEmbeddedRecordNotResurrected(t *testing.T) {
	forged := func(s string) []byte {
		return appendFrame(nil, Record{Type: 1, Payload: []byte(s)}, recordCRC(1, []byte(s)))
	}
	// A chain of forged frames that ends exactly where the payload ends,
	// the case the chaining rule alone cannot tell from real records.
	chained := append(append([]byte("body:"), forged("forged one")...), forged("forged two")...)
	// One forged frame with ordinary bytes after it.
	lone := append(append([]byte("body:"), forged("forged")...), []byte("and the rest of the body")...)

	for _, tc := range []struct {
		name        string
		payload     []byte
		last        bool // the carrier is the last record
		flipsLength bool // the damage hits the carrier's length field
	}{
		{"chain, body damaged", chained, false, false},
		{"chain in last record, body damaged", chained, true, false},
		{"lone frame, length damaged", lone, false, true},
		{"lone frame in last record, length damaged", lone, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := newMem(t)
			l := openLog(t, fsys, Options{})
			before := mustAppend(t, l, Record{Type: 1, Payload: []byte("before")})[0]
			carrier := mustAppend(t, l, Record{Type: 1, Payload: tc.payload})[0]
			var after []Pos
			if !tc.last {
				after = mustAppend(t, l, Record{Type: 2, Payload: []byte("after 1")}, Record{Type: 2, Payload: []byte("after 2")})
			}
			head := l.Head()
			l.Close()
			name := path.Join(testDir, segmentName(0))
			file := readFile(t, fsys, name)
			off := HeaderSize + int(carrier)
			if tc.flipsLength {
				file[off+1] ^= 0x04 // +1024: past the end, the length is no help
			} else {
				file[off+FrameHeaderSize+1] ^= 0x01
			}
			writeFile(t, fsys, name, file)

			if tc.last {
				l := openLog(t, fsys, Options{})
				ps, _ := scanAll(t, l)
				if !slices.Equal(ps, []Pos{before}) || l.Head() != carrier {
					t.Fatalf("after cutting the damaged last record: records %v, Head %d, want [%d], %d", ps, l.Head(), before, carrier)
				}
				return
			}
			_, err := Open(Options{FS: fsys, Dir: testDir})
			var de *DamageError
			if !errors.As(err, &de) || len(de.Ranges) != 1 || de.Ranges[0].Pos != carrier || de.Ranges[0].End() != after[0] {
				t.Fatalf("Open: %v; want the damage to be exactly the carrier [%d, %d)", err, carrier, after[0])
			}
			if _, err := Repair(Options{FS: fsys, Dir: testDir}, RepairSalvage); err != nil {
				t.Fatal(err)
			}
			l = openLog(t, fsys, Options{})
			ps, _ := scanAll(t, l)
			if want := append([]Pos{before}, after...); !slices.Equal(ps, want) || l.Head() != head {
				t.Fatalf("records after salvage %v, want %v", ps, want)
			}
			l.Close() // the skip frame is a gap for openLog's invariant check
		})
	}
}

// TestRepairSealedSegment: damage in a sealed segment, which Open leaves
// for Read and Scan to report, is salvaged with a skip frame in either
// mode (cutting it would break the chain of segments).
func TestRepairSealedSegment(t *testing.T) {
	for _, mode := range []RepairMode{RepairSalvage, RepairTruncate} {
		t.Run(mode.String(), func(t *testing.T) {
			f := newDamageFixture(t, 60, 500)
			img := f.fs.Clone()
			victim := f.segs[1]
			name := path.Join(testDir, victim.Name)
			recs := f.recordsIn(victim)
			file := readFile(t, img, name)
			mid, lastOfSeg := recs[1], recs[len(recs)-1]
			f.flipPayloadByte(file, victim, mid)
			f.flipPayloadByte(file, victim, lastOfSeg) // a "tail" of a sealed segment
			writeFile(t, img, name, file)

			rep, err := Repair(Options{FS: img, Dir: testDir}, mode)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Ranges) != 2 || rep.Ranges[0].Action != ActionSkip || rep.Ranges[1].Action != ActionSkip || !rep.Ranges[1].Tail {
				t.Fatalf("report %+v", rep)
			}
			l := openLog(t, img, Options{})
			f.expectSalvaged(t, l, mid, lastOfSeg)
		})
	}
}

// TestRepairShortestRange: the smallest damaged range is one empty
// record's frame header, and its skip frame has an empty payload.
func TestRepairShortestRange(t *testing.T) {
	fsys := newMem(t)
	l := openLog(t, fsys, Options{})
	ps := mustAppend(t, l, Record{Type: 1, Payload: []byte("a")}, Record{Type: 3}, Record{Type: 1, Payload: []byte("c")})
	l.Close()
	name := path.Join(testDir, segmentName(0))
	file := readFile(t, fsys, name)
	file[HeaderSize+int(ps[1])+8] = 0 // type 0
	writeFile(t, fsys, name, file)

	rep, err := Repair(Options{FS: fsys, Dir: testDir}, RepairSalvage)
	if err != nil || len(rep.Ranges) != 1 || rep.Ranges[0].Length != FrameHeaderSize {
		t.Fatalf("Repair: %+v, %v", rep, err)
	}
	l = openLog(t, fsys, Options{})
	got, _ := scanAll(t, l)
	if !slices.Equal(got, []Pos{ps[0], ps[2]}) {
		t.Fatalf("records %v", got)
	}
	l.Close() // the skip frame is a gap for openLog's invariant check
}

// TestRepairKeepsEarlierQuarantine: a Repair interrupted after its
// quarantine copy and rerun on partly overwritten bytes must not replace
// the first copy, which holds the original bytes.
func TestRepairKeepsEarlierQuarantine(t *testing.T) {
	f := newDamageFixture(t, 40, 1<<20)
	name, last, file := f.lastSegment(t, f.fs)
	victim := f.recordsIn(last)[3]
	f.flipPayloadByte(file, last, victim)
	writeFile(t, f.fs, name, file)
	first := path.Join(testDir, last.Name+".damaged-"+strconv.Itoa(int(f.pos[victim])))
	writeFile(t, f.fs, first, []byte("the first copy"))

	rep, err := Repair(Options{FS: f.fs, Dir: testDir}, RepairSalvage)
	if err != nil || len(rep.Ranges) != 1 {
		t.Fatalf("Repair: %+v, %v", rep, err)
	}
	if rep.Ranges[0].Quarantine != path.Base(first)+".1" {
		t.Fatalf("quarantine %q", rep.Ranges[0].Quarantine)
	}
	if got := readFile(t, f.fs, first); string(got) != "the first copy" {
		t.Fatalf("first quarantine file replaced: %q", got)
	}
}

func TestRepairRefusesStructuralDamage(t *testing.T) {
	f := newDamageFixture(t, 60, 500)
	if err := f.fs.Remove(path.Join(testDir, f.segs[1].Name)); err != nil {
		t.Fatal(err)
	}
	if _, err := Repair(Options{FS: f.fs, Dir: testDir}, RepairSalvage); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Repair of a log with a missing segment: %v", err)
	}
	if _, err := Repair(Options{FS: f.fs, Dir: "no/such/dir"}, RepairSalvage); !vfs.IsNotExist(err) {
		t.Fatalf("Repair of a missing dir: %v", err)
	}
	if _, err := ParseRepairMode("cut"); err == nil {
		t.Fatal("ParseRepairMode accepted cut")
	}
	for _, m := range []RepairMode{RepairSalvage, RepairTruncate} {
		if got, err := ParseRepairMode(m.String()); err != nil || got != m {
			t.Fatalf("ParseRepairMode(%q) = %v, %v", m, got, err)
		}
	}
}

// TestLengthFieldDamage: a damaged length that happens to point at a
// later record boundary must not swallow the records in between; the bad
// frame validating when cut at the first candidate proves that only its
// length was hit.
func TestLengthFieldDamage(t *testing.T) {
	f := newDamageFixture(t, 40, 1<<20)
	name, last, file := f.lastSegment(t, f.fs)
	victim := f.recordsIn(last)[5]
	off := HeaderSize + int(f.pos[victim]-last.Base)
	n := binary.LittleEndian.Uint32(file[off:])
	binary.LittleEndian.PutUint32(file[off:], n+uint32(frameSize(len(f.payload[victim+1]))))
	writeFile(t, f.fs, name, file)

	_, err := Open(Options{FS: f.fs, Dir: testDir})
	var de *DamageError
	if !errors.As(err, &de) || de.Ranges[0].Pos != f.pos[victim] || de.Ranges[0].End() != f.pos[victim+1] {
		t.Fatalf("Open: %v; want the damage to be exactly record %d [%d, %d)", err, victim, f.pos[victim], f.pos[victim+1])
	}
}
