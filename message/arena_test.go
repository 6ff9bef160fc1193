package message

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
)

// TestArenaDecodesAsDecode: messages decoded through one Arena equal
// Decode's results, across slabs and blocks and with a body too large for
// a block; a body is capped, so appending to one leaves the next intact;
// and a bad record is refused without taking a slot.
func TestArenaDecodesAsDecode(t *testing.T) {
	var a Arena
	var recs [][]byte
	for i := range 3 * arenaStored {
		s := &Stored{Message: Message{Topic: "orders", Key: fmt.Sprint("k", i), Tag: "tag",
			Properties: map[string]string{"n": fmt.Sprint(i), "z": ""}, Body: bytes.Repeat([]byte{byte(i)}, 300+i)},
			Queue: i % 4, Due: int64(i), Sent: 7, Nonce: uint64(i)}
		switch i {
		case 5:
			s.Body = bytes.Repeat([]byte("x"), arenaBlock/2)
		case 6:
			s.Body = nil
		case 7:
			s.DedupID, s.Deadline = "d-7", 99
		}
		recs = append(recs, Encode(nil, s))
	}
	var got []*Stored
	for i, b := range recs {
		if i == 10 {
			if _, err := a.Decode(b[:len(b)-1]); err == nil {
				t.Fatal("a truncated record decoded")
			}
		}
		s, err := a.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	for i, s := range got {
		if len(s.Body) > 0 && cap(s.Body) != len(s.Body) {
			t.Fatalf("message %d: body of %d bytes has capacity %d", i, len(s.Body), cap(s.Body))
		}
		_ = append(s.Body, 0xee)
	}
	for i, b := range recs {
		want, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got[i], want) {
			t.Fatalf("message %d through the arena:\n got %+v\nwant %+v", i, got[i], want)
		}
	}
}
