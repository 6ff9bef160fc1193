package message

import (
	"bytes"
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"unsafe"
)

// TestArenaDecodesAsDecode: messages decoded through one Arena equal
// Decode's results, across slabs and blocks and with a body too large for
// a block; a body is capped, so appending to one leaves the next intact;
// and a bad record is refused without taking a slot.
func TestArenaDecodesAsDecode(t *testing.T) {
	// Without a reservation, with one for fewer messages than are decoded
	// (the arena then falls back to full slabs and blocks), and with one
	// for all of them.
	for _, reserve := range []int{0, 10, 3 * arenaStored} {
		t.Run(fmt.Sprint("reserve ", reserve), func(t *testing.T) { testArenaDecodesAsDecode(t, reserve) })
	}
}

func testArenaDecodesAsDecode(t *testing.T, reserve int) {
	var a Arena
	a.Reserve(reserve)
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

// TestArenaReserveSizesItsMemory: a batch of 32 messages of about 300 B
// decoded after Reserve(32) allocates about what they hold, not a 64 KiB
// block and a slab of 64; the messages are intact.
func TestArenaReserveSizesItsMemory(t *testing.T) {
	const n = 32
	var recs [][]byte
	for i := range n {
		s := &Stored{Message: Message{Topic: "orders", Key: fmt.Sprint("k", i), Body: bytes.Repeat([]byte{byte(i)}, 256)}}
		recs = append(recs, Encode(nil, s))
	}
	allocated := func(reserve int) (uint64, []*Stored) {
		var before, after runtime.MemStats
		var a Arena
		got := make([]*Stored, 0, n)
		runtime.ReadMemStats(&before)
		a.Reserve(reserve)
		for _, b := range recs {
			s, err := a.Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, s)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc, got
	}
	full, _ := allocated(0)
	sized, got := allocated(n)
	for i, s := range got {
		if s.Key != fmt.Sprint("k", i) || !bytes.Equal(s.Body, bytes.Repeat([]byte{byte(i)}, 256)) {
			t.Fatalf("message %d decoded as %+v", i, s)
		}
	}
	// 32 messages hold about 32 x 270 B of strings and bodies and 32
	// Stored values.
	if limit := uint64(n*(300+unsafe.Sizeof(Stored{}))) + 4096; sized > limit {
		t.Fatalf("Reserve(%d) then %d decodes allocated %d B (without Reserve %d B); want at most %d", n, n, sized, full, limit)
	}
	if full < arenaBlock {
		t.Fatalf("without Reserve the decodes allocated %d B, less than a block of %d: the test measures nothing", full, arenaBlock)
	}
}
