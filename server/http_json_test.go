package server

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// TestReadAll: the body comes back whole whatever length was announced
// (exact, unknown, too large, too small), in pieces or not, beyond the
// presized buffer too; a read error is returned; an announced length
// never sizes the buffer past presizeMax.
func TestReadAll(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 9000) // 144,000 B, past presizeMax
	for _, n := range []int{0, 1, 100, presizeMax, presizeMax + 1, len(body)} {
		want := body[:n]
		for _, announced := range []int64{-1, 0, int64(n), int64(n) + 10, 8 << 20} {
			for name, r := range map[string]io.Reader{
				"whole":      bytes.NewReader(want),
				"one byte":   iotest.OneByteReader(bytes.NewReader(want)),
				"data + EOF": iotest.DataErrReader(bytes.NewReader(want)),
			} {
				got, err := readAll(r, announced)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%d bytes announced as %d, %s: got %d bytes, err %v", n, announced, name, len(got), err)
				}
				if cap(got) > max(2*n, presizeMax+1) {
					t.Fatalf("%d bytes announced as %d: a buffer of %d", n, announced, cap(got))
				}
			}
		}
	}
	boom := errors.New("boom")
	if _, err := readAll(io.MultiReader(bytes.NewReader(body[:10]), iotest.ErrReader(boom)), 100); !errors.Is(err, boom) {
		t.Fatalf("a read error came back as %v", err)
	}
}

// TestReadAllSizesFromTheLength: a body of a consumer's thousand receipts
// (30 KiB) with its length announced is read into one buffer, where
// io.ReadAll grew one from 512 B by doubling.
func TestReadAllSizesFromTheLength(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 30<<10)
	r := bytes.NewReader(body)
	allocs := testing.AllocsPerRun(20, func() {
		r.Reset(body)
		if got, err := readAll(r, int64(len(body))); err != nil || len(got) != len(body) {
			t.Fatalf("read %d bytes, err %v", len(got), err)
		}
	})
	if allocs > 1 {
		t.Fatalf("%v allocations to read %d bytes announced", allocs, len(body))
	}
}
