package message

import "testing"

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
