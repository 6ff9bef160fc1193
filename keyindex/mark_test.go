package keyindex

import (
	"errors"
	"path"
	"strings"
	"syscall"
	"testing"

	"github.com/hourglass-mq/hourglass/sortedrun/sortedruntest"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestVerifyDamageOutlivesAFailedMark: when Verify finds damage in a run
// Open took from its tail and the damage mark cannot be written (a full
// disk, a failed fsync), the next Open of the state still does not trust
// the run: it reads it whole and refuses it, naming the run file and the
// damaged block, so that the caller rebuilds the index.
func TestVerifyDamageOutlivesAFailedMark(t *testing.T) {
	for _, c := range sortedruntest.MarkFaults {
		t.Run(c.What, func(t *testing.T) {
			mem, st := threeBlocks(t)
			name := runName(dir, 1)
			sortedruntest.Patch(t, mem, name, BlockSize+7, 1, func(b []byte) { b[0] ^= 4 })
			ff := vfs.NewFaulty(mem)
			x := openAt(t, ff, st)
			if !fromTail(x) {
				t.Fatal("not opened from the tail")
			}
			sortedruntest.FailOn(ff, damageMark, c.Err, c.Ops...)
			if err := x.Verify(nil); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Verify: %v, want the damage", err)
			}
			x.Close()
			_, err := Open(mem.Crash(nil), dir, st, 0)
			wantCorrupt(t, err, name, BlockSize)
		})
	}
}

// TestVerifySaysWhenDamageCannotBeRecorded: when nothing can record the
// damage, Verify says so, naming the run file: the next Open may trust
// the run's tail again.
func TestVerifySaysWhenDamageCannotBeRecorded(t *testing.T) {
	mem, st := threeBlocks(t)
	name := runName(dir, 1)
	sortedruntest.Patch(t, mem, name, BlockSize+7, 1, func(b []byte) { b[0] ^= 4 })
	ff := vfs.NewFaulty(mem)
	x := openAt(t, ff, st)
	sortedruntest.FailOn(ff, dir+"/", syscall.EIO, vfs.OpCreate, vfs.OpWrite, vfs.OpSync, vfs.OpSyncDir)
	err := x.Verify(nil)
	if !errors.Is(err, ErrCorrupt) || !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "could not be recorded") ||
		!strings.Contains(err.Error(), path.Clean(name)) {
		t.Fatalf("Verify: %v, want the damage and why it could not be recorded, naming %s", err, name)
	}
}
