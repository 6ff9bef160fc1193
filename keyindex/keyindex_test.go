package keyindex

import (
	"testing"

	"github.com/hourglass-mq/hourglass/vfs"
)

// TestLatestWins: Get answers the greatest position wherever it stands:
// memtable, frozen memtable, or a run, including a newer run holding a
// smaller position than an older one (senders Put in lock order).
func TestLatestWins(t *testing.T) {
	fs := vfs.NewMem()
	x := openAt(t, fs, nil)
	x.Put(1, 100)
	x.Put(2, 200)
	x.Put(1, 50) // an earlier message whose Put came late: loses
	wantGet(t, x, 1, 100)
	checkpoint(t, x)
	x.Put(2, 150) // smaller than the run's 200, in a newer run
	x.Put(3, 300)
	j, err := x.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	x.Put(3, 310) // after Prepare: memtable, not the job's
	wantGet(t, x, 2, 200)
	wantGet(t, x, 3, 310)
	st, err := x.Complete(j, j.Run())
	if err != nil {
		t.Fatal(err)
	}
	wantGet(t, x, 1, 100)
	wantGet(t, x, 2, 200)
	wantGet(t, x, 4, 0)
	x.Close()
	y := openAt(t, fs, st)
	wantGet(t, y, 2, 200)
	wantGet(t, y, 3, 300) // the Put after Prepare is the log's to replay
}

// TestFrozenReadable: between Prepare and Complete the frozen memtable
// answers, and the run answers after.
func TestFrozenReadable(t *testing.T) {
	x := openAt(t, vfs.NewMem(), nil)
	for i := range 1000 {
		x.Put(spread(i), uint64(i+1))
	}
	j, err := x.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	if s := x.Stats(); s.Memtable != 1000 || s.Runs != 0 {
		t.Fatalf("stats after prepare: %+v", s)
	}
	wantGet(t, x, spread(7), 8)
	err = j.Run()
	wantGet(t, x, spread(7), 8)
	if _, err := x.Complete(j, err); err != nil {
		t.Fatal(err)
	}
	if s := x.Stats(); s.Memtable != 0 || s.Runs != 1 || s.RunEntries != 1000 || s.IndexBytes != 8*4 {
		t.Fatalf("stats after complete: %+v", s)
	}
	for i := range 1000 {
		wantGet(t, x, spread(i), uint64(i+1))
	}
}

// TestPickMerge pins the merge policy.
func TestPickMerge(t *testing.T) {
	for _, c := range []struct {
		sizes []uint64
		fresh uint64
		want  int
	}{
		{nil, 10, 0},
		{[]uint64{100}, 10, 0},                          // 100 > 2*10
		{[]uint64{20}, 10, 1},                           // 20 <= 2*10
		{[]uint64{1000, 50, 20}, 10, 2},                 // 20, then 50 <= 2*30; 1000 > 160
		{[]uint64{6e6, 5e5, 4e4, 3e3, 200, 100}, 10, 2}, // six runs: 100 must go, then 200 <= 2*110
		{[]uint64{6e6, 5e5, 4e4, 3e3, 200}, 10, 0},
	} {
		if got := pickMerge(c.sizes, c.fresh); got != c.want {
			t.Errorf("pickMerge(%v, %d) = %d, want %d", c.sizes, c.fresh, got, c.want)
		}
	}
}

// TestMergeKeepsRunsFew: many checkpoints leave at most maxRuns runs, one
// entry per hash after a merge, every key answering its latest position.
func TestMergeKeepsRunsFew(t *testing.T) {
	fs := vfs.NewMem()
	x := openAt(t, fs, nil)
	model := map[uint64]uint64{}
	pos := uint64(0)
	var st []byte
	for c := range 60 {
		for i := range 100 {
			pos++
			h := spread((c*37 + i) % 1500) // keys repeat across checkpoints
			x.Put(h, pos)
			model[h] = pos
		}
		st = checkpoint(t, x)
		if s := x.Stats(); s.Runs > maxRuns {
			t.Fatalf("checkpoint %d: %d runs", c, s.Runs)
		}
		if n := len(runFiles(t, fs)); n != x.Stats().Runs {
			t.Fatalf("checkpoint %d: %d files for %d runs", c, n, x.Stats().Runs)
		}
	}
	if s := x.Stats(); s.RunEntries >= uint64(len(model))*2 {
		t.Fatalf("%d entries for %d keys: merges keep superseded ones", s.RunEntries, len(model))
	}
	y := openAt(t, fs, st)
	for h, p := range model {
		wantGet(t, y, h, p)
	}
}

// TestMinPosDropsAtMerge: entries below the minimum position are dropped
// by the next merge that reads them; a merge that keeps nothing writes no
// file.
func TestMinPosDropsAtMerge(t *testing.T) {
	fs := vfs.NewMem()
	x := openAt(t, fs, nil)
	x.Put(1, 10)
	x.Put(2, 20)
	checkpoint(t, x)
	x.SetMinPos(15)
	x.SetMinPos(5) // never lowers it
	x.Put(3, 30)
	checkpoint(t, x) // merges the first run (1 entry <= 2*1... 2 <= 2)
	wantGet(t, x, 1, 0)
	wantGet(t, x, 2, 20)
	if s := x.Stats(); s.RunEntries != 2 || s.Runs != 1 {
		t.Fatalf("stats %+v", s)
	}
	x.SetMinPos(100)
	x.Put(4, 40)
	st := checkpoint(t, x)
	if s := x.Stats(); s.Runs != 0 || len(runFiles(t, fs)) != 0 {
		t.Fatalf("all below min: stats %+v, files %v", s, runFiles(t, fs))
	}
	wantGet(t, openAt(t, fs, st), 2, 0)
}

// TestReset empties the index; the old files stay until a Release.
func TestReset(t *testing.T) {
	fs, x, old := oneKey(t)
	x.Put(2, 20)
	if err := x.Reset(); err != nil {
		t.Fatal(err)
	}
	wantGet(t, x, 1, 0)
	wantGet(t, x, 2, 0)
	x.Put(3, 30)
	st, j := complete(t, x)
	openAt(t, fs.Clone(), old) // the last durable state still opens
	if err := x.Release(j); err != nil {
		t.Fatal(err)
	}
	if files := runFiles(t, fs); len(files) != 1 {
		t.Fatalf("files after release: %v", files)
	}
	y := openAt(t, fs, st)
	wantGet(t, y, 1, 0)
	wantGet(t, y, 3, 30)
}

// TestBusy: one job at a time.
func TestBusy(t *testing.T) {
	x := openAt(t, vfs.NewMem(), nil)
	j, err := x.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Prepare(); err != ErrBusy {
		t.Fatalf("second prepare: %v", err)
	}
	if err := x.Reset(); err != ErrBusy {
		t.Fatalf("reset during a job: %v", err)
	}
	if _, err := x.Complete(j, nil); err == nil {
		t.Fatal("complete of a job that did not run succeeded")
	}
	if _, err := x.Complete(j, nil); err == nil {
		t.Fatal("second complete succeeded")
	}
}
