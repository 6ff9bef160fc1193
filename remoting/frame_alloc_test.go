package remoting

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"testing/iotest"
)

// TestLargeFrameAllocatesAsItArrives: a frame that declares the largest
// length and ends after a few bytes makes readFrame allocate about what
// arrived, not the length it declared (many connections doing so would
// otherwise make the broker hold MaxFrame each); a whole large frame
// still reads whole.
func TestLargeFrameAllocatesAsItArrives(t *testing.T) {
	lim := Limits{MaxFrame: 64 << 20, MaxHeader: 1 << 20, MaxExtFields: 64}
	declared := binary.BigEndian.AppendUint32(nil, uint32(lim.MaxFrame))
	short := append(declared, make([]byte, 100)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readFrame(bytes.NewReader(short), lim)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a frame cut short: %v, want io.ErrUnexpectedEOF", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("a frame declaring %d MiB with 100 bytes sent allocated %d KiB", lim.MaxFrame>>20, grew>>10)
	}
	whole := append(binary.BigEndian.AppendUint32(nil, 3<<20+5), bytes.Repeat([]byte{7}, 3<<20+5)...)
	// However its bytes come: one at a time, in halves, the last with EOF.
	for name, r := range map[string]io.Reader{"at once": bytes.NewReader(whole), "bytewise": iotest.OneByteReader(bytes.NewReader(whole)),
		"halves": iotest.HalfReader(bytes.NewReader(whole)), "EOF with data": iotest.DataErrReader(bytes.NewReader(whole))} {
		buf, err := readFrame(r, lim)
		if err != nil || len(buf) != 3<<20+5 || !bytes.Equal(buf, whole[4:]) {
			t.Fatalf("a whole 3 MiB frame read %s: %d bytes, %v", name, len(buf), err)
		}
	}
}
