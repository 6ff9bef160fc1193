package vfs_test

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// TestFaultyConformance checks that a Faulty with nothing injected behaves
// like the FS it wraps.
func TestFaultyConformance(t *testing.T) {
	runConformance(t, func(t *testing.T) (vfs.FS, string) {
		m := vfs.NewMem()
		if err := m.MkdirAll("db"); err != nil {
			t.Fatal(err)
		}
		return vfs.NewFaulty(m), "db"
	})
}

func wantENOSPC(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("%s: %v, want ENOSPC", what, err)
	}
}

func wantUsed(t *testing.T, f *vfs.Faulty, want int64) {
	t.Helper()
	if got := f.Used(); got != want {
		t.Fatalf("Used = %d, want %d", got, want)
	}
}

func TestFaultyLimitWrites(t *testing.T) {
	m := vfs.NewMem()
	f := vfs.NewFaulty(m)
	f.SetLimit(10)
	a := mustCreate(t, f, "a")
	mustWrite(t, a, "123456", 0)
	wantUsed(t, f, 6)

	n, err := a.WriteAt([]byte("78901"), 6)
	wantENOSPC(t, "write past the limit", err)
	if n != 0 {
		t.Fatalf("failed write reported %d bytes", n)
	}
	wantFile(t, m, "a", "123456") // nothing of it was written
	wantUsed(t, f, 6)

	mustWrite(t, a, "abcdef", 0) // overwrite needs no space
	mustWrite(t, a, "7890", 6)   // exactly up to the limit
	wantUsed(t, f, 10)
	b := mustCreate(t, f, "b")
	_, err = b.WriteAt([]byte("x"), 0)
	wantENOSPC(t, "write to a second file when full", err)
	wantENOSPC(t, "truncate up when full", b.Truncate(1))

	// Removing a file frees its space.
	if err := f.Remove("a"); err != nil {
		t.Fatal(err)
	}
	wantUsed(t, f, 0)
	mustWrite(t, b, "0123456789", 0)
	wantUsed(t, f, 10)
	// Truncating down frees space too.
	if err := b.Truncate(4); err != nil {
		t.Fatal(err)
	}
	wantUsed(t, f, 4)
	// Lifting the limit lets anything through.
	f.SetLimit(-1)
	mustWrite(t, b, "long enough to pass ten bytes", 4)
	wantUsed(t, f, 33)
}

func TestFaultyLimitCountsOpenedAndRenamedFiles(t *testing.T) {
	m := vfs.NewMem()
	writeFile(t, m, "old", []byte("0123456789")) // written behind Faulty's back
	f := vfs.NewFaulty(m)
	wantUsed(t, f, 0)
	old, err := f.Open("old")
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	wantUsed(t, f, 10)
	// A second handle shares the accounting instead of counting twice.
	again, err := f.Open("old")
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	mustWrite(t, again, "ab", 10)
	wantUsed(t, f, 12)

	tmp := mustCreate(t, f, "tmp")
	mustWrite(t, tmp, "new", 0)
	wantUsed(t, f, 15)
	if err := f.Rename("tmp", "old"); err != nil { // replaces 12 bytes with 3
		t.Fatal(err)
	}
	wantUsed(t, f, 3)
	// The renamed file is still counted under its new name.
	f.SetLimit(5)
	mustWrite(t, tmp, "45", 3)
	_, err = tmp.WriteAt([]byte("6"), 5)
	wantENOSPC(t, "renamed file at the limit", err)
	// Create on an existing name truncates it: its bytes are freed.
	mustCreate(t, f, "old")
	wantUsed(t, f, 0)
}

// TestFaultyLimitConcurrent checks that concurrent appenders never overrun
// the limit together and that every accepted byte is counted.
func TestFaultyLimitConcurrent(t *testing.T) {
	f := vfs.NewFaulty(vfs.NewMem())
	const limit = 1000
	f.SetLimit(limit)
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := int64(0)
	for w := range 4 {
		file := mustCreate(t, f, fmt.Sprintf("f%d", w))
		wg.Go(func() {
			for i := range 100 {
				_, err := file.WriteAt(make([]byte, 7), int64(i*7))
				if err != nil {
					if !errors.Is(err, syscall.ENOSPC) {
						t.Error(err)
					}
					return
				}
				mu.Lock()
				accepted += 7
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if accepted > limit || accepted <= limit-7*4 {
		t.Fatalf("accepted %d bytes with limit %d", accepted, limit)
	}
	wantUsed(t, f, accepted)
}

func TestFaultyInject(t *testing.T) {
	m := vfs.NewMem()
	f := vfs.NewFaulty(m)
	errBoom := errors.New("boom")
	type call struct {
		op   vfs.Op
		name string
	}
	var calls []call
	f.Inject(func(op vfs.Op, name string) error {
		calls = append(calls, call{op, name})
		if name == "bad" || (op == vfs.OpRename && name == "target") {
			return errBoom
		}
		return nil
	})

	_, err := f.Create("bad")
	if !errors.Is(err, errBoom) {
		t.Fatalf("Create(bad) = %v, want boom", err)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Op != "create" || pe.Path != "bad" {
		t.Fatalf("injected error %#v does not name the op and path", err)
	}
	if names, _ := m.List("."); len(names) != 0 {
		t.Fatalf("failed Create reached the inner FS: %v", names)
	}

	good := mustCreate(t, f, "good")
	mustWrite(t, good, "data", 0)
	mustSync(t, good)
	if err := f.Rename("good", "target"); !errors.Is(err, errBoom) {
		t.Fatalf("Rename to target = %v, want boom", err)
	}
	wantFile(t, m, "good", "data") // the rename did not happen
	wantGone(t, m, "target")

	want := []call{
		{vfs.OpCreate, "bad"}, {vfs.OpCreate, "good"}, {vfs.OpWrite, "good"},
		{vfs.OpSync, "good"}, {vfs.OpRename, "target"},
	}
	if !slices.Equal(calls, want) {
		t.Fatalf("hook saw %v, want %v", calls, want)
	}

	f.Inject(nil)
	if err := f.Rename("good", "target"); err != nil {
		t.Fatalf("Rename after Inject(nil): %v", err)
	}
}

func TestFaultyInjectEveryOp(t *testing.T) {
	m := vfs.NewMem()
	if err := m.MkdirAll("d"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m, "d/f", []byte("content"))
	f := vfs.NewFaulty(m)
	file, err := f.Open("d/f")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	errInjected := errors.New("injected")
	ops := map[vfs.Op]func() error{
		vfs.OpCreate:   func() error { _, err := f.Create("d/g"); return err },
		vfs.OpOpen:     func() error { _, err := f.Open("d/f"); return err },
		vfs.OpRemove:   func() error { return f.Remove("d/f") },
		vfs.OpRename:   func() error { return f.Rename("d/f", "d/h") },
		vfs.OpMkdirAll: func() error { return f.MkdirAll("d/sub") },
		vfs.OpList:     func() error { _, err := f.List("d"); return err },
		vfs.OpSyncDir:  func() error { return f.SyncDir("d") },
		vfs.OpRead:     func() error { _, err := file.ReadAt(make([]byte, 1), 0); return err },
		vfs.OpWrite:    func() error { _, err := file.WriteAt([]byte("X"), 0); return err },
		vfs.OpSync:     func() error { return file.Sync() },
		vfs.OpTruncate: func() error { return file.Truncate(0) },
	}
	for op, do := range ops {
		f.Inject(func(o vfs.Op, _ string) error {
			if o == op {
				return errInjected
			}
			return nil
		})
		err := do()
		if !errors.Is(err, errInjected) {
			t.Errorf("%v: %v, want the injected error", op, err)
		}
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Op != op.String() {
			t.Errorf("%v: error %v does not carry the op name", op, err)
		}
	}
	// None of the failed operations changed anything.
	names, err := m.List("d")
	if err != nil || !slices.Equal(names, []string{"f"}) {
		t.Fatalf("List(d) = %v, %v; want [f]", names, err)
	}
	wantFile(t, m, "d/f", "content")
}

func TestFaultyFailAfter(t *testing.T) {
	m := vfs.NewMem()
	f := vfs.NewFaulty(m)
	errDead := errors.New("disk died")
	f.FailAfter(vfs.OpSync, 2, errDead)
	file := mustCreate(t, f, "log")
	for i := range 5 {
		mustWrite(t, file, "x", int64(i)) // writes are not affected
		err := file.Sync()
		if i < 2 && err != nil {
			t.Fatalf("sync %d failed early: %v", i, err)
		}
		if i >= 2 && !errors.Is(err, errDead) {
			t.Fatalf("sync %d = %v, want the sticky failure", i, err)
		}
	}
	// Only the two syncs that succeeded reached the inner FS.
	if err := m.SyncDir("."); err != nil {
		t.Fatal(err)
	}
	wantFile(t, m.Crash(nil), "log", "xx")
}

func TestOpString(t *testing.T) {
	seen := make(map[string]bool)
	for op := vfs.OpCreate; op <= vfs.OpTruncate; op++ {
		s := op.String()
		if s == "" || seen[s] {
			t.Fatalf("Op %d has empty or duplicate name %q", op, s)
		}
		seen[s] = true
	}
	if got := vfs.Op(200).String(); got != "Op(200)" {
		t.Fatalf("unknown op = %q", got)
	}
}
