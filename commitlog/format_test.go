package commitlog

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"path"
	"testing"
)

// TestFormatLayout pins the on-disk layout the package doc draws, checking
// the bytes of a real segment against an independent encoding.
func TestFormatLayout(t *testing.T) {
	fsys := newMem(t)
	l := openLog(t, fsys, Options{SegmentBytes: 30})
	mustAppend(t, l, Record{Type: 0x42, Payload: []byte("payload-one")}) // 20 bytes: fills segment 0
	pos := mustAppend(t, l, Record{Type: 7, Payload: []byte("two")})
	if pos[0] != 20 {
		t.Fatalf("second record at %d", pos[0])
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	tab := crc32.MakeTable(crc32.Castagnoli)
	header := func(base uint64) []byte {
		h := []byte("HGCL\x01\x00\x00\x00")
		h = binary.LittleEndian.AppendUint64(h, base)
		return binary.LittleEndian.AppendUint32(h, crc32.Checksum(h, tab))
	}
	frame := func(typ byte, payload string) []byte {
		body := append([]byte{typ}, payload...)
		f := binary.LittleEndian.AppendUint32(nil, uint32(len(payload)))
		f = binary.LittleEndian.AppendUint32(f, crc32.Checksum(body, tab))
		return append(f, body...)
	}
	for _, tc := range []struct {
		name string
		want []byte
	}{
		{"00000000000000000000.log", append(header(0), frame(0x42, "payload-one")...)},
		{"00000000000000000020.log", append(header(20), frame(7, "two")...)},
	} {
		// A preallocated segment's file goes on with zeros after its
		// records.
		if got := readFile(t, fsys, path.Join(testDir, tc.name)); !bytes.HasPrefix(got, tc.want) || !isZero(got[len(tc.want):]) {
			t.Errorf("%s:\n got % x\nwant % x (then zeros only)", tc.name, got, tc.want)
		}
	}
}

func TestSegmentNames(t *testing.T) {
	for _, base := range []Pos{0, 1, 4096, 1<<64 - 1} {
		name := segmentName(base)
		if len(name) != 24 {
			t.Errorf("name %q is not fixed width", name)
		}
		if got, ok := parseSegmentName(name); !ok || got != base {
			t.Errorf("parse(%q) = %d, %v", name, got, ok)
		}
	}
	for _, bad := range []string{"0.log", "0000000000000000000a.log", "00000000000000000000.tmp", "99999999999999999999.log", "+0000000000000000000.log"} {
		if _, ok := parseSegmentName(bad); ok {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}
