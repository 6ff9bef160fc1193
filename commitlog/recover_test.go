package commitlog

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"path"
	"slices"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// damageFixture is a closed log on a Mem, with the positions and payloads
// of its records, used as the starting image of damage tests.
type damageFixture struct {
	fs      *vfs.Mem
	pos     []Pos
	payload [][]byte
	segs    []Segment
}

func newDamageFixture(t *testing.T, records int, segmentBytes int64) damageFixture {
	t.Helper()
	fsys := newMem(t)
	// Not preallocated, so that the last segment's file ends with its
	// records and damage tests can aim at its end.
	opts := Options{FS: fsys, Dir: testDir, SegmentBytes: segmentBytes, NoPreallocate: true}
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	f := damageFixture{fs: fsys}
	for i := range records {
		p := testPayload(0, i, rng.IntN(50))
		f.pos = append(f.pos, mustAppend(t, l, Record{Type: testType(i), Payload: p})...)
		f.payload = append(f.payload, p)
	}
	f.segs = l.Segments()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return f
}

// expectPrefix checks that l holds exactly the fixture's first n records and
// that an Append after them works and lands at the old Head.
func (f damageFixture) expectPrefix(t *testing.T, l *Log, n int) {
	t.Helper()
	wantHead := f.segs[0].Base
	if n > 0 {
		wantHead = f.pos[n-1] + Pos(frameSize(len(f.payload[n-1])))
	}
	if l.Head() != wantHead {
		t.Fatalf("Head %d, want %d (%d intact records)", l.Head(), wantHead, n)
	}
	ps, rs := scanAll(t, l)
	if len(ps) != n {
		t.Fatalf("recovered %d records, want %d", len(ps), n)
	}
	for i := range ps {
		if ps[i] != f.pos[i] || !bytes.Equal(rs[i].Payload, f.payload[i]) || rs[i].Type != testType(i) {
			t.Fatalf("record %d differs after recovery", i)
		}
	}
	p := mustAppend(t, l, Record{Type: 9, Payload: []byte("new")})
	if p[0] != wantHead {
		t.Fatalf("append after recovery at %d, want %d", p[0], wantHead)
	}
	rec, next, err := l.Read(p[0])
	if err != nil || string(rec.Payload) != "new" || next != l.Head() {
		t.Fatalf("Read of new record: %v %q", err, rec.Payload)
	}
}

// intactBefore returns how many of the fixture's records end at or before
// position p.
func (f damageFixture) intactBefore(p Pos) int {
	n := 0
	for i := range f.pos {
		if f.pos[i]+Pos(frameSize(len(f.payload[i]))) <= p {
			n = i + 1
		}
	}
	return n
}

// TestTornTail cuts the last segment at hundreds of random offsets and
// flips random bits in it. A cut is a torn tail: recovery keeps every
// record before it, serves nothing after it, and takes appends. A flipped
// bit in the last record is indistinguishable from a torn write and is cut
// the same way; one in any earlier record is media damage: Open refuses
// and changes nothing, and Repair then salvages every other record at its
// position.
func TestTornTail(t *testing.T) {
	f := newDamageFixture(t, 240, 4096)
	if len(f.segs) < 3 {
		t.Fatalf("fixture has %d segments, want several", len(f.segs))
	}
	last := f.segs[len(f.segs)-1]
	name := path.Join(testDir, last.Name)
	file := readFile(t, f.fs, name)
	rng := rand.New(rand.NewPCG(3, 4))
	sealed := f.intactBefore(last.Base)
	var refused int

	for trial := range 600 {
		img := f.fs.Clone()
		damaged := slices.Clone(file)
		var damageAt Pos // first position whose byte is wrong or missing
		cut := trial%2 == 0
		if cut {
			n := HeaderSize + rng.IntN(len(file)-HeaderSize+1)
			damaged = damaged[:n]
			damageAt = last.Base + Pos(n-HeaderSize)
		} else {
			off := HeaderSize + rng.IntN(len(file)-HeaderSize)
			damaged[off] ^= 1 << rng.IntN(8)
			damageAt = last.Base + Pos(off-HeaderSize)
		}
		writeFile(t, img, name, damaged)

		want := f.intactBefore(damageAt)
		if !cut && want < len(f.pos)-1 {
			// Records follow the damaged one: refuse, then salvage.
			refused++
			expectRefusedThenSalvaged(t, f, img, want)
			continue
		}
		l, err := Open(Options{FS: img, Dir: testDir, SegmentBytes: 4096})
		if err != nil {
			t.Fatalf("trial %d: Open: %v", trial, err)
		}
		if !cut && want < len(f.pos) && f.pos[want] <= damageAt {
			// The flipped byte is inside the last record; it is cut.
			want = f.intactBefore(f.pos[want])
		}
		if want < sealed {
			t.Fatalf("trial %d: damage in the last segment reached a sealed one", trial)
		}
		info := l.Recovery()
		validEnd := last.Base + Pos(0)
		if want > 0 {
			validEnd = f.pos[want-1] + Pos(frameSize(len(f.payload[want-1])))
		}
		if info.TruncatedAt != validEnd || info.TruncatedBytes != int64(len(damaged)-HeaderSize)-int64(validEnd-last.Base) {
			t.Fatalf("trial %d: recovery info %+v, valid end %d", trial, info, validEnd)
		}
		if (info.TruncatedBytes > 0) != (info.Reason != "") {
			t.Fatalf("trial %d: reason %q with %d bytes cut", trial, info.Reason, info.TruncatedBytes)
		}
		if !cut && info.TruncatedBytes == 0 {
			t.Fatalf("trial %d: a flipped bit went unnoticed", trial)
		}
		// The repair is durable before Open returns: a power loss right
		// after it finds nothing more to cut.
		l2, err := Open(Options{FS: img.Crash(nil), Dir: testDir})
		if err != nil {
			t.Fatalf("trial %d: reopen after repair: %v", trial, err)
		}
		if info := l2.Recovery(); info.TruncatedBytes != 0 || l2.Head() != validEnd {
			t.Fatalf("trial %d: second recovery %+v, Head %d", trial, info, l2.Head())
		}
		l2.Close()
		f.expectPrefix(t, l, want)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if refused < 200 {
		t.Fatalf("only %d of 300 flips hit a record with records after it", refused)
	}
}

// expectRefusedThenSalvaged checks img, whose record victim (not the last)
// is damaged: Open refuses with a *DamageError delimiting exactly that
// record and leaves the file alone; Repair salvages; then every other
// record reads at its position and the victim does not.
func expectRefusedThenSalvaged(t *testing.T, f damageFixture, img *vfs.Mem, victim int) {
	t.Helper()
	name := path.Join(testDir, f.segs[len(f.segs)-1].Name)
	before := readFile(t, img, name)
	_, err := Open(Options{FS: img, Dir: testDir})
	var de *DamageError
	if !errors.As(err, &de) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with record %d damaged: %v, want a *DamageError", victim, err)
	}
	r := de.Ranges[0]
	if len(de.Ranges) != 1 || r.Pos != f.pos[victim] || r.End() != f.pos[victim+1] || r.RecordsAfter != len(f.pos)-victim-1 {
		t.Fatalf("record %d [%d, %d) damaged, error reports %+v", victim, f.pos[victim], f.pos[victim+1], de.Ranges)
	}
	if !bytes.Equal(readFile(t, img, name), before) {
		t.Fatal("a refused Open changed the segment")
	}
	rep, err := Repair(Options{FS: img, Dir: testDir}, RepairSalvage)
	if err != nil || len(rep.Ranges) != 1 || rep.RecordsKept != len(f.pos)-victim-1 {
		t.Fatalf("Repair: %+v, %v", rep, err)
	}
	l, err := Open(Options{FS: img.Crash(nil), Dir: testDir})
	if err != nil {
		t.Fatalf("Open after Repair: %v", err)
	}
	f.expectSalvaged(t, l, victim)
}

func TestRecoverIncompleteSegment(t *testing.T) {
	f := newDamageFixture(t, 40, 600)
	last := f.segs[len(f.segs)-1]
	next := segmentName(last.End)
	for _, tc := range []struct {
		name    string
		content []byte
		removed bool
	}{
		{"empty file", nil, true},
		{"partial header", encodeHeader(last.End)[:11], true},
		{"zero-filled header", make([]byte, HeaderSize), true},
		{"complete header", encodeHeader(last.End), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := f.fs.Clone()
			writeFile(t, img, path.Join(testDir, next), tc.content)
			l := openLog(t, img, Options{SegmentBytes: 600})
			info := l.Recovery()
			if got := slices.Equal(info.RemovedSegments, []string{next}); got != tc.removed {
				t.Fatalf("removed %v", info.RemovedSegments)
			}
			names, _ := img.List(testDir)
			if slices.Contains(names, next) == tc.removed {
				t.Fatalf("files %v", names)
			}
			f.expectPrefix(t, l, len(f.pos))
		})
	}
}

func TestRecoverIncompleteFirstSegment(t *testing.T) {
	fsys := newMem(t)
	if err := fsys.MkdirAll(testDir); err != nil {
		t.Fatal(err)
	}
	writeFile(t, fsys, path.Join(testDir, segmentName(0)), []byte("HG"))
	writeFile(t, fsys, path.Join(testDir, "NOTES.txt"), []byte("not a segment"))
	l := openLog(t, fsys, Options{})
	if info := l.Recovery(); !info.Created || len(info.RemovedSegments) != 1 {
		t.Fatalf("recovery %+v", info)
	}
	mustAppend(t, l, Record{Type: 1, Payload: []byte("x")})
	if got := readFile(t, fsys, path.Join(testDir, "NOTES.txt")); string(got) != "not a segment" {
		t.Fatalf("foreign file touched: %q", got)
	}
}

// TestSealedSegmentCorruption: damage inside a sealed segment is not cut at
// Open (no crash produces it, and cutting would drop acknowledged records
// after it); Read and Scan report it when they reach it.
func TestSealedSegmentCorruption(t *testing.T) {
	f := newDamageFixture(t, 60, 500)
	if len(f.segs) < 3 {
		t.Fatalf("want 3+ segments, have %d", len(f.segs))
	}
	victim := f.segs[1]
	name := path.Join(testDir, victim.Name)
	file := readFile(t, f.fs, name)
	i := f.intactBefore(victim.Base) + 1 // second record of the segment
	off := HeaderSize + int(f.pos[i]-victim.Base) + FrameHeaderSize + 3
	file[off] ^= 0x40
	writeFile(t, f.fs, name, file)

	l := openLog(t, f.fs, Options{SegmentBytes: 500})
	if info := l.Recovery(); info.TruncatedBytes != 0 {
		t.Fatalf("recovery cut a sealed segment: %+v", info)
	}
	if _, _, err := l.Read(f.pos[i]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read of damaged record: %v", err)
	}
	for j := range f.pos {
		if j == i {
			continue
		}
		rec, _, err := l.Read(f.pos[j])
		if err != nil || !bytes.Equal(rec.Payload, f.payload[j]) {
			t.Fatalf("Read of intact record %d: %v", j, err)
		}
	}
	n := 0
	err := l.Scan(l.Start(), func(Pos, Record) error { n++; return nil })
	if !errors.Is(err, ErrCorrupt) || n != i {
		t.Fatalf("Scan: %v after %d records, want ErrCorrupt after %d", err, n, i)
	}
	if err := l.Scan(f.segs[2].Base, func(Pos, Record) error { return nil }); err != nil {
		t.Fatalf("Scan past the damage: %v", err)
	}
	l.Close() // skip the invariant check, which would hit the damage
}

func TestStructuralCorruptionFailsOpen(t *testing.T) {
	f := newDamageFixture(t, 60, 500)
	mid := path.Join(testDir, f.segs[1].Name)
	lastName := path.Join(testDir, f.segs[len(f.segs)-1].Name)
	for _, tc := range []struct {
		name   string
		damage func(img *vfs.Mem)
	}{
		{"bad magic in sealed segment", func(img *vfs.Mem) {
			b := readFile(t, img, mid)
			b[0] = 'X'
			writeFile(t, img, mid, b)
		}},
		{"wrong version", func(img *vfs.Mem) {
			b := readFile(t, img, mid)
			b[4] = 2
			writeFile(t, img, mid, b)
		}},
		{"gap between segments", func(img *vfs.Mem) {
			if err := img.Remove(mid); err != nil {
				t.Fatal(err)
			}
		}},
		{"segment renamed", func(img *vfs.Mem) {
			b := readFile(t, img, mid)
			writeFile(t, img, path.Join(testDir, segmentName(f.segs[1].Base+1)), b)
			img.Remove(mid)
		}},
		{"bad header on a last segment with records", func(img *vfs.Mem) {
			b := readFile(t, img, lastName)
			b[17] ^= 1
			writeFile(t, img, lastName, b)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := f.fs.Clone()
			tc.damage(img)
			l, err := Open(Options{FS: img, Dir: testDir})
			if !errors.Is(err, ErrCorrupt) {
				if l != nil {
					l.Close()
				}
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
		})
	}
}
