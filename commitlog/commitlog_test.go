package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"sync"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

func TestRoundTripManySegments(t *testing.T) {
	fsys := newMem(t)
	l := openLog(t, fsys, Options{SegmentBytes: 512})
	if l.Start() != 0 || l.Head() != 0 {
		t.Fatalf("empty log: Start %d Head %d", l.Start(), l.Head())
	}
	if info := l.Recovery(); !info.Created || info.Segments != 1 {
		t.Fatalf("fresh log recovery info %+v", info)
	}
	want, wantPos := appendManyChecked(t, l)
	segs := l.Segments()
	if len(segs) < 10 {
		t.Fatalf("only %d segments for %d bytes with SegmentBytes 512", len(segs), l.Head())
	}
	for _, s := range segs[:len(segs)-1] {
		if s.End-s.Base > 512 {
			t.Errorf("segment %s holds %d bytes, more than SegmentBytes", s.Name, s.End-s.Base)
		}
		if s.Name != segmentName(s.Base) {
			t.Errorf("segment name %s for base %d", s.Name, s.Base)
		}
	}

	checkRoundTrip(t, l, want, wantPos)
	head := l.Head()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l2 := openLog(t, fsys, Options{SegmentBytes: 512})
	if l2.Head() != head {
		t.Fatalf("Head after reopen %d, want %d", l2.Head(), head)
	}
	if info := l2.Recovery(); info.Created || info.TruncatedBytes != 0 || info.Reason != "" || info.Segments != len(segs) {
		t.Fatalf("clean reopen recovery info %+v (segments %d)", info, len(segs))
	}
	if !slices.Equal(l2.Segments(), segs) {
		t.Fatalf("segments after reopen differ")
	}
	checkRoundTrip(t, l2, want, wantPos)
	// Appends continue at the old Head.
	pos := mustAppend(t, l2, Record{Type: 7, Payload: []byte("after reopen")})
	if pos[0] != head {
		t.Fatalf("first append after reopen at %d, want %d", pos[0], head)
	}
}

// appendManyChecked appends 400 records in calls of 1 to 3, checking that
// each call's records start at the old Head, are contiguous and move Head
// to their end. It returns the records and their positions.
func appendManyChecked(t *testing.T, l *Log) (want []Record, wantPos []Pos) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	for seq := 0; seq < 400; {
		// Calls of 1 to 3 records: one call's records are contiguous.
		k := 1 + rng.IntN(3)
		recs := make([]Record, k)
		for i := range recs {
			recs[i] = Record{Type: testType(seq), Payload: testPayload(0, seq, rng.IntN(60))}
			seq++
		}
		head := l.Head()
		pos := mustAppend(t, l, recs...)
		if pos[0] != head {
			t.Fatalf("first position %d, Head before %d", pos[0], head)
		}
		for i := 1; i < k; i++ {
			if pos[i] != pos[i-1]+Pos(frameSize(len(recs[i-1].Payload))) {
				t.Fatalf("records of one Append not contiguous: %v", pos)
			}
		}
		if got := l.Head(); got != pos[k-1]+Pos(frameSize(len(recs[k-1].Payload))) {
			t.Fatalf("Head %d after Append ending at %v", got, pos)
		}
		want = append(want, recs...)
		wantPos = append(wantPos, pos...)
	}
	return want, wantPos
}

// checkRoundTrip checks that l reads and scans back exactly want at
// wantPos, from the start and from the middle across segment boundaries.
func checkRoundTrip(t *testing.T, l *Log, want []Record, wantPos []Pos) {
	t.Helper()
	t.Helper()
	for i, p := range wantPos {
		rec, next, err := l.Read(p)
		if err != nil {
			t.Fatalf("Read(%d): %v", p, err)
		}
		if rec.Type != want[i].Type || !bytes.Equal(rec.Payload, want[i].Payload) {
			t.Fatalf("Read(%d) = %v, want %v", p, rec, want[i])
		}
		wantNext := l.Head()
		if i+1 < len(wantPos) {
			wantNext = wantPos[i+1]
		}
		if next != wantNext {
			t.Fatalf("Read(%d) next %d, want %d", p, next, wantNext)
		}
	}
	ps, rs := scanAll(t, l)
	if !slices.Equal(ps, wantPos) {
		t.Fatalf("Scan positions differ: %d vs %d records", len(ps), len(wantPos))
	}
	for i := range rs {
		if rs[i].Type != want[i].Type || !bytes.Equal(rs[i].Payload, want[i].Payload) {
			t.Fatalf("Scan record %d differs", i)
		}
	}
	// Scan from the middle of the log, across segment boundaries.
	mid := len(wantPos) / 2
	n := 0
	if err := l.Scan(wantPos[mid], func(p Pos, r Record) error {
		if p != wantPos[mid+n] {
			return fmt.Errorf("at %d want %d", p, wantPos[mid+n])
		}
		n++
		return nil
	}); err != nil || n != len(wantPos)-mid {
		t.Fatalf("Scan from middle: %v, %d records, want %d", err, n, len(wantPos)-mid)
	}
}

// TestOversizedAppend: an Append larger than SegmentBytes gets a segment of
// its own, whole, and the next Append starts a new one.
func TestOversizedAppend(t *testing.T) {
	l := openLog(t, newMem(t), Options{SegmentBytes: 100})
	mustAppend(t, l, Record{Type: 1, Payload: make([]byte, 10)})
	big := make([]Record, 5)
	for i := range big {
		big[i] = Record{Type: 2, Payload: bytes.Repeat([]byte{byte(i)}, 50)}
	}
	pos := mustAppend(t, l, big...)
	mustAppend(t, l, Record{Type: 3, Payload: make([]byte, 10)})
	segs := l.Segments()
	if len(segs) != 3 || segs[1].Base != pos[0] || segs[1].End != segs[1].Base+5*Pos(frameSize(50)) {
		t.Fatalf("segments %+v for an oversized Append at %v", segs, pos)
	}
	for i, p := range pos {
		if rec, _, err := l.Read(p); err != nil || !bytes.Equal(rec.Payload, big[i].Payload) {
			t.Fatalf("Read(%d): %v", p, err)
		}
	}
}

func TestPayloadIsCopied(t *testing.T) {
	l := openLog(t, newMem(t), Options{})
	buf := []byte("original")
	pos := mustAppend(t, l, Record{Type: 1, Payload: buf})
	copy(buf, "mutated!")
	rec, _, err := l.Read(pos[0])
	if err != nil || string(rec.Payload) != "original" {
		t.Fatalf("Read = %q, %v; the log must copy the payload", rec.Payload, err)
	}
	rec.Payload[0] = 'X'
	again, _, _ := l.Read(pos[0])
	if string(again.Payload) != "original" {
		t.Fatalf("Read returned a shared buffer: %q", again.Payload)
	}
}

func TestAppendValidation(t *testing.T) {
	l := openLog(t, newMem(t), Options{MaxRecordBytes: 100})
	if pos, err := l.Append(); err != nil || pos != nil {
		t.Fatalf("empty Append = %v, %v", pos, err)
	}
	if _, err := l.Append(Record{Type: 0, Payload: []byte("x")}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("type 0: %v", err)
	}
	_, err := l.Append(Record{Type: 1, Payload: make([]byte, 100)}, Record{Type: 1, Payload: make([]byte, 101)})
	if !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("101 bytes with limit 100: %v", err)
	}
	if l.Head() != 0 {
		t.Fatalf("a rejected Append wrote something: Head %d", l.Head())
	}
	mustAppend(t, l, Record{Type: 1, Payload: make([]byte, 100)})
	mustAppend(t, l, Record{Type: 255}) // empty payload is fine
	if l.Head() != Pos(frameSize(100)+frameSize(0)) {
		t.Fatalf("Head %d", l.Head())
	}
}

func TestOpenValidation(t *testing.T) {
	fsys := newMem(t)
	for _, opts := range []Options{
		{Dir: testDir},
		{FS: fsys},
		{FS: fsys, Dir: testDir, MaxRecordBytes: MaxPayloadLimit + 1},
		{FS: fsys, Dir: testDir, Flush: FlushPolicy(9)},
	} {
		if l, err := Open(opts); err == nil {
			l.Close()
			t.Errorf("Open(%+v) succeeded", opts)
		}
	}
}

func TestReadErrors(t *testing.T) {
	fsys := newMem(t)
	l := openLog(t, fsys, Options{SegmentBytes: 100})
	if _, _, err := l.Read(0); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Read on empty log: %v", err)
	}
	var pos []Pos
	for i := range 20 {
		pos = append(pos, mustAppend(t, l, Record{Type: 1, Payload: testPayload(0, i, 30)})...)
	}
	if _, _, err := l.Read(l.Head()); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Read(Head): %v", err)
	}
	// Inside a record: not a boundary.
	for _, off := range []Pos{1, 4, 8, 9, 20} {
		if _, _, err := l.Read(pos[3] + off); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Read inside a record (+%d): %v", off, err)
		}
	}
	if err := l.Scan(pos[3]+1, func(Pos, Record) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Scan from inside a record: %v", err)
	}
	if err := l.Scan(l.Head()+1, func(Pos, Record) error { return nil }); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Scan beyond Head: %v", err)
	}
	// fn's error stops the scan and comes back unchanged.
	stop := errors.New("stop")
	n := 0
	if err := l.Scan(l.Start(), func(Pos, Record) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("Scan with failing fn: %v after %d calls", err, n)
	}
	if err := l.Scan(l.Head(), func(Pos, Record) error { return errors.New("called") }); err != nil {
		t.Fatalf("Scan from Head: %v", err)
	}
}

func TestDeleteBefore(t *testing.T) {
	fsys := newMem(t)
	l := openLog(t, fsys, Options{SegmentBytes: 200})
	var pos []Pos
	for i := range 60 {
		pos = append(pos, mustAppend(t, l, Record{Type: 1, Payload: testPayload(0, i, 20)})...)
	}
	segs := l.Segments()
	if len(segs) < 5 {
		t.Fatalf("want several segments, got %d", len(segs))
	}
	// A position inside segment 2 removes segments 0 and 1 only.
	cut := segs[2].Base + 1
	n, err := l.DeleteBefore(cut)
	if err != nil || n != 2 {
		t.Fatalf("DeleteBefore(%d) = %d, %v; want 2", cut, n, err)
	}
	if l.Start() != segs[2].Base {
		t.Fatalf("Start %d, want %d", l.Start(), segs[2].Base)
	}
	names, _ := fsys.List(testDir)
	if slices.Contains(names, segs[0].Name) || slices.Contains(names, segs[1].Name) || !slices.Contains(names, segs[2].Name) {
		t.Fatalf("files after delete: %v", names)
	}
	if _, _, err := l.Read(pos[0]); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Read of deleted record: %v", err)
	}
	if err := l.Scan(pos[0], func(Pos, Record) error { return nil }); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Scan from deleted position: %v", err)
	}
	// Everything: only the active segment stays.
	n, err = l.DeleteBefore(l.Head() + 1000)
	if err != nil || n != len(segs)-3 {
		t.Fatalf("DeleteBefore(beyond Head) = %d, %v; want %d", n, err, len(segs)-3)
	}
	if got := l.Segments(); len(got) != 1 || got[0] != segs[len(segs)-1] {
		t.Fatalf("segments left: %+v", got)
	}
	if n, err := l.DeleteBefore(l.Head()); n != 0 || err != nil {
		t.Fatalf("DeleteBefore with only the active segment = %d, %v", n, err)
	}
	head, start := l.Head(), l.Start()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Deletions are durable and positions keep counting after reopen.
	l2 := openLog(t, fsys.Crash(nil), Options{SegmentBytes: 200})
	if l2.Start() != start || l2.Head() != head {
		t.Fatalf("after reopen Start %d Head %d, want %d %d", l2.Start(), l2.Head(), start, head)
	}
	p := mustAppend(t, l2, Record{Type: 1, Payload: []byte("x")})
	if p[0] != head {
		t.Fatalf("append after delete+reopen at %d, want %d", p[0], head)
	}
}

func TestClosed(t *testing.T) {
	l := openLog(t, newMem(t), Options{})
	mustAppend(t, l, Record{Type: 1, Payload: []byte("a")})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.Append(Record{Type: 1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if err := l.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
	if _, _, err := l.Read(0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
	if err := l.Scan(0, func(Pos, Record) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Scan after Close: %v", err)
	}
	if _, err := l.DeleteBefore(100); !errors.Is(err, ErrClosed) {
		t.Fatalf("DeleteBefore after Close: %v", err)
	}
}

// TestCloseServesQueuedAppends checks that Close neither drops nor hangs
// Appends racing with it: each either succeeds and is durable, or fails
// with ErrClosed.
func TestCloseServesQueuedAppends(t *testing.T) {
	fsys := newMem(t)
	l := openLog(t, fsys, Options{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[Pos][]byte{}
	closed := make(chan error, 1)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; ; seq++ {
				p := testPayload(w, seq, 10)
				pos, err := l.Append(Record{Type: 1, Payload: p})
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				mu.Lock()
				acked[pos[0]] = p
				n := len(acked)
				mu.Unlock()
				if n == 200 {
					go func() { closed <- l.Close() }()
				}
			}
		}()
	}
	wg.Wait()
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	l2 := openLog(t, fsys.Crash(nil), Options{})
	for p, want := range acked {
		rec, _, err := l2.Read(p)
		if err != nil || !bytes.Equal(rec.Payload, want) {
			t.Fatalf("acked record at %d: %v", p, err)
		}
	}
}

// TestOSRoundTrip runs a small log on the real filesystem, so the code is
// exercised against real files as well as Mem.
func TestOSRoundTrip(t *testing.T) {
	dir := path.Join(t.TempDir(), "log")
	opts := Options{FS: vfs.OS, Dir: dir, SegmentBytes: 1000}
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	var pos []Pos
	for i := range 50 {
		pos = append(pos, mustAppend(t, l, Record{Type: 2, Payload: testPayload(1, i, i)})...)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if len(l.Segments()) < 2 {
		t.Fatalf("expected a roll, segments %+v", l.Segments())
	}
	for i, p := range pos {
		rec, _, err := l.Read(p)
		if err != nil || !bytes.Equal(rec.Payload, testPayload(1, i, i)) {
			t.Fatalf("Read(%d): %v", p, err)
		}
	}
	checkInvariants(t, l)
}
