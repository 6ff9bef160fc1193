package sortedrun_test

import (
	"errors"
	"path"
	"strings"
	"syscall"
	"testing"

	"github.com/hourglass-mq/hourglass/sortedrun"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestMarkDamagedWithdrawsTheTail: MarkDamaged withdraws the run's tail
// durably and writes the mark; on a disk too full for the mark the
// withdrawal alone holds (an overwrite needs no new space), and after a
// power loss the tail is still not used: OpenRunTail says it was
// withdrawn and the caller reads the run whole. Only when neither can be
// made durable is there an error, and it names the run file.
func TestMarkDamagedWithdrawsTheTail(t *testing.T) {
	forEachTail(t, func(t *testing.T, f *sortedrun.Format) {
		damage := errors.New("block 1 fails its check")
		for _, c := range []struct {
			what   string
			hook   func(op vfs.Op, name string) error
			failed bool
		}{
			{"room", nil, false},
			{"a disk full for the mark", func(op vfs.Op, name string) error {
				if op == vfs.OpCreate && strings.HasSuffix(name, sortedrun.DamageMark) {
					return syscall.ENOSPC
				}
				return nil
			}, false},
			{"nothing written", func(op vfs.Op, name string) error {
				if op == vfs.OpCreate || op == vfs.OpWrite || op == vfs.OpSync {
					return syscall.EIO
				}
				return nil
			}, true},
		} {
			t.Run(c.what, func(t *testing.T) {
				mem, _, m := tailRun(t, f, 4)
				ff := vfs.NewFaulty(mem)
				r, why, err := f.OpenRunTail(ff, dir, m)
				if r == nil || err != nil {
					t.Fatalf("OpenRunTail: %v %s", err, why)
				}
				defer r.Unref()
				ff.Inject(c.hook)
				err = r.MarkDamaged(ff, dir, damage)
				if c.failed {
					if err == nil || !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), r.Name) {
						t.Fatalf("MarkDamaged with nothing written: %v, want an error naming %s", err, r.Name)
					}
					return
				}
				if err != nil {
					t.Fatalf("MarkDamaged: %v", err)
				}
				img := mem.Crash(nil)
				if r, why, err := f.OpenRunTail(img, dir, m); r != nil || err != nil || !strings.Contains(why, "withdrawn") {
					t.Fatalf("after MarkDamaged and a power loss: run %v, %v, %q; want the tail withdrawn", r, err, why)
				}
				what, found, err := sortedrun.ReadDamageMark(img, dir)
				if wantMark := c.hook == nil; found != wantMark || err != nil || found && what != damage.Error() {
					t.Fatalf("mark after a power loss: %q %v %v, want it %v", what, found, err, wantMark)
				}
				if _, err := img.Open(path.Join(dir, sortedrun.DamageMark)); c.hook != nil && !vfs.IsNotExist(err) {
					t.Fatalf("a mark on a full disk: %v", err)
				}
			})
		}
	})
}
