package vfs_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
	"sync"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// newFSFunc returns a fresh, empty FS for one test and the directory (which
// exists) under which the test may create its files.
type newFSFunc func(t *testing.T) (vfs.FS, string)

// runConformance runs the ordinary-semantics suite that every FS must pass,
// so that code tested on Mem behaves the same on the OS.
func runConformance(t *testing.T, newFS newFSFunc) {
	tests := []struct {
		name string
		fn   func(t *testing.T, fsys vfs.FS, root string)
	}{
		{"WriteReadSize", testWriteReadSize},
		{"Truncate", testTruncate},
		{"CreateTruncatesExisting", testCreateTruncatesExisting},
		{"NotExist", testNotExist},
		{"Remove", testRemove},
		{"Rename", testRename},
		{"ListAndMkdirAll", testListAndMkdirAll},
		{"SyncAndClose", testSyncAndClose},
		{"OpenAfterRemove", testOpenAfterRemove},
		{"ConcurrentDisjointWrites", testConcurrentDisjointWrites},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys, root := newFS(t)
			tc.fn(t, fsys, root)
		})
	}
}

// writeFile creates name with data and closes it.
func writeFile(t *testing.T, fsys vfs.FS, name string, data []byte) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close %s: %v", name, err)
	}
}

// readFile returns the whole content of name.
func readFile(t *testing.T, fsys vfs.FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer f.Close()
	return readAll(t, f)
}

// readAll returns the whole content of an open file.
func readAll(t *testing.T, f vfs.File) []byte {
	t.Helper()
	size, err := f.Size()
	if err != nil {
		t.Fatalf("size: %v", err)
	}
	buf := make([]byte, size)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
		t.Fatalf("read %d bytes: n=%d err=%v", size, n, err)
	}
	return buf[:n]
}

func mustNotExist(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got no error, want not-exist", what)
	}
	if !vfs.IsNotExist(err) || !errors.Is(err, vfs.ErrNotExist) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s: %v does not match both vfs.ErrNotExist and fs.ErrNotExist", what, err)
	}
}

func testWriteReadSize(t *testing.T, fsys vfs.FS, root string) {
	name := path.Join(root, "a")
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, err := f.WriteAt([]byte("hello"), 0); n != 5 || err != nil {
		t.Fatalf("WriteAt = %d, %v", n, err)
	}
	if _, err := f.WriteAt([]byte("world"), 5); err != nil {
		t.Fatal(err)
	}
	if size, err := f.Size(); size != 10 || err != nil {
		t.Fatalf("Size = %d, %v; want 10", size, err)
	}
	buf := make([]byte, 4)
	if n, err := f.ReadAt(buf, 3); n != 4 || err != nil || string(buf) != "lowo" {
		t.Fatalf("ReadAt(3) = %d %q %v", n, buf, err)
	}
	// A short read at the end reports io.EOF with the bytes it got.
	if n, err := f.ReadAt(buf, 8); n != 2 || !errors.Is(err, io.EOF) || string(buf[:2]) != "ld" {
		t.Fatalf("ReadAt(8) = %d %q %v; want 2 \"ld\" EOF", n, buf[:n], err)
	}
	if n, err := f.ReadAt(buf, 10); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("ReadAt(10) = %d %v; want 0 EOF", n, err)
	}
	// Writing past the end leaves a zero-filled gap.
	if _, err := f.WriteAt([]byte("x"), 14); err != nil {
		t.Fatal(err)
	}
	if got, want := readAll(t, f), []byte("helloworld\x00\x00\x00\x00x"); !bytes.Equal(got, want) {
		t.Fatalf("content = %q, want %q", got, want)
	}
	// Overwriting in the middle does not change the size.
	if _, err := f.WriteAt([]byte("HE"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, f); string(got[:5]) != "HEllo" || len(got) != 15 {
		t.Fatalf("after overwrite: %q", got)
	}
}

func testTruncate(t *testing.T, fsys vfs.FS, root string) {
	f, err := fsys.Create(path.Join(root, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("abcdef"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(3); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, f); string(got) != "abc" {
		t.Fatalf("after shrink: %q", got)
	}
	// Growing again must show zeros, not the old bytes.
	if err := f.Truncate(5); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, f); string(got) != "abc\x00\x00" {
		t.Fatalf("after grow: %q", got)
	}
	if _, err := f.WriteAt([]byte("Z"), 6); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, f); string(got) != "abc\x00\x00\x00Z" {
		t.Fatalf("after write past grow: %q", got)
	}
}

func testCreateTruncatesExisting(t *testing.T, fsys vfs.FS, root string) {
	name := path.Join(root, "c")
	writeFile(t, fsys, name, []byte("old content"))
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if size, err := f.Size(); size != 0 || err != nil {
		t.Fatalf("Size after Create = %d, %v", size, err)
	}
	if _, err := f.WriteAt([]byte("new"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := readFile(t, fsys, name); string(got) != "new" {
		t.Fatalf("content = %q", got)
	}
}

func testNotExist(t *testing.T, fsys vfs.FS, root string) {
	missing := path.Join(root, "missing")
	_, err := fsys.Open(missing)
	mustNotExist(t, "Open", err)
	mustNotExist(t, "Remove", fsys.Remove(missing))
	mustNotExist(t, "Rename", fsys.Rename(missing, path.Join(root, "x")))
	_, err = fsys.List(missing)
	mustNotExist(t, "List", err)
	mustNotExist(t, "SyncDir", fsys.SyncDir(missing))
	_, err = fsys.Create(path.Join(missing, "f"))
	mustNotExist(t, "Create in missing dir", err)
}

func testRemove(t *testing.T, fsys vfs.FS, root string) {
	name := path.Join(root, "r")
	writeFile(t, fsys, name, []byte("x"))
	if err := fsys.Remove(name); err != nil {
		t.Fatal(err)
	}
	_, err := fsys.Open(name)
	mustNotExist(t, "Open after Remove", err)
	names, err := fsys.List(root)
	if err != nil || len(names) != 0 {
		t.Fatalf("List after Remove = %v, %v", names, err)
	}
}

func testRename(t *testing.T, fsys vfs.FS, root string) {
	src, dst := path.Join(root, "src"), path.Join(root, "dst")
	writeFile(t, fsys, src, []byte("new"))
	writeFile(t, fsys, dst, []byte("old and longer"))
	if err := fsys.Rename(src, dst); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fsys, dst); string(got) != "new" {
		t.Fatalf("dst = %q after rename", got)
	}
	_, err := fsys.Open(src)
	mustNotExist(t, "Open old name", err)
	// Across directories.
	sub := path.Join(root, "sub")
	if err := fsys.MkdirAll(sub); err != nil {
		t.Fatal(err)
	}
	moved := path.Join(sub, "moved")
	if err := fsys.Rename(dst, moved); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fsys, moved); string(got) != "new" {
		t.Fatalf("moved = %q", got)
	}
	if names, _ := fsys.List(root); !slices.Equal(names, []string{"sub"}) {
		t.Fatalf("List(root) = %v, want [sub]", names)
	}
}

func testListAndMkdirAll(t *testing.T, fsys vfs.FS, root string) {
	deep := path.Join(root, "x", "y", "z")
	if err := fsys.MkdirAll(deep); err != nil {
		t.Fatal(err)
	}
	if err := fsys.MkdirAll(deep); err != nil {
		t.Fatalf("MkdirAll on existing dir: %v", err)
	}
	for _, n := range []string{"c", "a", "b10", "b2"} {
		writeFile(t, fsys, path.Join(root, n), nil)
	}
	names, err := fsys.List(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b10", "b2", "c", "x"}; !slices.Equal(names, want) {
		t.Fatalf("List = %v, want %v", names, want)
	}
	names, err = fsys.List(path.Join(root, "x", "y"))
	if err != nil || !slices.Equal(names, []string{"z"}) {
		t.Fatalf("List(x/y) = %v, %v", names, err)
	}
	writeFile(t, fsys, path.Join(deep, "f"), []byte("deep"))
	if got := readFile(t, fsys, path.Join(deep, "f")); string(got) != "deep" {
		t.Fatalf("deep file = %q", got)
	}
	// A file in the way of a directory is an error, not silently ignored.
	if err := fsys.MkdirAll(path.Join(root, "a", "sub")); err == nil {
		t.Fatal("MkdirAll through a file succeeded")
	}
}

func testSyncAndClose(t *testing.T, fsys vfs.FS, root string) {
	f, err := fsys.Create(path.Join(root, "s"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if err := fsys.SyncDir(root); err != nil {
		t.Fatalf("SyncDir: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("WriteAt after Close: %v, want fs.ErrClosed", err)
	}
	if err := f.Close(); err == nil {
		t.Fatal("second Close succeeded")
	}
}

func testOpenAfterRemove(t *testing.T, fsys vfs.FS, root string) {
	name := path.Join(root, "o")
	writeFile(t, fsys, name, []byte("kept"))
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := fsys.Remove(name); err != nil {
		t.Fatal(err)
	}
	// POSIX semantics: the open handle still reads and writes the file.
	if _, err := f.WriteAt([]byte("!"), 4); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, f); string(got) != "kept!" {
		t.Fatalf("content through open handle = %q", got)
	}
}

func testConcurrentDisjointWrites(t *testing.T, fsys vfs.FS, root string) {
	f, err := fsys.Create(path.Join(root, "cc"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const workers, chunk = 8, 64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			buf := bytes.Repeat([]byte{byte('a' + w)}, chunk)
			if _, err := f.WriteAt(buf, int64(w*chunk)); err != nil {
				t.Error(err)
			}
			if _, err := f.Size(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got := readAll(t, f)
	if len(got) != workers*chunk {
		t.Fatalf("size %d, want %d", len(got), workers*chunk)
	}
	for w := range workers {
		region := got[w*chunk : (w+1)*chunk]
		if !bytes.Equal(region, bytes.Repeat([]byte{byte('a' + w)}, chunk)) {
			t.Fatalf("region %d = %q", w, region)
		}
	}
}
