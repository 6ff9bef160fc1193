package sortedrun_test

import (
	"errors"
	"math/rand/v2"
	"path"
	"syscall"
	"testing"

	"github.com/hourglass-mq/hourglass/sortedrun"
	"github.com/hourglass-mq/hourglass/sortedrun/sortedruntest"
	"github.com/hourglass-mq/hourglass/vfs"
)

// faultyDir returns a Faulty over a Mem with the run directory made.
func faultyDir(t *testing.T) (*vfs.Mem, *vfs.Faulty) {
	t.Helper()
	mem := vfs.NewMem()
	if err := mem.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := mem.SyncDir("."); err != nil {
		t.Fatal(err)
	}
	return mem, vfs.NewFaulty(mem)
}

// failing writes a run large enough to take several writes through a
// Faulty that fails op with err (with a nil err it injects nothing: the
// caller set the fault), and returns WriteRun's result.
func failing(t *testing.T, f *sortedrun.Format, ffs *vfs.Faulty, op vfs.Op, err error) (*sortedrun.Run, error) {
	t.Helper()
	es := randomEntries(rand.New(rand.NewPCG(5, 5)), f, (2*f.Chunk+1)*f.PerBlock())
	if err != nil {
		ffs.FailAfter(op, 0, err)
		defer ffs.Inject(nil)
	}
	return f.WriteRun(ffs, dir, 3, []sortedrun.Source{&slice{es: es}}, nil)
}

// wantNoRun fails unless dir holds no file: a failed job leaves nothing a
// later state could list, and nothing is written twice.
func wantNoRun(t *testing.T, fs vfs.FS) {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil || len(names) != 0 {
		t.Fatalf("files left: %v %v", names, err)
	}
}

// TestWriteErrorLeavesNoFile: a write that fails (EIO, disk full) fails
// the job with that error and deletes its file; the next job, under a new
// sequence number, writes the whole run.
func TestWriteErrorLeavesNoFile(t *testing.T) {
	forEach(t, func(t *testing.T, f *sortedrun.Format) {
		for _, fault := range []error{syscall.EIO, syscall.ENOSPC} {
			_, ffs := faultyDir(t)
			r, err := failing(t, f, ffs, vfs.OpWrite, fault)
			if !errors.Is(err, fault) || r != nil {
				t.Fatalf("write run: %v %v, want %v", r, err, fault)
			}
			if f.SyncFailed != nil && errors.Is(err, f.SyncFailed) {
				t.Fatalf("a failed write is not a failed fsync: %v", err)
			}
			wantNoRun(t, ffs)
			ffs.SetLimit(1)
			if _, err := failing(t, f, ffs, vfs.OpWrite, nil); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("disk full: %v", err)
			}
			ffs.SetLimit(-1)
			wantNoRun(t, ffs)
			es := randomEntries(rand.New(rand.NewPCG(6, 6)), f, 1000)
			ok := writeRun(t, ffs, f, 4, es)
			if got, err := readAll(t, ffs, f, ok.Meta); err != nil || len(got) != len(es) {
				t.Fatalf("the next run: %d entries, %v", len(got), err)
			}
		}
	})
}

// TestSyncFailureLeavesNoFile: a failed fsync of the file or of the
// directory fails the job, wrapping the format's SyncFailed when it has
// one, and the file is deleted: it is never fsynced again and vouched for.
func TestSyncFailureLeavesNoFile(t *testing.T) {
	forEach(t, func(t *testing.T, f *sortedrun.Format) {
		for _, op := range []vfs.Op{vfs.OpSync, vfs.OpSyncDir} {
			_, ffs := faultyDir(t)
			r, err := failing(t, f, ffs, op, syscall.EIO)
			if !errors.Is(err, syscall.EIO) || r != nil {
				t.Fatalf("%v: %v %v, want EIO", op, r, err)
			}
			if f.SyncFailed != nil && !errors.Is(err, f.SyncFailed) {
				t.Fatalf("%v: %v does not wrap %v", op, err, f.SyncFailed)
			}
			wantNoRun(t, ffs)
		}
	})
}

// TestRunSurvivesPowerLoss: once WriteRun returns, the run file and its
// directory entry are durable: a power loss right after keeps every byte.
// Before its fsyncs, a power loss may keep anything of it, which no state
// lists.
func TestRunSurvivesPowerLoss(t *testing.T) {
	forEach(t, func(t *testing.T, f *sortedrun.Format) {
		mem, _ := faultyDir(t)
		es := randomEntries(rand.New(rand.NewPCG(7, 7)), f, 20*f.PerBlock()+1)
		r := writeRun(t, mem, f, 1, es)
		for seed := range uint64(5) {
			img := mem.Crash(rand.New(rand.NewPCG(seed, 1)))
			got, err := readAll(t, img, f, r.Meta)
			if err != nil || len(got) != len(es) {
				t.Fatalf("after a power loss: %d of %d entries, %v", len(got), len(es), err)
			}
		}
	})
}

// TestReadErrorIsNotDamage: an I/O error while a run is read is returned
// as that error, not as damage (damage makes the users rebuild from the
// log; a failing disk must not).
func TestReadErrorIsNotDamage(t *testing.T) {
	forEach(t, func(t *testing.T, f *sortedrun.Format) {
		mem, ffs := faultyDir(t)
		r := writeRun(t, mem, f, 1, randomEntries(rand.New(rand.NewPCG(8, 8)), f, (2*f.Chunk+1)*f.PerBlock()))
		ffs.FailAfter(vfs.OpRead, 1, syscall.EIO)
		_, err := readAll(t, ffs, f, r.Meta)
		if !errors.Is(err, syscall.EIO) || errors.Is(err, f.Corrupt) {
			t.Fatalf("open: %v, want EIO and not damage", err)
		}
		ffs.Inject(nil)
		x, err := f.OpenRun(ffs, dir, r.Meta, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Unref()
		ffs.FailAfter(vfs.OpRead, 0, syscall.EIO)
		if _, err := x.ReadBlock(make([]byte, sortedrun.BlockSize), 1); !errors.Is(err, syscall.EIO) || errors.Is(err, f.Corrupt) {
			t.Fatalf("read block: %v, want EIO", err)
		}
	})
}

// TestDamagedInputFailsMerge: a merge whose input run is damaged fails
// with the damage and leaves no output file, only the input and the mark
// that records its damage.
func TestDamagedInputFailsMerge(t *testing.T) {
	forEach(t, func(t *testing.T, f *sortedrun.Format) {
		mem, _ := faultyDir(t)
		in := writeRun(t, mem, f, 1, randomEntries(rand.New(rand.NewPCG(9, 9)), f, 3*f.PerBlock()))
		sortedruntest.Patch(t, mem, in.Name, 2*sortedrun.BlockSize+100, 1, func(b []byte) { b[0]++ })
		fresh := randomEntries(rand.New(rand.NewPCG(10, 10)), f, 50)
		r, err := f.WriteRun(mem, dir, 2, []sortedrun.Source{&slice{es: fresh}, in.NewIter(in.Meta)}, nil)
		wantCorrupt(t, f, err, in.Name, 2*sortedrun.BlockSize)
		if r != nil {
			t.Fatal("a run from a damaged input")
		}
		if names, _ := mem.List(dir); len(names) != 2 || names[0] != path.Base(in.Name) || names[1] != sortedrun.DamageMark {
			t.Fatalf("files %v, want the input and the damage mark", names)
		}
	})
}

// TestWalkGoesOn: Walk reports one damage per damaged run and walks the
// others whole, each entry at its offset; a missing file is damage too,
// and a damaged state is one damage with nothing walked.
func TestWalkGoesOn(t *testing.T) {
	forEach(t, func(t *testing.T, f *sortedrun.Format) {
		mem, _ := faultyDir(t)
		rng := rand.New(rand.NewPCG(11, 11))
		var st sortedrun.State
		runs := map[string][][]byte{}
		for seq := range uint64(4) {
			es := randomEntries(rng, f, (int(seq)+1)*f.PerBlock()/2)
			r := writeRun(t, mem, f, seq+1, es)
			st.Runs = append(st.Runs, r.Meta)
			runs[r.Name] = es
		}
		st.NextSeq = 5
		sortedruntest.Patch(t, mem, f.RunName(dir, 2), 10, 1, func(b []byte) { b[0]++ })
		if err := mem.Remove(f.RunName(dir, 3)); err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		listed, damage, err := f.Walk(vfs.ReadOnly(mem), dir, f.EncodeState(st), func(name string, off int64, m sortedrun.Meta, e []byte) error {
			i := seen[name]
			if want := int64(i/f.PerBlock()*sortedrun.BlockSize + i%f.PerBlock()*f.EntrySize); off != want || string(e) != string(runs[name][i]) {
				t.Fatalf("%s entry %d at %d, want %d", name, i, off, want)
			}
			seen[name]++
			return nil
		})
		if err != nil || len(listed) != 4 || len(damage) != 2 {
			t.Fatalf("walk: %v listed, damage %v, %v", listed, damage, err)
		}
		for _, seq := range []uint64{1, 4} {
			if name := f.RunName(dir, seq); seen[name] != len(runs[name]) {
				t.Fatalf("%s: %d of %d entries walked", name, seen[name], len(runs[name]))
			}
		}
		bad := f.EncodeState(st)
		bad[9] ^= 1
		if listed, damage, err := f.Walk(mem, dir, bad, nil); listed != nil || len(damage) != 1 || err != nil {
			t.Fatalf("damaged state: %v %v %v", listed, damage, err)
		}
	})
}
