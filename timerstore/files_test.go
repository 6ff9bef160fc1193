package timerstore

import (
	"errors"
	"path"
	"testing"

	"github.com/hourglass-mq/hourglass/sortedrun/sortedruntest"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestCheckpointWritesOneFile: timers spread over 30 days of one-minute
// buckets are one run file, not a file per bucket (the point of the
// layout), and they load back bucket by bucket.
func TestCheckpointWritesOneFile(t *testing.T) {
	mem := vfs.NewMem()
	s, err := Open(mem, dir, 60_000, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 43_200 // one a minute for 30 days
	for i := range int64(n) {
		s.Add(entry(i*60_000+i%60_000, uint64(i+1)))
	}
	checkpoint(t, s)
	if files := runFiles(t, mem); len(files) != 1 {
		t.Fatalf("%d files after the checkpoint, want 1: %v", len(files), files[:min(5, len(files))])
	}
	if nb, _ := s.Buckets(); nb != n {
		t.Fatalf("%d buckets, want %d", nb, n)
	}
	for _, i := range []int64{0, 1, 170, 171, n / 2, n - 1} {
		es, err := s.Load(i * 60_000)
		if err != nil || len(es) != 1 || es[0] != entry(i*60_000+i%60_000, uint64(i+1)) {
			t.Fatalf("bucket %d: %v %v", i, es, err)
		}
	}
}

// TestRunsStayFew: a checkpoint a second for a long time keeps the run set
// small (merges), and what is loaded and removed is given back.
func TestRunsStayFew(t *testing.T) {
	mem := vfs.NewMem()
	s := open(t, mem, nil)
	pos := uint64(0)
	for round := range int64(500) {
		for i := range int64(50) {
			pos++
			s.Add(entry(round*width+(i*37)%(300*width), pos))
		}
		checkpoint(t, s)
		if s.Runs() > maxRuns {
			t.Fatalf("round %d: %d runs", round, s.Runs())
		}
		s.Remove(round * width)
	}
	if files := runFiles(t, mem); len(files) != s.Runs() {
		t.Fatalf("%d files for %d runs: %v", len(files), s.Runs(), files)
	}
	// Everything before round 499's bucket is dead: at most the live part
	// and a run's worth of dead blocks are kept.
	_, bytes := s.Buckets()
	if live := int64(300 * 50 * EntrySize); bytes > 4*live+int64(maxRuns)*BlockSize {
		t.Fatalf("%d bytes kept for about %d live", bytes, live)
	}
}

// TestOpenChecksEveryRun: damage in a listed run Open reads whole, or in
// the state, is an ErrCorrupt naming the file; a nil state then opens an empty store and
// deletes every file.
func TestOpenChecksEveryRun(t *testing.T) {
	build := func(t *testing.T) (*vfs.Mem, []byte, string) {
		mem := vfs.NewMem()
		s := open(t, mem, nil)
		for i := range uint64(400) {
			s.Add(entry(int64(i)*10, i+1))
		}
		st := checkpoint(t, s)
		s.Close()
		return mem, st, path.Join(dir, runFiles(t, mem)[0])
	}
	damage := map[string]func(t *testing.T, mem *vfs.Mem, name string, st []byte) []byte{
		"flipped byte": func(t *testing.T, mem *vfs.Mem, name string, st []byte) []byte {
			sortedruntest.Patch(t, mem, name, 5000, 1, func(b []byte) { b[0] ^= 0x10 })
			return st
		},
		"cut file": func(t *testing.T, mem *vfs.Mem, name string, st []byte) []byte {
			sortedruntest.Truncate(t, mem, name, BlockSize)
			return st
		},
		"missing file": func(t *testing.T, mem *vfs.Mem, name string, st []byte) []byte {
			if err := mem.Remove(name); err != nil {
				t.Fatal(err)
			}
			return st
		},
		"damaged state": func(t *testing.T, mem *vfs.Mem, name string, st []byte) []byte {
			st[10] ^= 1
			return st
		},
	}
	for what, fn := range damage {
		t.Run(what, func(t *testing.T) {
			mem, st, name := build(t)
			st = fn(t, mem, name, st)
			// With a visit, Open reads every run whole (without one it
			// reads two blocks of each: TestEachFindsDamage).
			_, err := Open(mem, dir, width, st, func(Entry) {})
			var ce *CorruptError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) {
				t.Fatalf("open: %v, want ErrCorrupt", err)
			}
			s := open(t, mem, nil)
			if files := runFiles(t, mem); len(files) != 0 || s.Runs() != 0 {
				t.Fatalf("after a nil state: files %v, %d runs", files, s.Runs())
			}
		})
	}
}

// TestOpenDeletesOtherFiles: the bucket files of the layout before and runs
// the state does not list are deleted; listed runs are kept.
func TestOpenDeletesOtherFiles(t *testing.T) {
	mem := vfs.NewMem()
	s := open(t, mem, nil)
	s.Add(entry(5, 1))
	st := checkpoint(t, s)
	s.Add(entry(6, 2))
	// A run this state does not list: its checkpoint never became durable,
	// so the run it replaced was not released.
	j, err := s.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(j, j.Run()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, n := range []string{"60000.tb", "x.tmp"} {
		f, err := mem.Create(path.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	s = open(t, mem, st)
	if files := runFiles(t, mem); len(files) != 1 || files[0] != "0000000000000001.tr" {
		t.Fatalf("files %v", files)
	}
	if es := load(t, s, 0); len(es) != 1 || es[0].Pos != 1 {
		t.Fatalf("bucket 0: %v", es)
	}
}

// TestPlanOutlivesRelease: a load plan taken before a merge replaced its
// run still reads it after the release.
func TestPlanOutlivesRelease(t *testing.T) {
	mem := vfs.NewMem()
	s := open(t, mem, nil)
	s.Add(entry(5, 1))
	checkpoint(t, s)
	plan := s.LoadPlan(0)
	s.Add(entry(7, 2))
	checkpoint(t, s) // merges the first run into the second
	if files := runFiles(t, mem); len(files) != 1 || files[0] != "0000000000000002.tr" {
		t.Fatalf("files %v", files)
	}
	es, err := plan.Read()
	if err != nil || len(es) != 1 || es[0].Pos != 1 {
		t.Fatalf("plan: %v %v", es, err)
	}
	if es := load(t, s, 0); len(es) != 2 {
		t.Fatalf("bucket 0: %v", es)
	}
}

// TestRemoveWhileAJobRuns: a Remove under the owner's lock while a Job
// runs without it (the race detector's business), and the cut reaches the
// job's output.
func TestRemoveWhileAJobRuns(t *testing.T) {
	mem := vfs.NewMem()
	s := open(t, mem, nil)
	for i := range uint64(2000) {
		s.Add(entry(int64(i)*width/4, i+1))
	}
	checkpoint(t, s)
	s.Add(entry(10*width, 9999))
	j, err := s.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- j.Run() }()
	s.Remove(100 * width)
	if _, err := s.Complete(j, <-done); err != nil {
		t.Fatal(err)
	}
	if es := load(t, s, 10*width); len(es) != 0 {
		t.Fatalf("a bucket the Remove forgot still loads %d entries", len(es))
	}
	if es := load(t, s, 200*width); len(es) != 4 {
		t.Fatalf("bucket 200: %d entries, want 4", len(es))
	}
}

// TestClosedStoreTakesNoJob: after Close a checkpoint cannot record an
// empty run set, which would make the next Open delete every run.
func TestClosedStoreTakesNoJob(t *testing.T) {
	s := open(t, vfs.NewMem(), nil)
	s.Close()
	if _, err := s.Prepare(); !errors.Is(err, ErrClosed) {
		t.Fatalf("prepare after close: %v", err)
	}
}
