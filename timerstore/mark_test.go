package timerstore

import (
	"errors"
	"path"
	"strings"
	"syscall"
	"testing"

	"github.com/hourglass-mq/hourglass/sortedrun/sortedruntest"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestEachDamageOutlivesAFailedMark: when Each finds damage in a run Open
// took from its tail and the damage mark cannot be written (a full disk,
// a failed fsync), the next Open of the state still does not trust the
// run: it reads it whole and refuses it, naming the run file and the
// damaged block. Otherwise the engine, stopped by the damage, would open
// the same tail again at every start and stop again.
func TestEachDamageOutlivesAFailedMark(t *testing.T) {
	for _, c := range sortedruntest.MarkFaults {
		t.Run(c.What, func(t *testing.T) {
			mem, st, _ := tailStore(t)
			name := path.Join(dir, runFiles(t, mem)[0])
			sortedruntest.Patch(t, mem, name, BlockSize+100, 1, func(b []byte) { b[0] ^= 0x10 })
			ff := vfs.NewFaulty(mem)
			s := open(t, ff, st)
			if !fromTail(s) {
				t.Fatal("not opened from the tail")
			}
			sortedruntest.FailOn(ff, damageMark, c.Err, c.Ops...)
			if err := s.RunsPlan().Each(func(Entry) {}, nil); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Each: %v, want the damage", err)
			}
			s.Close()
			if _, err := mem.Open(path.Join(dir, damageMark)); c.What == "disk full" && !vfs.IsNotExist(err) {
				t.Fatalf("the mark was written on a full disk: %v", err)
			}
			_, err := Open(mem.Crash(nil), dir, width, st, nil)
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.File != name || ce.Offset != BlockSize {
				t.Fatalf("Open after a failed mark: %v, want the damage of block 1 of %s", err, name)
			}
		})
	}
}

// TestEachSaysWhenDamageCannotBeRecorded: when neither the mark nor
// anything else can record the damage, Each says so, naming the run file:
// the next Open may trust the run's tail again.
func TestEachSaysWhenDamageCannotBeRecorded(t *testing.T) {
	mem, st, _ := tailStore(t)
	name := path.Join(dir, runFiles(t, mem)[0])
	sortedruntest.Patch(t, mem, name, BlockSize+100, 1, func(b []byte) { b[0] ^= 0x10 })
	ff := vfs.NewFaulty(mem)
	s := open(t, ff, st)
	sortedruntest.FailOn(ff, dir, syscall.EIO, vfs.OpCreate, vfs.OpWrite, vfs.OpSync, vfs.OpSyncDir)
	err := s.RunsPlan().Each(func(Entry) {}, nil)
	if !errors.Is(err, ErrCorrupt) || !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "could not be recorded") ||
		!strings.Contains(err.Error(), name) {
		t.Fatalf("Each: %v, want the damage and why it could not be recorded, naming %s", err, name)
	}
}
