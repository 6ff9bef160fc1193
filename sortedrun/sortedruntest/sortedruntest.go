// Package sortedruntest holds the test helpers that package sortedrun and
// its users share: altering run files behind a store's back, and the
// fixtures of run files written by earlier versions.
package sortedruntest

import (
	"bytes"
	"flag"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// FailOn makes ff fail every operation of ops on a file whose name
// contains part with err (the hook replaces any other): a damage mark
// that cannot be written, for one.
func FailOn(ff *vfs.Faulty, part string, err error, ops ...vfs.Op) {
	ff.Inject(func(op vfs.Op, name string) error {
		if slices.Contains(ops, op) && strings.Contains(name, part) {
			return err
		}
		return nil
	})
}

// MarkFault is a way a damage mark's write fails: the error, and the
// operations on the mark that return it (FailOn).
type MarkFault struct {
	What string
	Err  error
	Ops  []vfs.Op
}

// MarkFaults are the failures a damage mark's write is tested against: a
// full disk (its create and write fail) and a failed fsync (its sync and
// the directory's fail). The first is "disk full".
var MarkFaults = []MarkFault{
	{"disk full", syscall.ENOSPC, []vfs.Op{vfs.OpCreate, vfs.OpWrite}},
	{"failed fsync", syscall.EIO, []vfs.Op{vfs.OpSync, vfs.OpSyncDir}},
}

// Patch reads n bytes at off of name, lets change alter them and writes
// them back.
func Patch(t testing.TB, fs vfs.FS, name string, off int64, n int, change func([]byte)) {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	change(b)
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// Truncate cuts or extends name to n bytes.
func Truncate(t testing.TB, fs vfs.FS, name string, n int64) {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(n); err != nil {
		t.Fatal(err)
	}
}

// Fixture is a directory of run files and the state that lists them, as
// an earlier version wrote them: fixture/<runs>/ and fixture/state.
type Fixture struct {
	Dir  string // the fixture's directory, relative to the test's package
	Runs string // the name of its run directory
}

// State returns the fixture's state.
func (x Fixture) State(t testing.TB) []byte {
	t.Helper()
	st, err := os.ReadFile(filepath.Join(x.Dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// names returns the base names of the fixture's run files.
func (x Fixture) names(t testing.TB) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(x.Dir, x.Runs))
	if err != nil || len(es) == 0 {
		t.Fatalf("fixture %s: %v, %d files", x.Dir, err, len(es))
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// CopyTo copies the fixture's run files into dir of a Mem, which it
// returns with the state.
func (x Fixture) CopyTo(t testing.TB, dir string) (*vfs.Mem, []byte) {
	t.Helper()
	mem := vfs.NewMem()
	if err := mem.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	for _, n := range x.names(t) {
		b, err := os.ReadFile(filepath.Join(x.Dir, x.Runs, n))
		if err != nil {
			t.Fatal(err)
		}
		f, err := mem.Create(path.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(b, 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return mem, x.State(t)
}

// SameAs fails unless state and the run files in dir (on the OS) are
// byte for byte the fixture's: the current code writes what the earlier
// version wrote. A run file written now may go on after the fixture's
// bytes: that is its tail (see package sortedrun), which a fixture
// written before tails does not have and whose layout package
// sortedrun's tests check.
func (x Fixture) SameAs(t testing.TB, dir string, state []byte) {
	t.Helper()
	if old := x.State(t); !bytes.Equal(state, old) {
		t.Fatalf("state differs from the fixture's:\n%x\n%x", state, old)
	}
	for _, n := range x.names(t) {
		a, err1 := os.ReadFile(filepath.Join(x.Dir, x.Runs, n))
		b, err2 := os.ReadFile(filepath.Join(dir, n))
		if err1 != nil || err2 != nil || !bytes.HasPrefix(b, a) {
			t.Fatalf("run %s differs from the fixture's (%v, %v)", n, err1, err2)
		}
	}
	if es, err := os.ReadDir(dir); err != nil || len(es) != len(x.names(t)) {
		t.Fatalf("%d files written, the fixture has %d (%v)", len(es), len(x.names(t)), err)
	}
}

var update = flag.Bool("update", false, "rewrite the fixtures of run files (only with the code a fixture is named after)")

// Update rewrites the fixture with write, which builds its run files in
// the directory it is given and returns their state, when the test binary
// runs with -update; otherwise it skips, saying so.
func (x Fixture) Update(t *testing.T, write func(dir string) []byte) {
	if !*update {
		t.Skip("rewrites the fixture only with -update")
	}
	if err := os.RemoveAll(x.Dir); err != nil {
		t.Fatal(err)
	}
	st := write(filepath.Join(x.Dir, x.Runs))
	if err := os.WriteFile(filepath.Join(x.Dir, "state"), st, 0o644); err != nil {
		t.Fatal(err)
	}
}
