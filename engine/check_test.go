package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/queueindex"
	"github.com/hourglass-mq/hourglass/vfs"
)

// checkFixture fills an OS data directory with every kind of file Check
// reads: several log segments, near and far timers, keys, cancels and
// reschedules (the overlay journal), fired messages (queue indexes).
func checkFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	clk := clock.NewFake(t0)
	opt := Options{Dir: dir, FS: vfs.OS, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		CheckpointInterval: time.Hour, SegmentBytes: 1 << 13}
	e, err := Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, clk: clk, opt: opt, e: e}
	defer e.Close()
	var far []Receipt
	for i := 0; i < 150; i++ {
		h.send("t", fmt.Sprint("k", i), message.When{Delay: time.Duration(i%5) * time.Second})
		far = append(far, h.send("u", fmt.Sprint("f", i), message.When{Delay: time.Duration(1+i%3) * time.Hour}))
	}
	for i := 0; i < 20; i++ {
		if err := e.Cancel(t.Context(), far[i].ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Reschedule(t.Context(), far[20+i].ID, message.When{Delay: 5 * time.Hour}, 0); err != nil {
			t.Fatal(err)
		}
	}
	waitParked(e, clk)
	clk.Advance(10 * time.Second)
	h.settle("t", 150)
	// Records after the last fire, so that a block zeroed at the start of
	// the last segment has valid records after it (damage, not a torn
	// tail), whatever the size of the fire before them.
	for i := 0; i < 20; i++ {
		h.send("u", fmt.Sprint("tail", i), message.When{Delay: time.Hour})
	}
	if err := e.checkpoint(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// hashDir hashes every file's name and content under dir.
func hashDir(t *testing.T, dir string) string {
	t.Helper()
	sum := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		fmt.Fprintf(sum, "%s %d\n", p, len(b))
		sum.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sum.Sum(nil))
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestCheckCleanDirectoryWritesNothing: a sound directory checks clean,
// every cache is read, and no byte of the directory changes.
func TestCheckCleanDirectoryWritesNothing(t *testing.T) {
	dir := checkFixture(t)
	before := hashDir(t, dir)
	rep, err := Check(vfs.OS, dir, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || len(rep.Notes) != 0 {
		t.Fatalf("clean directory: %+v", rep)
	}
	if rep.Segments < 3 || rep.Messages != 320 || rep.QueueEntries != 150 || rep.TimerEntries == 0 || rep.KeyEntries < 320 || rep.OverlayEntries < 40 || !rep.Checkpoint {
		t.Fatalf("not everything was checked: %s", rep.Summary())
	}
	if after := hashDir(t, dir); after != before {
		t.Fatal("Check changed the directory")
	}
}

// TestCheckRefusesALiveBroker: a directory a broker holds is refused.
func TestCheckRefusesALiveBroker(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(Options{Dir: dir, FS: vfs.OS, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Check(vfs.OS, dir, CheckOptions{}); !errors.Is(err, ErrInUse) {
		t.Fatalf("check of a live broker's directory: %v, want ErrInUse", err)
	}
	e.Close()
	if rep, err := Check(vfs.OS, dir, CheckOptions{}); err != nil || !rep.OK() {
		t.Fatalf("after close: %v %+v", err, rep)
	}
}

// firstFile returns the first file of dir/sub with the suffix, sorted.
func firstFile(t *testing.T, dir, sub, suffix string, last bool) string {
	t.Helper()
	var names []string
	filepath.WalkDir(filepath.Join(dir, sub), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, suffix) {
			names = append(names, p)
		}
		return nil
	})
	sort.Strings(names)
	if len(names) == 0 {
		t.Fatalf("no %s file under %s", suffix, sub)
	}
	if last {
		return names[len(names)-1]
	}
	return names[0]
}

func patch(t *testing.T, name string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, name string, size int64) {
	t.Helper()
	if err := os.Truncate(name, size); err != nil {
		t.Fatal(err)
	}
}

// TestCheckFindsDamage: each kind of damage the torn-tail and corruption
// tests make is found, in the right file, with Problems for damage and
// only Notes for what recovery cuts as a matter of course.
func TestCheckFindsDamage(t *testing.T) {
	clean := checkFixture(t)
	cases := []struct {
		name    string
		damage  func(t *testing.T, dir string) // returns nothing; the file is in want
		file    string                         // substring of the problem's (or note's) file
		problem bool
	}{
		{"flipped byte in a sealed segment", func(t *testing.T, dir string) {
			patch(t, firstFile(t, dir, "log", ".log", false), commitlog.HeaderSize+40, []byte{0xff})
		}, "log/00000000000000000000.log", true},
		{"zeroed block in the last segment", func(t *testing.T, dir string) {
			patch(t, firstFile(t, dir, "log", ".log", true), commitlog.HeaderSize, make([]byte, 512))
		}, "log/", true},
		{"torn tail", func(t *testing.T, dir string) {
			name := firstFile(t, dir, "log", ".log", true)
			st, _ := os.Stat(name)
			patch(t, name, st.Size(), []byte{200, 0, 0, 0, 1, 2, 3, 4, 1, 'x'})
		}, "log/", false},
		{"truncated queue index", func(t *testing.T, dir string) {
			name := firstFile(t, dir, "queues", ".qi", false)
			st, _ := os.Stat(name)
			truncate(t, name, st.Size()-queueindex.EntrySize-3)
		}, "queues/", true},
		{"queue entry pointing at garbage", func(t *testing.T, dir string) {
			name := firstFile(t, dir, "queues", ".qi", false)
			b, _ := os.ReadFile(name)
			binary.LittleEndian.PutUint64(b, binary.LittleEndian.Uint64(b)+1)
			// Re-seal it so that only the pointer is wrong.
			e := queueindex.Entry{Pos: binary.LittleEndian.Uint64(b), Due: int64(binary.LittleEndian.Uint64(b[8:])), Visible: int64(binary.LittleEndian.Uint64(b[16:]))}
			patch(t, name, 0, sealedQueueEntry(e))
		}, "queues/", true},
		{"corrupt timer run", func(t *testing.T, dir string) {
			patch(t, firstFile(t, dir, "timers", ".tr", false), 30, []byte{0xee})
		}, "timers/", true},
		{"truncated key index run", func(t *testing.T, dir string) {
			name := firstFile(t, dir, "keys", ".kix", false)
			truncate(t, name, 100)
		}, "keys/", true},
		{"corrupt overlay journal", func(t *testing.T, dir string) {
			patch(t, firstFile(t, dir, "overlay", ".ov", false), 3, []byte{0x55})
		}, "overlay/", true},
		{"damage mark in the key index", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "keys", damageMarkFile), []byte("block 1"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "keys/DAMAGED", true},
		{"damage mark in the timer index", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "timers", damageMarkFile), []byte("block 1"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "timers/DAMAGED", true},
		{"corrupt checkpoint", func(t *testing.T, dir string) {
			patch(t, filepath.Join(dir, checkpointFile), 20, []byte{0x99})
		}, "CHECKPOINT", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, clean)
			tc.damage(t, dir)
			rep, err := Check(vfs.OS, dir, CheckOptions{})
			if err != nil {
				t.Fatal(err)
			}
			found := rep.Notes
			if tc.problem {
				found = rep.Problems
			}
			if rep.OK() == tc.problem || len(found) == 0 || !strings.Contains(found[0].File, tc.file) {
				t.Fatalf("want a %v in %s; got problems %+v notes %+v", map[bool]string{true: "problem", false: "note"}[tc.problem], tc.file, rep.Problems, rep.Notes)
			}
			t.Logf("%s at %d: %s", found[0].File, found[0].Offset, found[0].What)
		})
	}
}

// sealedQueueEntry encodes e with a valid check.
func sealedQueueEntry(e queueindex.Entry) []byte {
	b := make([]byte, queueindex.EntrySize)
	binary.LittleEndian.PutUint64(b[0:], e.Pos)
	binary.LittleEndian.PutUint64(b[8:], uint64(e.Due))
	binary.LittleEndian.PutUint64(b[16:], uint64(e.Visible))
	binary.LittleEndian.PutUint32(b[28:], crc32.Checksum(b[:28], crcTable)^0x51494458)
	return b
}
