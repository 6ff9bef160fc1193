package message

import (
	"fmt"
	"testing"
)

func TestSealerTags(t *testing.T) {
	k1 := make([]byte, SealKeySize)
	k2 := make([]byte, SealKeySize)
	k2[0] = 1
	s1, err := NewSealer(k1)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := NewSealer(k2)
	if s1.Tag(1, 2) != s1.Tag(1, 2) {
		t.Fatal("a tag is not deterministic")
	}
	// Another position, another nonce (a reused position) or another
	// directory's key give another tag.
	if s1.Tag(1, 2) == s1.Tag(2, 2) || s1.Tag(1, 2) == s1.Tag(1, 3) || s1.Tag(1, 2) == s2.Tag(1, 2) {
		t.Fatal("tags collide")
	}
	id := s1.ID(42, 7)
	if id.Pos != 42 || id.Tag != s1.Tag(42, 7) {
		t.Fatalf("ID = %+v", id)
	}
	if _, err := NewSealer(k1[:8]); err == nil {
		t.Fatal("a short key was accepted")
	}
}

func TestCodecNonce(t *testing.T) {
	s := &Stored{Message: Message{Topic: "t", Body: []byte("b")}, Due: 5, Sent: 4, Nonce: 1<<63 | 9}
	got, err := Decode(Encode(nil, s))
	if err != nil || got.Nonce != s.Nonce || got.Sent != 4 || got.Due != 5 {
		t.Fatalf("Decode = %+v, %v", got, err)
	}
}

func BenchmarkSealerTag(b *testing.B) {
	s, _ := NewSealer(make([]byte, SealKeySize))
	var x uint64
	for i := 0; i < b.N; i++ {
		x ^= s.Tag(uint64(i), x)
	}
	_ = x
}

// TestIDText: String and Append give 32 lower-case hex digits, the
// position's first, and ParseID reads them back.
func TestIDText(t *testing.T) {
	for _, id := range []ID{{}, {Pos: 1, Tag: 2}, {Pos: 1<<64 - 1, Tag: 0xfedcba9876543210}, {Pos: 0xa0, Tag: 1 << 63}} {
		want := fmt.Sprintf("%016x%016x", id.Pos, id.Tag)
		if got := id.String(); got != want {
			t.Errorf("String of %+v = %q, want %q", id, got, want)
		}
		if got := string(id.Append([]byte("x"))); got != "x"+want {
			t.Errorf("Append of %+v = %q, want %q", id, got, "x"+want)
		}
		if back, err := ParseID(want); err != nil || back != id {
			t.Errorf("ParseID(%q) = %+v, %v; want %+v", want, back, err, id)
		}
	}
}
