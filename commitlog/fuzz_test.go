package commitlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path"
	"slices"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// FuzzRecover feeds arbitrary bytes to recovery as a segment's tail (after
// a valid header and a few valid records) or, when the first byte's top
// bit is set, as the whole segment file. Open must not panic; if it
// succeeds, the log must hold exactly the longest valid prefix of frames as
// an independent parser sees it, with nothing after it, and take appends.
// If it refuses because valid frames follow the damage, it must have
// changed nothing, and Repair must make the log open.
func FuzzRecover(f *testing.F) {
	valid := func(typ Type, payload string) []byte {
		return appendFrame(nil, Record{Type: typ, Payload: []byte(payload)}, recordCRC(typ, []byte(payload)))
	}
	f.Add([]byte{0})
	f.Add(append([]byte{2}, valid(1, "hello")...))
	f.Add(append([]byte{1}, valid(3, "torn record")[:12]...))
	f.Add(append([]byte{3}, make([]byte, 64)...))
	f.Add(append([]byte{0}, 0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4, 5))
	f.Add(append(append([]byte{0x80}, encodeHeader(0)...), valid(2, "whole file")...))
	f.Add(append([]byte{0x80}, "HGCL garbage header"...))

	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		file := fuzzSegmentFile(data)
		fsys := newMem(t)
		if err := fsys.MkdirAll(testDir); err != nil {
			t.Fatal(err)
		}
		name := path.Join(testDir, segmentName(0))
		writeFile(t, fsys, name, file)

		var offsets []int
		validEnd := HeaderSize
		if len(file) >= HeaderSize && checkHeader(file[:HeaderSize], 0) == nil {
			offsets, validEnd = rawFrames(file)
		}
		l, err := Open(Options{FS: fsys, Dir: testDir})
		var de *DamageError
		if errors.As(err, &de) {
			// Valid frames follow the first bad one: nothing may have been
			// cut, the damage must start where the valid prefix ends, and
			// a salvage must make the log open.
			if de.Ranges[0].Pos != Pos(validEnd-HeaderSize) || !bytes.Equal(readFile(t, fsys, name), file) {
				t.Fatalf("refusal %+v, independent parse ends at %d", de.Ranges, validEnd-HeaderSize)
			}
			if _, err := Repair(Options{FS: fsys, Dir: testDir}, RepairSalvage); err != nil {
				t.Fatalf("Repair: %v", err)
			}
			l, err := Open(Options{FS: fsys, Dir: testDir})
			if err != nil {
				t.Fatalf("Open after Repair: %v", err)
			}
			l.Close()
			return
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || data[0]&0x80 == 0 {
				t.Fatalf("Open: %v", err)
			}
			return
		}
		defer l.Close()
		checkRecoveredSegment(t, l, fsys, name, file, offsets, validEnd)
	})
}

// fuzzSegmentFile builds the segment file of a fuzz input: data[1:] as is
// when data[0]'s top bit is set, else a valid header and data[0]%4 valid
// records followed by data[1:].
func fuzzSegmentFile(data []byte) []byte {
	if data[0]&0x80 != 0 {
		return data[1:]
	}
	file := encodeHeader(0)
	for i := range int(data[0] % 4) {
		file = appendFrame(file, Record{Type: 1, Payload: testPayload(0, i, i)}, recordCRC(1, testPayload(0, i, i)))
	}
	return append(file, data[1:]...)
}

// checkRecoveredSegment checks a log opened over file against an
// independent parse (frames at offsets, valid up to validEnd): the same
// head and records, the file cut at validEnd (or left as it is when only
// zeros follow validEnd), and appends continuing there.
func checkRecoveredSegment(t *testing.T, l *Log, fsys vfs.FS, name string, file []byte, offsets []int, validEnd int) {
	t.Helper()
	// Skip frames are valid frames that Scan passes over.
	offsets = slices.DeleteFunc(offsets, func(off int) bool { return Type(file[off+8]) == TypeSkip })
	if l.Head() != Pos(validEnd-HeaderSize) {
		t.Fatalf("Head %d, independent parse ends at %d", l.Head(), validEnd-HeaderSize)
	}
	i := 0
	err := l.Scan(l.Start(), func(pos Pos, rec Record) error {
		if i >= len(offsets) || int(pos)+HeaderSize != offsets[i] {
			t.Fatalf("record at %d is not frame %d of the independent parse", pos, i)
		}
		off := offsets[i]
		n := int(binary.LittleEndian.Uint32(file[off:]))
		if rec.Type != Type(file[off+8]) || !bytes.Equal(rec.Payload, file[off+9:off+9+n]) {
			t.Fatalf("record at %d differs from the file's bytes", pos)
		}
		i++
		return nil
	})
	if err != nil || i != len(offsets) {
		t.Fatalf("Scan: %v after %d of %d records", err, i, len(offsets))
	}
	// Zeros after the valid records are preallocated space and stay;
	// anything else after them is cut.
	if got := readFile(t, fsys, name); len(got) != validEnd && !(bytes.Equal(got, file) && isZero(file[validEnd:])) {
		t.Fatalf("file is %d bytes after recovery, want %d", len(got), validEnd)
	}
	pos, err := l.Append(Record{Type: 5, Payload: []byte("after")})
	if err != nil || pos[0] != Pos(validEnd-HeaderSize) {
		t.Fatalf("Append after recovery: %v at %v", err, pos)
	}
}
