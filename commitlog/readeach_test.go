package commitlog

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// TestReadEachMatchesRead writes records of mixed sizes (one larger than a
// read chunk) over several segments, then reads a shuffled selection with
// repeats through ReadEach: every record must equal what Read returns, and
// fn must see the positions in log order with their indexes in pos.
func TestReadEachMatchesRead(t *testing.T) {
	l := openLog(t, newMem(t), Options{SegmentBytes: 64 << 10})
	rng := rand.New(rand.NewPCG(1, 2))
	var all []Pos
	for i := range 600 {
		n := rng.IntN(700)
		switch i {
		case 100:
			n = readChunk + 5000 // read straight into the payload
		case 300:
			n = 0
		}
		p := bytes.Repeat([]byte{byte(i)}, n)
		got, err := l.Append(Record{Type: 7, Payload: p})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, got[0])
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("want records over several segments, have %d", len(l.Segments()))
	}
	var pos []Pos
	for _, p := range all {
		if rng.IntN(3) > 0 {
			pos = append(pos, p)
		}
	}
	pos = append(pos, all[100], all[300], pos[7], pos[7])
	rng.Shuffle(len(pos), func(i, j int) { pos[i], pos[j] = pos[j], pos[i] })
	seen := make([]bool, len(pos))
	var last Pos
	err := l.ReadEach(pos, func(i int, rec Record) error {
		if seen[i] {
			t.Errorf("index %d handed out twice", i)
		}
		seen[i] = true
		if pos[i] < last {
			t.Errorf("position %d after %d: not in log order", pos[i], last)
		}
		last = pos[i]
		want, _, err := l.Read(pos[i])
		if err != nil {
			return err
		}
		if rec.Type != want.Type || !bytes.Equal(rec.Payload, want.Payload) {
			t.Errorf("record at %d: type %d, %d bytes; Read gives type %d, %d bytes", pos[i], rec.Type, len(rec.Payload), want.Type, len(want.Payload))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range seen {
		if !ok {
			t.Errorf("index %d (position %d) never handed out", i, pos[i])
		}
	}
}

// TestReadEachErrors: a position out of range, or one that is not a record
// boundary, fails the walk with Read's error; an error from fn stops it.
func TestReadEachErrors(t *testing.T) {
	l := openLog(t, newMem(t), Options{})
	got, err := l.Append(Record{Type: 7, Payload: []byte("one")}, Record{Type: 7, Payload: []byte("two")})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ReadEach([]Pos{got[0], l.Head()}, func(int, Record) error { return nil }); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("past the head: %v, want ErrOutOfRange", err)
	}
	if err := l.ReadEach([]Pos{got[0] + 1}, func(int, Record) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Errorf("inside a record: %v, want ErrCorrupt", err)
	}
	stop := errors.New("stop")
	calls := 0
	err = l.ReadEach(got, func(int, Record) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Errorf("fn's error: %v after %d calls, want it after 1", err, calls)
	}
}
