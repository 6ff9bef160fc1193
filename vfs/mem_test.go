package vfs_test

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

func TestMemConformance(t *testing.T) {
	runConformance(t, func(t *testing.T) (vfs.FS, string) {
		m := vfs.NewMem()
		if err := m.MkdirAll("/db"); err != nil {
			t.Fatal(err)
		}
		return m, "/db"
	})
}

// newMemDir returns a Mem with the durable directory "d".
func newMemDir(t *testing.T) *vfs.Mem {
	t.Helper()
	m := vfs.NewMem()
	if err := m.MkdirAll("d"); err != nil {
		t.Fatal(err)
	}
	return m
}

func mustCreate(t *testing.T, fsys vfs.FS, name string) vfs.File {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func mustWrite(t *testing.T, f vfs.File, s string, off int64) {
	t.Helper()
	if _, err := f.WriteAt([]byte(s), off); err != nil {
		t.Fatal(err)
	}
}

func mustSync(t *testing.T, f vfs.File) {
	t.Helper()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func mustSyncDir(t *testing.T, fsys vfs.FS, dir string) {
	t.Helper()
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
}

// wantFile checks that name exists in fsys with content want.
func wantFile(t *testing.T, fsys vfs.FS, name, want string) {
	t.Helper()
	if got := readFile(t, fsys, name); string(got) != want {
		t.Fatalf("%s = %q, want %q", name, got, want)
	}
}

func wantGone(t *testing.T, fsys vfs.FS, name string) {
	t.Helper()
	_, err := fsys.Open(name)
	mustNotExist(t, "open "+name, err)
}

func TestMemCrashKeepsOnlySyncedData(t *testing.T) {
	m := newMemDir(t)
	f := mustCreate(t, m, "d/log")
	mustSyncDir(t, m, "d")
	wantFile(t, m.Crash(nil), "d/log", "") // entry durable, data never synced

	mustWrite(t, f, "first", 0)
	wantFile(t, m.Crash(nil), "d/log", "")
	mustSync(t, f)
	mustWrite(t, f, "second", 5)
	wantFile(t, m.Crash(nil), "d/log", "first")
	wantFile(t, m, "d/log", "firstsecond") // the original is unchanged by Crash
	mustSync(t, f)
	wantFile(t, m.Crash(nil), "d/log", "firstsecond")
}

func TestMemCrashUnsyncedOverwriteAndTruncate(t *testing.T) {
	m := newMemDir(t)
	f := mustCreate(t, m, "d/f")
	mustSyncDir(t, m, "d")
	mustWrite(t, f, "abcdef", 0)
	mustSync(t, f)

	// Overwriting synced bytes must not leak into the durable image, even
	// though Sync shares the array with the current data.
	mustWrite(t, f, "XY", 1)
	wantFile(t, m.Crash(nil), "d/f", "abcdef")
	// Shrink, then grow over the durable range again.
	if err := f.Truncate(2); err != nil {
		t.Fatal(err)
	}
	wantFile(t, m.Crash(nil), "d/f", "abcdef")
	if err := f.Truncate(4); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "!", 5)
	wantFile(t, m, "d/f", "aX\x00\x00\x00!")
	wantFile(t, m.Crash(nil), "d/f", "abcdef")
	// Create on the existing name truncates the same file, unsynced.
	mustCreate(t, m, "d/f")
	wantFile(t, m.Crash(nil), "d/f", "abcdef")
}

func TestMemCrashLosesUnsyncedEntries(t *testing.T) {
	m := newMemDir(t)
	f := mustCreate(t, m, "d/new")
	mustWrite(t, f, "synced data", 0)
	mustSync(t, f)
	wantGone(t, m.Crash(nil), "d/new") // data durable, entry not

	mustSyncDir(t, m, "d")
	wantFile(t, m.Crash(nil), "d/new", "synced data")

	if err := m.Remove("d/new"); err != nil {
		t.Fatal(err)
	}
	wantFile(t, m.Crash(nil), "d/new", "synced data") // removal not durable
	mustSyncDir(t, m, "d")
	wantGone(t, m.Crash(nil), "d/new")
}

func TestMemCrashDirectoriesAreDurable(t *testing.T) {
	m := vfs.NewMem()
	if err := m.MkdirAll("a/b/c"); err != nil {
		t.Fatal(err)
	}
	c := m.Crash(nil)
	names, err := c.List("a/b")
	if err != nil || !slices.Equal(names, []string{"c"}) {
		t.Fatalf("List(a/b) after crash = %v, %v", names, err)
	}
	mustCreate(t, c, "a/b/c/f") // the image is a working FS
}

// TestMemCrashAtomicReplace walks the temp-file, fsync, rename, fsync-dir
// sequence and checks the image after each step.
func TestMemCrashAtomicReplace(t *testing.T) {
	m := newMemDir(t)
	cur := mustCreate(t, m, "d/current")
	mustWrite(t, cur, "v1", 0)
	mustSync(t, cur)
	mustSyncDir(t, m, "d")

	tmp := mustCreate(t, m, "d/current.tmp")
	mustWrite(t, tmp, "v2", 0)
	mustSync(t, tmp)
	if err := m.Rename("d/current.tmp", "d/current"); err != nil {
		t.Fatal(err)
	}
	before := m.Crash(nil)
	wantFile(t, before, "d/current", "v1")
	wantGone(t, before, "d/current.tmp")

	mustSyncDir(t, m, "d")
	after := m.Crash(nil)
	wantFile(t, after, "d/current", "v2")
	wantGone(t, after, "d/current.tmp")
}

func TestMemCrashRenameAcrossDirs(t *testing.T) {
	setup := func(t *testing.T) *vfs.Mem {
		m := vfs.NewMem()
		for _, d := range []string{"src", "dst"} {
			if err := m.MkdirAll(d); err != nil {
				t.Fatal(err)
			}
		}
		f := mustCreate(t, m, "src/f")
		mustWrite(t, f, "body", 0)
		mustSync(t, f)
		mustSyncDir(t, m, "src")
		if err := m.Rename("src/f", "dst/f"); err != nil {
			t.Fatal(err)
		}
		return m
	}
	t.Run("NeitherSynced", func(t *testing.T) {
		c := setup(t).Crash(nil)
		wantFile(t, c, "src/f", "body")
		wantGone(t, c, "dst/f")
	})
	t.Run("TargetSynced", func(t *testing.T) {
		m := setup(t)
		mustSyncDir(t, m, "dst")
		c := m.Crash(nil)
		// One file under two names, like a hard link.
		wantFile(t, c, "src/f", "body")
		wantFile(t, c, "dst/f", "body")
		f, err := c.Open("dst/f")
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, f, "B", 0)
		f.Close()
		wantFile(t, c, "src/f", "Body")
	})
	t.Run("SourceSynced", func(t *testing.T) {
		m := setup(t)
		mustSyncDir(t, m, "src")
		c := m.Crash(nil)
		wantGone(t, c, "src/f")
		wantGone(t, c, "dst/f")
	})
	t.Run("BothSynced", func(t *testing.T) {
		m := setup(t)
		mustSyncDir(t, m, "src")
		mustSyncDir(t, m, "dst")
		c := m.Crash(nil)
		wantGone(t, c, "src/f")
		wantFile(t, c, "dst/f", "body")
	})
}

func TestMemCrashImagesAreIndependent(t *testing.T) {
	m := newMemDir(t)
	f := mustCreate(t, m, "d/f")
	mustWrite(t, f, "abc", 0)
	mustSync(t, f)
	mustSyncDir(t, m, "d")
	c := m.Crash(nil)
	g, err := c.Open("d/f")
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, g, "XYZ", 0)
	mustSync(t, g)
	wantFile(t, m, "d/f", "abc")
	wantFile(t, m.Crash(nil), "d/f", "abc")
	// And the original's later writes do not reach the image.
	mustWrite(t, f, "123", 0)
	mustSync(t, f)
	wantFile(t, c, "d/f", "XYZ")
}

// TestMemCrashRandomPrefix checks that a crash with an rng keeps the durable
// bytes and a prefix, in offset order, of the unsynced changes (an
// overwrite in place, then the tail), never anything else, and that the
// cut falls at different places.
func TestMemCrashRandomPrefix(t *testing.T) {
	m := newMemDir(t)
	f := mustCreate(t, m, "d/log")
	mustSyncDir(t, m, "d")
	mustWrite(t, f, "durable|", 0)
	mustSync(t, f)
	mustWrite(t, f, "D", 0) // unsynced overwrite of a durable byte
	tail := "0123456789abcdefghijklmnopqrstuvwxyz"
	mustWrite(t, f, tail, 8)
	current := "Durable|" + tail

	lengths := make(map[int]bool)
	overwritten := make(map[bool]bool)
	for seed := range uint64(200) {
		c := m.Crash(rand.New(rand.NewPCG(seed, 1)))
		got := string(readFile(t, c, "d/log"))
		if len(got) < 8 || got[1:8] != "urable|" || got[0] != 'd' && got[0] != 'D' {
			t.Fatalf("seed %d: durable part lost or changed: %q", seed, got)
		}
		if len(got) > 8 && got[0] != 'D' {
			t.Fatalf("seed %d: the tail reached the disk before the overwrite at offset 0: %q", seed, got)
		}
		overwritten[got[0] == 'D'] = true
		if !bytes.HasPrefix([]byte(current[8:]), []byte(got[8:])) {
			t.Fatalf("seed %d: tail %q is not a prefix of the unsynced %q", seed, got[8:], tail)
		}
		lengths[len(got)] = true
		// The image's data is durable in it: a second crash keeps it.
		if again := string(readFile(t, c.Crash(nil), "d/log")); again != got {
			t.Fatalf("seed %d: image not durable: %q then %q", seed, got, again)
		}
	}
	if len(lengths) < 10 {
		t.Fatalf("200 crashes cut the tail at only %d places", len(lengths))
	}
	if !overwritten[true] || !overwritten[false] {
		t.Fatalf("the unsynced overwrite was always or never kept: %v", overwritten)
	}
	// Same seed, same image.
	a := readFile(t, m.Crash(rand.New(rand.NewPCG(7, 7))), "d/log")
	b := readFile(t, m.Crash(rand.New(rand.NewPCG(7, 7))), "d/log")
	if !bytes.Equal(a, b) {
		t.Fatalf("same seed gave %q and %q", a, b)
	}
	// Unsynced entries stay lost in random mode too.
	g := mustCreate(t, m, "d/unsynced")
	mustWrite(t, g, "x", 0)
	wantGone(t, m.Crash(rand.New(rand.NewPCG(1, 2))), "d/unsynced")
}

// TestMemModel drives random writes, truncates and syncs on one file and
// compares the current and crash images with a plain model that copies on
// every sync, to check the copy-free Sync.
func TestMemModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 0))
	m := newMemDir(t)
	f := mustCreate(t, m, "d/f")
	mustSyncDir(t, m, "d")
	var cur, durable []byte
	for i := range 3000 {
		switch op := rng.IntN(10); {
		case op < 6:
			off := rng.IntN(len(cur) + 8)
			p := make([]byte, 1+rng.IntN(16))
			for j := range p {
				p[j] = byte(rng.Uint32())
			}
			mustWrite(t, f, string(p), int64(off))
			if end := off + len(p); end > len(cur) {
				cur = append(cur, make([]byte, end-len(cur))...)
			}
			copy(cur[off:], p)
		case op < 8:
			size := rng.IntN(len(cur) + 8)
			if err := f.Truncate(int64(size)); err != nil {
				t.Fatal(err)
			}
			if size < len(cur) {
				cur = cur[:size:size]
			} else {
				cur = append(cur, make([]byte, size-len(cur))...)
			}
		default:
			mustSync(t, f)
			durable = slices.Clone(cur)
		}
		if got := readAll(t, f); !bytes.Equal(got, cur) {
			t.Fatalf("step %d: current %x, model %x", i, got, cur)
		}
		if i%10 == 0 {
			if got := readFile(t, m.Crash(nil), "d/f"); !bytes.Equal(got, durable) {
				t.Fatalf("step %d: durable %x, model %x", i, got, durable)
			}
		}
	}
}

func TestMemCloneAndUsedBytes(t *testing.T) {
	m := newMemDir(t)
	a := mustCreate(t, m, "d/a")
	mustWrite(t, a, "12345", 0)
	mustSync(t, a)
	mustSyncDir(t, m, "d")
	b := mustCreate(t, m, "d/b")
	mustWrite(t, b, "678", 0)
	if got := m.UsedBytes(); got != 8 {
		t.Fatalf("UsedBytes = %d, want 8", got)
	}
	if err := m.Remove("d/a"); err != nil { // removed: its entry is durable still
		t.Fatal(err)
	}
	if got := m.UsedBytes(); got != 3 {
		t.Fatalf("UsedBytes after Remove = %d, want 3", got)
	}

	c := m.Clone()
	wantFile(t, c, "d/b", "678")
	wantGone(t, c, "d/a")
	// The clone carries the durable state: its crash image equals m's.
	for _, img := range []*vfs.Mem{m.Crash(nil), c.Crash(nil)} {
		wantFile(t, img, "d/a", "12345")
		wantGone(t, img, "d/b")
	}
	// And it is independent of m.
	mustWrite(t, b, "changed", 0)
	wantFile(t, c, "d/b", "678")
	if got := c.UsedBytes(); got != 3 {
		t.Fatalf("clone UsedBytes = %d, want 3", got)
	}
}
