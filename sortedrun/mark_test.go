package sortedrun_test

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/hourglass-mq/hourglass/sortedrun"
	"github.com/hourglass-mq/hourglass/sortedrun/sortedruntest"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestDamageMetIsRecorded: a reader that meets damage in a block of a run
// opened from its tail (here ReadBlocks; a lookup, a merge and Verify go
// the same way) records it: the run's tail is withdrawn durably and the
// mark written, so after a power loss the tail is not used (OpenRunTail
// says it was withdrawn, and the caller reads the run whole). On a disk
// too full for the mark the withdrawal alone holds (an overwrite needs no
// new space). Only when neither can be made durable does the reader's
// error say that the damage could not be recorded, naming the run file. A
// read error is not damage, and records nothing.
func TestDamageMetIsRecorded(t *testing.T) {
	forEachTail(t, func(t *testing.T, f *sortedrun.Format) {
		for _, c := range []struct {
			what       string
			hook       func(op vfs.Op, name string) error
			mark, tail bool // recorded after a power loss
		}{
			{"room", nil, true, true},
			{"a disk full for the mark", func(op vfs.Op, name string) error {
				if op == vfs.OpCreate && strings.HasSuffix(name, sortedrun.DamageMark) {
					return syscall.ENOSPC
				}
				return nil
			}, false, true},
			{"nothing written", func(op vfs.Op, name string) error {
				if op == vfs.OpCreate || op == vfs.OpWrite || op == vfs.OpSync {
					return syscall.EIO
				}
				return nil
			}, false, false},
		} {
			t.Run(c.what, func(t *testing.T) {
				mem, _, m := tailRun(t, f, 4)
				name := f.RunName(dir, 4)
				sortedruntest.Patch(t, mem, name, sortedrun.BlockSize+40, 1, func(b []byte) { b[0] ^= 0x40 })
				ff := vfs.NewFaulty(mem)
				r, why, err := f.OpenRunTail(ff, dir, m)
				if r == nil || err != nil {
					t.Fatalf("OpenRunTail: %v %s", err, why)
				}
				defer r.Unref()
				ff.Inject(c.hook)
				err = r.ReadBlocks(1, 2, func([]byte, int) {})
				if !errors.Is(err, f.Corrupt) {
					t.Fatalf("reading the damaged block: %v, want the damage", err)
				}
				if recorded := !strings.Contains(err.Error(), "could not be recorded"); recorded != (c.mark || c.tail) ||
					!recorded && (!errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), name)) {
					t.Fatalf("reading the damaged block: %v; want it recorded: %v", err, c.mark || c.tail)
				}
				img := mem.Crash(nil)
				r2, why, err := f.OpenRunTail(img, dir, m)
				if r2 != nil {
					r2.Unref()
				}
				if withdrawn := r2 == nil && err == nil && strings.Contains(why, "withdrawn"); withdrawn != c.tail {
					t.Fatalf("after a power loss: run %v, %v, %q; want the tail withdrawn: %v", r2 != nil, err, why, c.tail)
				}
				if _, found, err := sortedrun.ReadDamageMark(img, dir); found != c.mark || err != nil {
					t.Fatalf("mark after a power loss: %v %v, want %v", found, err, c.mark)
				}
			})
		}
	})
}

// TestReadErrorRecordsNoDamage: a read that fails (EIO) is not damage: the
// run's tail stays and no mark is written.
func TestReadErrorRecordsNoDamage(t *testing.T) {
	forEachTail(t, func(t *testing.T, f *sortedrun.Format) {
		mem, _, m := tailRun(t, f, 4)
		ff := vfs.NewFaulty(mem)
		r, why, err := f.OpenRunTail(ff, dir, m)
		if r == nil || err != nil {
			t.Fatalf("OpenRunTail: %v %s", err, why)
		}
		defer r.Unref()
		sortedruntest.FailOn(ff, dir, syscall.EIO, vfs.OpRead)
		if err := r.ReadBlocks(1, 2, func([]byte, int) {}); !errors.Is(err, syscall.EIO) || errors.Is(err, f.Corrupt) {
			t.Fatalf("a read that failed: %v, want EIO and no damage", err)
		}
		if r2, why, err := f.OpenRunTail(mem, dir, m); r2 == nil || err != nil {
			t.Fatalf("after a read error the tail is not used: %v %q", err, why)
		} else {
			r2.Unref()
		}
		if _, found, _ := sortedrun.ReadDamageMark(mem, dir); found {
			t.Fatal("a read error left a damage mark")
		}
	})
}
