package commitlog

import (
	"errors"
	"path"
	"strings"
	"syscall"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// sealedLog appends records of 300-302 bytes until the log has at least
// n sealed segments, closing and reopening it halfway (so that the
// writer's running sum goes on from recovery's), and returns it open.
func sealedLog(t *testing.T, fsys vfs.FS, n int) *Log {
	t.Helper()
	opts := Options{SegmentBytes: 4096}
	l := openLog(t, fsys, opts)
	for seq := 0; len(l.Segments()) <= n; seq++ {
		mustAppend(t, l, Record{Type: testType(seq), Payload: testPayload(0, seq, 300+seq%3)})
		if seq == 10 {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openLog(t, fsys, opts)
		}
	}
	return l
}

// TestSealWritesSum: every sealed segment gets a sum file at its roll,
// the active one none, and Scrub finds each sealed segment exactly as
// sealed (across a reopen in the middle of a segment).
func TestSealWritesSum(t *testing.T) {
	fsys := newMem(t)
	l := sealedLog(t, fsys, 3)
	segs := l.Segments()
	names, _ := fsys.List(testDir)
	for i, s := range segs {
		has := false
		for _, n := range names {
			has = has || n == SumFileName(s.Name)
		}
		if has != (i < len(segs)-1) {
			t.Fatalf("segment %d of %d (%s): sum file %v", i, len(segs), s.Name, has)
		}
	}
	var paced int64
	for _, s := range segs[:len(segs)-1] {
		res, err := l.Scrub(s.Base, func(n int64) error { paced += n; return nil })
		if err != nil {
			t.Fatal(err)
		}
		if res.SumState != SumOK || len(res.Damage) != 0 || res.Bytes != int64(s.End-s.Base) || res.Records == 0 {
			t.Fatalf("scrub of %s: %+v", s.Name, res)
		}
	}
	if want := int64(segs[len(segs)-1].Base - segs[0].Base); paced < want {
		t.Fatalf("pace saw %d bytes, the sealed segments hold %d", paced, want)
	}
	if _, err := l.Scrub(segs[len(segs)-1].Base, nil); !errors.Is(err, ErrNotSealed) {
		t.Fatalf("scrub of the active segment: %v, want ErrNotSealed", err)
	}
	stop := errors.New("stop")
	if _, err := l.Scrub(segs[0].Base, func(int64) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("a pace error must stop the scrub: %v", err)
	}
}

// damageAt overwrites b at file offset off of the segment file name.
func damageAt(t *testing.T, fsys vfs.FS, name string, off int64, b []byte) {
	t.Helper()
	f, err := fsys.Open(path.Join(testDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestScrubFindsDamage: 4 bytes overwritten inside a record of a sealed
// segment, in its payload or its length field, are found by Scrub while
// the log is open, delimited as Repair would (the records after it are
// counted), and the sum no longer matches.
func TestScrubFindsDamage(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   int64
	}{{"payload", 40}, {"length", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := newMem(t)
			l := sealedLog(t, fsys, 2)
			s := l.Segments()[0]
			file := readFile(t, fsys, path.Join(testDir, s.Name))
			offs, _ := rawFrames(file)
			victim := offs[2]
			damageAt(t, fsys, s.Name, int64(victim)+tc.at, []byte{0xde, 0xad, 0xbe, 0xef})
			res, err := l.Scrub(s.Base, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := s.Base + Pos(victim-HeaderSize)
			if len(res.Damage) != 1 || res.Damage[0].Pos != want || res.Damage[0].Segment != s.Name ||
				res.Damage[0].RecordsAfter != len(offs)-3 || res.SumState != SumMismatch {
				t.Fatalf("scrub: %+v, want one range at %d followed by %d records", res, want, len(offs)-3)
			}
			if err := l.Close(); err != nil { // the cleanup's scan would stop at the damage
				t.Fatal(err)
			}
		})
	}
}

// TestScrubSumCatchesValidFrames: two records of one length swapped in a
// sealed segment leave every frame valid; only the segment's sum sees it.
// A segment sealed before sum files existed (its sum file removed) still
// opens and scrubs, by its frames alone.
func TestScrubSumCatchesValidFrames(t *testing.T) {
	fsys := newMem(t)
	l := sealedLog(t, fsys, 2)
	s := l.Segments()[0]
	name := path.Join(testDir, s.Name)
	file := readFile(t, fsys, name)
	offs, end := rawFrames(file)
	a, b := offs[0], offs[3] // 3 apart: of one length
	la, lb := offs[1]-a, offs[4]-b
	if la != lb {
		t.Fatalf("fixture: records 0 and 3 are %d and %d bytes", la, lb)
	}
	swapped := append([]byte(nil), file...)
	copy(swapped[a:], file[b:b+lb])
	copy(swapped[b:], file[a:a+la])
	damageAt(t, fsys, s.Name, 0, swapped[:end])
	res, err := l.Scrub(s.Base, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.SumState != SumMismatch || len(res.Damage) != 1 || res.Damage[0].Pos != s.Base ||
		!strings.Contains(res.Damage[0].Reason, "every record validates") {
		t.Fatalf("scrub of swapped records: %+v", res)
	}
	if err := fsys.Remove(path.Join(testDir, SumFileName(s.Name))); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Scrub(s.Base, nil); err != nil || res.SumState != SumNone || len(res.Damage) != 0 {
		t.Fatalf("scrub without a sum file: %+v, %v", res, err)
	}
}

// TestScrubReadErrorIsNotDamage: an EIO while scrubbing is an error, not
// damage: a read that failed may succeed later.
func TestScrubReadErrorIsNotDamage(t *testing.T) {
	ff := vfs.NewFaulty(newMem(t))
	l := sealedLog(t, ff, 2)
	s := l.Segments()[0]
	ff.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpRead && strings.HasSuffix(name, s.Name) {
			return syscall.EIO
		}
		return nil
	})
	res, err := l.Scrub(s.Base, nil)
	ff.Inject(nil)
	if !errors.Is(err, syscall.EIO) || len(res.Damage) != 0 {
		t.Fatalf("scrub over EIO: %+v, %v", res, err)
	}
	if res, err := l.Scrub(s.Base, nil); err != nil || res.SumState != SumOK {
		t.Fatalf("scrub after the fault: %+v, %v", res, err)
	}
}

// TestRepairRewritesSum: after Repair overwrites damage in a sealed
// segment with a skip frame, the segment's sum file matches its new
// bytes, and Verify checks it; retention removes a sum file with its
// segment.
func TestRepairRewritesSum(t *testing.T) {
	fsys := newMem(t)
	l := sealedLog(t, fsys, 3)
	s := l.Segments()[1]
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	offs, _ := rawFrames(readFile(t, fsys, path.Join(testDir, s.Name)))
	damageAt(t, fsys, s.Name, int64(offs[1])+30, []byte{1, 2, 3, 4})
	vr, err := Verify(fsys, testDir, nil)
	if err != nil || len(vr.Damage) != 1 {
		t.Fatalf("verify before repair: %+v, %v", vr, err)
	}
	if _, err := Repair(Options{FS: fsys, Dir: testDir}, RepairSalvage); err != nil {
		t.Fatal(err)
	}
	vr, err = Verify(fsys, testDir, nil)
	if err != nil || len(vr.Damage) != 0 || len(vr.SumMismatch) != 0 || vr.Sums != len(vr.Segments)-1 {
		t.Fatalf("verify after repair: %+v, %v", vr, err)
	}
	l = openLog(t, fsys, Options{SegmentBytes: 4096})
	if res, err := l.Scrub(s.Base, nil); err != nil || res.SumState != SumOK || res.Skips != 1 {
		t.Fatalf("scrub after repair: %+v, %v", res, err)
	}
	first := l.Segments()[0]
	if _, err := l.DeleteBefore(first.End); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Open(path.Join(testDir, SumFileName(first.Name))); !vfs.IsNotExist(err) {
		t.Fatalf("the sum file of a deleted segment: %v", err)
	}
	if err := l.Close(); err != nil { // the cleanup's scan does not pass skip frames
		t.Fatal(err)
	}
}

// TestRepairResumsInterrupted: a sealed segment whose frames all validate
// but whose sum does not match (Repair interrupted between a skip frame
// and the sum file) is reported by Verify, and Repair takes it as it is.
func TestRepairResumsInterrupted(t *testing.T) {
	fsys := newMem(t)
	l := sealedLog(t, fsys, 2)
	s := l.Segments()[0]
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, fsys, path.Join(testDir, SumFileName(s.Name)), encodeSum(s.Base, int64(s.End-s.Base), 12345))
	vr, err := Verify(fsys, testDir, nil)
	if err != nil || len(vr.SumMismatch) != 1 || vr.SumMismatch[0].Segment != s.Name {
		t.Fatalf("verify: %+v, %v", vr, err)
	}
	rep, err := Repair(Options{FS: fsys, Dir: testDir}, RepairSalvage)
	if err != nil || len(rep.Resummed) != 1 || len(rep.Ranges) != 0 {
		t.Fatalf("repair: %+v, %v", rep, err)
	}
	if vr, err := Verify(fsys, testDir, nil); err != nil || len(vr.SumMismatch) != 0 {
		t.Fatalf("verify after repair: %+v, %v", vr, err)
	}
}

// TestScrubCopiesNoPayload: a scrub pass checks frames and copies none,
// so its allocations do not grow with the records it walks (it made two
// a record, a payload copy and an escaped header, 9 % of what the engine
// allocated in a group-lateness window).
func TestScrubCopiesNoPayload(t *testing.T) {
	fsys := newMem(t)
	l := sealedLog(t, fsys, 2)
	s := l.Segments()[0]
	res, err := l.Scrub(s.Base, nil)
	if err != nil || res.Records < 10 || res.SumState != SumOK {
		t.Fatalf("scrub: %+v %v; want a clean segment of at least 10 records", res, err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := l.Scrub(s.Base, nil); err != nil {
			t.Fatal(err)
		}
	})
	if allocs >= float64(res.Records) {
		t.Fatalf("a scrub of %d records made %v allocations", res.Records, allocs)
	}
}
