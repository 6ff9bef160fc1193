package engine

import (
	"bytes"
	"reflect"
	"testing"
	"time"
)

func sampleCheckpoint() *checkpointState {
	return &checkpointState{
		Incarnation: 7, LogPos: 1 << 40, Frontier: -5, Written: 1795974367183, KeyState: []byte{1, 2, 3},
		Topics: []checkpointTopic{{ID: 1, Name: "orders", Flags: topicFIFO, Entries: []int64{3, 0, 9}, Pending: 12}},
		Groups: []checkpointGroup{{ID: 2, Topic: 1, Name: "billing",
			Config: GroupConfig{MaxAttempts: 16, BackoffBase: time.Second, BackoffMax: 5 * time.Minute},
			Queues: []checkpointGroupQueue{{Acked: 4, Done: []uint64{6, 9}, Attempts: map[uint64]uint32{5: 2}}, {Attempts: map[uint64]uint32{}}}}},
		Reloc:        map[uint64]uint64{10: 900},
		TimerState:   []byte{9, 8, 7},
		OverlayFiles: map[uint64]int64{0: 64},
		SegPending:   map[uint64]int64{0: 3},
		SegLast:      map[uint64]int64{0: 99},
	}
}

func TestCheckpointCodecRoundTrip(t *testing.T) {
	st := sampleCheckpoint()
	b, err := encodeCheckpoint(st)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, st)
	}
	b2, _ := encodeCheckpoint(got)
	if !bytes.Equal(b, b2) {
		t.Fatal("equal states encode differently")
	}
}

// TestCheckpointCodecRefusesDamage: every truncation and every flipped
// byte is an error, never a panic or a silently different state.
func TestCheckpointCodecRefusesDamage(t *testing.T) {
	b, _ := encodeCheckpoint(sampleCheckpoint())
	for n := 0; n < len(b); n++ {
		if _, err := decodeCheckpoint(b[:n]); err == nil {
			t.Fatalf("a checkpoint cut to %d of %d bytes was accepted", n, len(b))
		}
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x40
		if _, err := decodeCheckpoint(c); err == nil {
			t.Fatalf("a checkpoint with byte %d flipped was accepted", i)
		}
	}
}

func FuzzDecodeCheckpoint(f *testing.F) {
	b, _ := encodeCheckpoint(sampleCheckpoint())
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeCheckpoint(b)
		if err != nil {
			return
		}
		again, err := encodeCheckpoint(st)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeCheckpoint(again); err != nil {
			t.Fatalf("re-encoded checkpoint does not decode: %v", err)
		}
	})
}
