package keyindex

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// dir is where the tests keep the index.
const dir = "d"

// openAt opens the index in dir of fs from st, which must succeed.
func openAt(t testing.TB, fs vfs.FS, st []byte) *Index {
	t.Helper()
	x, err := Open(fs, dir, st, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// checkpoint runs a whole checkpoint cycle (the caller's checkpoint being
// durable at once, so it releases too) and returns the state.
func checkpoint(t testing.TB, x *Index) []byte {
	t.Helper()
	st, j := complete(t, x)
	if err := x.Release(j); err != nil {
		t.Fatal(err)
	}
	return st
}

// oneKey returns a Mem and an index in it whose durable state holds key 1
// at position 10.
func oneKey(t testing.TB) (*vfs.Mem, *Index, []byte) {
	t.Helper()
	mem := vfs.NewMem()
	x := openAt(t, mem, nil)
	x.Put(1, 10)
	return mem, x, checkpoint(t, x)
}

// complete prepares, runs and completes a job, which must succeed, without
// releasing it.
func complete(t testing.TB, x *Index) ([]byte, *Job) {
	t.Helper()
	j, err := x.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	st, err := x.Complete(j, j.Run())
	if err != nil {
		t.Fatal(err)
	}
	return st, j
}

// wantGet fails unless Get(h) answers pos (ok false when pos is 0).
func wantGet(t testing.TB, x *Index, h, pos uint64) {
	t.Helper()
	p, ok, err := x.Get(h)
	if err != nil {
		t.Fatalf("get %x: %v", h, err)
	}
	if ok != (pos != 0) || p != pos {
		t.Fatalf("get %x: %d %v, want %d", h, p, ok, pos)
	}
}

// wantCorrupt fails unless err is an ErrCorrupt naming name and off.
func wantCorrupt(t testing.TB, err error, name string, off int64) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
	if want := fmt.Sprintf("%s at offset %d", name, off); !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %q", err, want)
	}
}

// runFiles returns the run files in dir of fs.
func runFiles(t testing.TB, fs vfs.FS) []string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if _, ok := format.ParseRunName(n); ok {
			out = append(out, dir+"/"+n)
		}
	}
	return out
}

// spread maps i to a hash spread over the whole range, as a real hash is.
func spread(i int) uint64 { return uint64(i)*0x9e3779b97f4a7c15 + 1 }

// runName returns the file name of run seq in dir.
func runName(dir string, seq uint64) string { return format.RunName(dir, seq) }
