package message

import (
	"crypto/aes"
	"encoding/binary"
	"testing"
)

// TestSealerTagMatchesAES: the pooled, in-place Tag is the first 8 bytes
// of AES-128 over (a, b), the same tags as before the pool (IDs and
// receipts already handed out must still verify), and allocates nothing.
func TestSealerTagMatchesAES(t *testing.T) {
	key := []byte("0123456789abcdef")
	s, err := NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := aes.NewCipher(key)
	for _, in := range [][2]uint64{{0, 0}, {1, 2}, {1 << 63, 12345}, {^uint64(0), ^uint64(0)}} {
		var src, dst [16]byte
		binary.LittleEndian.PutUint64(src[:8], in[0])
		binary.LittleEndian.PutUint64(src[8:], in[1])
		blk.Encrypt(dst[:], src[:])
		if got, want := s.Tag(in[0], in[1]), binary.LittleEndian.Uint64(dst[:8]); got != want {
			t.Fatalf("Tag(%d, %d) = %x, want %x", in[0], in[1], got, want)
		}
	}
	if n := testing.AllocsPerRun(1000, func() { s.Tag(7, 8) }); n != 0 {
		t.Fatalf("Tag allocates %.1f times a call", n)
	}
}
