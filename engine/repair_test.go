package engine

import (
	"path"
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// copyFiles copies every file under dir of src whose path pick accepts
// into dst, replacing what dst has there.
func copyFiles(t *testing.T, src, dst vfs.FS, dir string, pick func(string) bool) {
	t.Helper()
	names, err := src.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		p := path.Join(dir, n)
		if _, err := src.List(p); err == nil {
			copyFiles(t, src, dst, p, pick)
			continue
		}
		if !pick(p) {
			continue
		}
		f, err := src.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		size, _ := f.Size()
		b := make([]byte, size)
		f.ReadAt(b, 0)
		f.Close()
		if err := dst.MkdirAll(dir); err != nil {
			t.Fatal(err)
		}
		g, err := dst.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		g.WriteAt(b, 0)
		g.Sync()
		g.Close()
		dst.SyncDir(dir)
	}
}

// piecemeal returns a copy of a broker's data directory made file by file
// while it ran: the files pick accepts are from the later moment.
func piecemeal(t *testing.T, pick func(string) bool) (*harness, *vfs.Mem) {
	h := newHarness(t, func(o *Options) { o.SegmentBytes = 4096 })
	h.sendVisible("t", 40)
	if err := h.e.checkpoint(); err != nil {
		t.Fatal(err)
	}
	early := h.fs.Clone()
	for range 80 {
		h.send("t", "", message.When{})
	}
	h.waitVisible("t", 120)
	if err := h.e.checkpoint(); err != nil {
		t.Fatal(err)
	}
	late := h.fs.Clone()
	copyFiles(t, late, early, h.opt.Dir, pick)
	return h, early
}

// TestRepairReportsPiecemealCopy is issue 29's defect 8: a data directory
// copied file by file from a running broker (the log from one moment, the
// checkpoint or a queue index from a later one) makes recovery refuse, and
// repair said "no damage". Now Repair mends the log (there is nothing to
// mend) and reports what Check finds left, which it does not mend.
func TestRepairReportsPiecemealCopy(t *testing.T) {
	for _, tc := range []struct {
		name string
		late func(string) bool
		want string
	}{
		{"checkpoint after the log", func(p string) bool { return strings.HasSuffix(p, checkpointFile) }, "is outside the log"},
		{"queue index before its checkpoint", func(p string) bool { return !strings.Contains(p, "/queues/") }, "the checkpoint recorded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, img := piecemeal(t, tc.late)
			opt := h.opt
			opt.FS = img
			if e, err := Open(opt); err == nil {
				e.Close()
				t.Fatal("the broker started on a piecemeal copy; the fixture is not one")
			}
			rep, err := Repair(img, h.opt.Dir, commitlog.RepairSalvage)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Ranges) != 0 || !rep.Checked || len(rep.Remaining) == 0 || !strings.Contains(rep.Remaining[0].What, tc.want) {
				t.Fatalf("repair of a piecemeal copy: %+v", rep)
			}
		})
	}
}

// TestRepairOfDamageLeavesNothing: after Repair quarantines a damaged
// message record of a whole data directory, Check finds nothing left (the
// queue entry that points at it is the data_loss a receive will answer,
// not a problem), and the broker starts.
func TestRepairOfDamageLeavesNothing(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.SegmentBytes = 4096 })
	h.sendVisible("t", 50)
	if err := h.e.Close(); err != nil {
		t.Fatal(err)
	}
	h.e = nil
	pos, _ := h.damageRecord(7, 30)
	rep, err := Repair(h.fs, h.opt.Dir, commitlog.RepairSalvage)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Ranges) != 1 || rep.Ranges[0].Pos != commitlog.Pos(pos) || !rep.Checked || len(rep.Remaining) != 0 {
		t.Fatalf("repair: %+v", rep)
	}
	h.open()
}
