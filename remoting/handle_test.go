package remoting

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHandles: a handle opens to its position, under the same key after a
// reopen; another key opens it to something else; a damaged key file is
// refused.
func TestHandles(t *testing.T) {
	dir := t.TempDir()
	h, err := openHandles(dir)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := openHandles(dir)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := openHandles("")
	for _, pos := range []uint64{0, 1, 4096, 1 << 40, ^uint64(0)} {
		v := h.seal(pos)
		if h.open(v) != pos || h2.open(v) != pos {
			t.Fatalf("position %d: sealed %x opens to %d", pos, v, h.open(v))
		}
		if pos != 0 && v == pos {
			t.Fatalf("position %d sealed to itself", pos)
		}
		if other.open(v) == pos {
			t.Fatalf("another key opened the handle of %d", pos)
		}
	}
	os.WriteFile(filepath.Join(dir, handleKeyFile), []byte("short"), 0o600)
	if _, err := openHandles(dir); err == nil {
		t.Fatal("a damaged key file was accepted")
	}
}
