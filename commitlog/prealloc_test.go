package commitlog

import (
	"errors"
	"math/rand/v2"
	"path"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/vfs"
)

// waitSpare waits until l's spare segment is ready.
func waitSpare(t *testing.T, l *Log) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !l.pre.ready() {
		if time.Now().After(deadline) {
			t.Fatal("no spare segment after 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// fileSize returns the length of name in fsys.
func fileSize(t *testing.T, fsys vfs.FS, name string) int64 {
	t.Helper()
	return int64(len(readFile(t, fsys, name)))
}

// preallocatedLog opens a log whose first segment is the preallocated
// spare (adopted at the first write).
func preallocatedLog(t *testing.T, fsys vfs.FS, opts Options) *Log {
	t.Helper()
	l := openLog(t, fsys, opts)
	waitSpare(t, l)
	mustAppend(t, l, Record{Type: 1, Payload: []byte("first")})
	name := path.Join(testDir, l.Segments()[0].Name)
	if got, want := fileSize(t, fsys, name), HeaderSize+opts.SegmentBytes; got != want {
		t.Fatalf("first segment is %d bytes, want %d (preallocated)", got, want)
	}
	return l
}

// TestPreallocatedSegmentsRoll: with preallocation every segment after the
// first write is full size while active, a sealed one is cut back to its
// records, a spare waits beside the active segment, and a reopen keeps the
// zeros as space, not damage.
func TestPreallocatedSegmentsRoll(t *testing.T) {
	fsys := newMem(t)
	opts := Options{SegmentBytes: 4096}
	l := preallocatedLog(t, fsys, opts)
	for seq := 0; len(l.Segments()) < 4; seq++ {
		mustAppend(t, l, Record{Type: testType(seq), Payload: testPayload(0, seq, 100)})
		if seq%10 == 0 {
			waitSpare(t, l) // so that every roll finds a spare
		}
	}
	segs := l.Segments()
	for _, s := range segs[:len(segs)-1] {
		if got := fileSize(t, fsys, path.Join(testDir, s.Name)); got != HeaderSize+int64(s.End-s.Base) {
			t.Fatalf("sealed %s is %d bytes, holds %d record bytes", s.Name, got, s.End-s.Base)
		}
	}
	active := segs[len(segs)-1]
	if got := fileSize(t, fsys, path.Join(testDir, active.Name)); got != HeaderSize+4096 {
		t.Fatalf("active %s is %d bytes, want it preallocated", active.Name, got)
	}
	waitSpare(t, l)
	if got := fileSize(t, fsys, path.Join(testDir, SpareName)); got != HeaderSize+4096 {
		t.Fatalf("spare is %d bytes", got)
	}
	head := l.Head()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if names, _ := fsys.List(testDir); slices.Contains(names, SpareName) {
		t.Fatalf("Close left the spare: %v", names)
	}
	l2 := openLog(t, fsys, opts)
	info := l2.Recovery()
	if l2.Head() != head || info.TruncatedBytes != 0 || info.Reason != "" ||
		info.PreallocatedBytes != 4096-int64(head-active.Base) {
		t.Fatalf("reopen: Head %d (want %d), recovery %+v", l2.Head(), head, info)
	}
	rep, err := Verify(fsys, testDir, nil)
	if err != nil || len(rep.Damage) != 0 || len(rep.Broken) != 0 || rep.Head != head {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
}

// TestPreallocPowerLoss: records written over preallocated zeros and not
// yet synced may be whole, torn or zeros after a power loss. Every image
// opens, keeps every record a Sync covered, and holds nothing but a prefix
// of what was written; some images show the records reverted to zeros and
// some a torn record cut.
func TestPreallocPowerLoss(t *testing.T) {
	mem := newMem(t)
	l := preallocatedLog(t, mem, Options{SegmentBytes: 64 << 10, Flush: FlushAsync, FlushInterval: 1 << 40})
	var written []Pos
	for seq := range 20 {
		written = append(written, mustAppend(t, l, Record{Type: testType(seq), Payload: testPayload(0, seq, 200)})...)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	durable := l.Head()
	for seq := 20; seq < 40; seq++ {
		written = append(written, mustAppend(t, l, Record{Type: testType(seq), Payload: testPayload(0, seq, 200)})...)
	}
	// Without any unsynced byte reaching the disk, the records revert to
	// zeros: the synced ones are all there, and nothing is cut.
	l0 := openLog(t, mem.Crash(nil), Options{NoPreallocate: true})
	if info := l0.Recovery(); l0.Head() != durable || info.TruncatedBytes != 0 || info.PreallocatedBytes == 0 {
		t.Fatalf("power loss: Head %d (synced %d), recovery %+v", l0.Head(), durable, info)
	}
	var torn, whole int
	for seed := range uint64(200) {
		img := mem.Crash(rand.New(rand.NewPCG(seed, 5)))
		l2, err := Open(Options{FS: img, Dir: testDir, NoPreallocate: true})
		if err != nil {
			t.Fatalf("seed %d: Open: %v", seed, err)
		}
		info := l2.Recovery()
		switch {
		case l2.Head() < durable:
			t.Fatalf("seed %d: Head %d below the synced %d", seed, l2.Head(), durable)
		case !slices.Contains(append(written, l.Head()), l2.Head()):
			t.Fatalf("seed %d: Head %d is no record boundary", seed, l2.Head())
		case info.TruncatedBytes > 0:
			torn++
		case l2.Head() > durable:
			whole++
		}
		ps, rs := scanAll(t, l2)
		for i, p := range ps[1:] { // after preallocatedLog's first record
			i++
			if _, seq, ok := parsePayload(rs[i].Payload); !ok || p != written[seq] {
				t.Fatalf("seed %d: record at %d is not what was written there", seed, p)
			}
		}
		// Appends go on over the zeros, and a second power loss keeps them.
		mustAppend(t, l2, Record{Type: 1, Payload: []byte("after")})
		head := l2.Head()
		if err := l2.Close(); err != nil {
			t.Fatal(err)
		}
		l3 := openLog(t, img.Crash(nil), Options{NoPreallocate: true})
		if l3.Head() != head {
			t.Fatalf("seed %d: Head %d after a second power loss, want %d", seed, l3.Head(), head)
		}
	}
	if torn == 0 || whole == 0 {
		t.Fatalf("images: %d torn, %d with whole unsynced records only", torn, whole)
	}
}

// TestPreallocTornBeforeZeros: a torn record followed by the preallocated
// zeros is a torn tail, cut as without preallocation.
func TestPreallocTornBeforeZeros(t *testing.T) {
	fsys := newMem(t)
	l := preallocatedLog(t, fsys, Options{SegmentBytes: 4096})
	mustAppend(t, l, Record{Type: 2, Payload: []byte("second")})
	head := l.Head()
	name := path.Join(testDir, l.Segments()[0].Name)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	frame := appendFrame(nil, Record{Type: 3, Payload: []byte("never acknowledged")}, recordCRC(3, []byte("never acknowledged")))
	file := readFile(t, fsys, name)
	copy(file[HeaderSize+int(head):], frame[:len(frame)-4])
	writeFile(t, fsys, name, file)

	l2 := openLog(t, fsys, Options{SegmentBytes: 4096})
	info := l2.Recovery()
	if l2.Head() != head || info.TruncatedBytes != int64(len(file)-HeaderSize)-int64(head) || info.Reason == "" {
		t.Fatalf("Head %d (want %d), recovery %+v", l2.Head(), head, info)
	}
	if _, rs := scanAll(t, l2); len(rs) != 2 {
		t.Fatalf("%d records after the cut, want 2", len(rs))
	}
}

// TestPreallocDamageStillRefused: damage followed by valid records in a
// preallocated last segment is refused as before; the zeros after the
// records are not reported as a damaged range of their own, and Repair
// salvages the damage and leaves the zeros.
func TestPreallocDamageStillRefused(t *testing.T) {
	fsys := newMem(t)
	l := preallocatedLog(t, fsys, Options{SegmentBytes: 8192})
	var pos []Pos
	for seq := range 10 {
		pos = append(pos, mustAppend(t, l, Record{Type: testType(seq), Payload: testPayload(0, seq, 50)})...)
	}
	name := path.Join(testDir, l.Segments()[0].Name)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	file := readFile(t, fsys, name)
	file[HeaderSize+int(pos[3])+FrameHeaderSize+2] ^= 0x10
	writeFile(t, fsys, name, file)

	_, err := Open(Options{FS: fsys, Dir: testDir, SegmentBytes: 8192})
	var de *DamageError
	if !errors.As(err, &de) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open: %v, want a DamageError", err)
	}
	if len(de.Ranges) != 1 || de.Ranges[0].Pos != pos[3] || de.Ranges[0].RecordsAfter != 6 {
		t.Fatalf("ranges %+v", de.Ranges)
	}
	rep, err := Repair(Options{FS: fsys, Dir: testDir}, RepairSalvage)
	if err != nil || len(rep.Ranges) != 1 || rep.Ranges[0].Action != ActionSkip {
		t.Fatalf("Repair: %+v, %v", rep, err)
	}
	l2, err := Open(Options{FS: fsys, Dir: testDir, SegmentBytes: 8192})
	if err != nil {
		t.Fatalf("Open after Repair: %v", err)
	}
	defer l2.Close()
	if info := l2.Recovery(); info.TruncatedBytes != 0 || info.PreallocatedBytes == 0 {
		t.Fatalf("after Repair: %+v", info)
	}
	if _, rs := scanAll(t, l2); len(rs) != 10 {
		t.Fatalf("%d records after salvage, want 10 (the first, and 9 of 10)", len(rs))
	}
}

// TestPreallocLeftovers: what a crash or a hand leaves beside the log is
// never taken for records. A spare (even one with a header written in it)
// is removed at Open; a segment-named file of zeros after the last
// segment is an interrupted creation; an empty preallocated segment with
// a valid header is the active segment.
func TestPreallocLeftovers(t *testing.T) {
	f := newDamageFixture(t, 30, 1<<20)
	last := f.segs[len(f.segs)-1]
	spare := append(encodeHeader(last.End), make([]byte, 4096)...)
	for _, tc := range []struct {
		name, file string
		content    []byte
		check      func(t *testing.T, info RecoveryInfo)
	}{
		{"spare", SpareName, spare, func(t *testing.T, info RecoveryInfo) {
			if !info.RemovedSpare || info.Segments != len(f.segs) {
				t.Fatalf("recovery %+v", info)
			}
		}},
		{"zeros named beyond the last", segmentName(last.End), make([]byte, 4096), func(t *testing.T, info RecoveryInfo) {
			if !slices.Equal(info.RemovedSegments, []string{segmentName(last.End)}) {
				t.Fatalf("recovery %+v", info)
			}
		}},
		{"empty preallocated segment", segmentName(last.End), spare, func(t *testing.T, info RecoveryInfo) {
			if info.Segments != len(f.segs)+1 || info.PreallocatedBytes != 4096 || info.TruncatedBytes != 0 {
				t.Fatalf("recovery %+v", info)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := f.fs.Clone()
			writeFile(t, img, path.Join(testDir, tc.file), tc.content)
			l := openLog(t, img, Options{NoPreallocate: true})
			tc.check(t, l.Recovery())
			f.expectPrefix(t, l, len(f.pos))
		})
	}
	// Zeros named beyond the last, but not the last: refused, as any
	// segment without a header that holds something after it.
	img := f.fs.Clone()
	writeFile(t, img, path.Join(testDir, segmentName(last.End)), make([]byte, 4096))
	writeFile(t, img, path.Join(testDir, segmentName(last.End+1)), encodeHeader(last.End+1))
	if _, err := Open(Options{FS: img, Dir: testDir, NoPreallocate: true}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open: %v, want ErrCorrupt", err)
	}
}

// TestPreallocDiskFull: a preallocation that fails (ENOSPC) fails no
// Append: the log rolls by creating segments, the hook hears of each
// failure, and no partial spare is left.
func TestPreallocDiskFull(t *testing.T) {
	mem := newMem(t)
	fsys := vfs.NewFaulty(mem)
	fsys.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpWrite && path.Base(name) == SpareName {
			return syscall.ENOSPC
		}
		return nil
	})
	var mu sync.Mutex
	var fails []error
	l := openLog(t, fsys, Options{SegmentBytes: 2048, OnPreallocate: func(_ time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			fails = append(fails, err)
		}
	}})
	for seq := 0; len(l.Segments()) < 4; seq++ {
		mustAppend(t, l, Record{Type: testType(seq), Payload: testPayload(0, seq, 100)})
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(fails)
		mu.Unlock()
		if n >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the hook never heard of a failed preallocation")
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	for _, err := range fails {
		if !errors.Is(err, ErrDiskFull) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("hook error %v, want ErrDiskFull", err)
		}
	}
	mu.Unlock()
	if l.pre.ready() {
		t.Fatal("a spare is ready though every write of one failed")
	}
	// The log went on: every segment was created, and a power loss keeps
	// every acknowledged record. (A failed spare's entry may be in the
	// image, if a directory sync came between its creation and its
	// removal: Open removes it.)
	head := l.Head()
	img := mem.Crash(nil)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if names, _ := mem.List(testDir); slices.Contains(names, SpareName) {
		t.Fatalf("a failed spare is left after Close: %v", names)
	}
	fsys.Inject(nil)
	l2 := openLog(t, img, Options{NoPreallocate: true})
	if l2.Head() != head {
		t.Fatalf("Head %d after power loss, want %d", l2.Head(), head)
	}
	if names, _ := img.List(testDir); slices.Contains(names, SpareName) {
		t.Fatalf("Open left a spare: %v", names)
	}
}

// TestPreallocInstallFailures: a spare that cannot be renamed into place
// is given up and the segment created as before; a failed directory sync
// after the rename stops the log, as for any fsync of its directory.
func TestPreallocInstallFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   vfs.Op
		stop bool
	}{{"rename", vfs.OpRename, false}, {"sync dir", vfs.OpSyncDir, true}} {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMem(t)
			fsys := vfs.NewFaulty(mem)
			l := preallocatedLog(t, fsys, Options{SegmentBytes: 2048})
			waitSpare(t, l)
			fsys.Inject(func(op vfs.Op, _ string) error {
				if op == tc.op {
					return syscall.EIO
				}
				return nil
			})
			var err error
			for seq := 0; err == nil && len(l.Segments()) < 2; seq++ {
				_, err = l.Append(Record{Type: testType(seq), Payload: testPayload(0, seq, 100)})
			}
			fsys.Inject(nil)
			if tc.stop {
				if !errors.Is(err, ErrFsyncFailed) || !errors.Is(err, ErrFailed) {
					t.Fatalf("Append at the roll: %v, want the log stopped", err)
				}
				if cerr := l.Close(); !errors.Is(cerr, ErrFailed) {
					t.Fatalf("Close: %v, want the sticky failure", cerr)
				}
				// Nothing acknowledged is lost across a power loss.
				if got := openLog(t, mem.Crash(nil), Options{NoPreallocate: true}).Head(); got != l.Head() {
					t.Fatalf("Head %d after power loss, want %d", got, l.Head())
				}
				return
			}
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			segs := l.Segments()
			if got := fileSize(t, mem, path.Join(testDir, segs[1].Name)); got != HeaderSize+int64(segs[1].End-segs[1].Base) {
				t.Fatalf("the created segment is %d bytes", got)
			}
		})
	}
}

// TestZerosNeverParse: a frame of zeros, of any length, is never a
// record, whether read by the streaming iterator or in memory.
func TestZerosNeverParse(t *testing.T) {
	for _, n := range []int{FrameHeaderSize, FrameHeaderSize + 1, 4096} {
		if _, _, reason := frameAt(make([]byte, n), 0); reason != "record type 0" {
			t.Fatalf("%d zero bytes: frameAt says %q", n, reason)
		}
	}
	if recordCRC(0, nil) == 0 {
		t.Fatal("a lone zero type byte has CRC 0")
	}
	if _, err := openLog(t, newMem(t), Options{}).Append(Record{Type: 0}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("Append of type 0: %v", err)
	}
}
