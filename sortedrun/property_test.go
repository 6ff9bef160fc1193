package sortedrun_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hourglass-mq/hourglass/sortedrun"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestMergeModel merges random runs and fresh entries, sharing keys and
// whole entries across sources, through a random filter, and checks the
// output run against a model: its entries, its sparse index, and what
// OpenRun, an iterator, ReadBlocks and Walk read back.
func TestMergeModel(t *testing.T) {
	forEach(t, func(t *testing.T, f *sortedrun.Format) {
		for seed := range uint64(30) {
			t.Run(fmt.Sprint(seed), func(t *testing.T) { mergeModel(t, f, seed) })
		}
	})
}

func mergeModel(t *testing.T, f *sortedrun.Format, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 13))
	mem, _ := faultyDir(t)
	pool := randomEntries(rng, f, 1+rng.IntN(3*f.PerBlock()))
	pick := func(n int) [][]byte {
		var es [][]byte
		for range n {
			e := slices.Clone(pool[rng.IntN(len(pool))])
			if rng.IntN(3) == 0 { // the same key, another entry
				copy(e[f.KeySize:], randomEntry(rng, f)[f.KeySize:])
			}
			es = append(es, e)
		}
		return model(f, es, nil)
	}
	var srcs []sortedrun.Source
	var all [][]byte
	for seq := range uint64(rng.IntN(4)) {
		es := pick(1 + rng.IntN(2*f.PerBlock()))
		r := writeRun(t, mem, f, seq+1, es)
		srcs = append(srcs, r.NewIter(r.Meta))
		all = append(all, es...)
	}
	fresh := pick(rng.IntN(f.PerBlock()))
	srcs = append(srcs, &slice{es: fresh})
	all = append(all, fresh...)
	bit := byte(1) << rng.IntN(8)
	keep := func(e []byte) bool { return e[f.EntrySize-1]&bit == 0 }
	if rng.IntN(3) == 0 {
		keep = nil
	}
	want := model(f, all, keep)
	r, err := f.WriteRun(mem, dir, 10, srcs, keep)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		if r != nil {
			t.Fatalf("a run of %d entries from nothing", r.Entries)
		}
		if _, err := mem.Open(f.RunName(dir, 10)); !vfs.IsNotExist(err) {
			t.Fatalf("an empty merge left a file: %v", err)
		}
		return
	}
	defer r.Unref()
	checkRun(t, mem, f, r, want)
}

// checkRun checks r against its entries, through every reader.
func checkRun(t *testing.T, fs vfs.FS, f *sortedrun.Format, r *sortedrun.Run, want [][]byte) {
	t.Helper()
	if r.Entries != uint64(len(want)) || len(r.First) != int(f.Blocks(r.Meta)) || r.Last != sortedrun.Lead(want[len(want)-1]) {
		t.Fatalf("run of %d entries, %d blocks, last %x; want %d entries", r.Entries, len(r.First), r.Last, len(want))
	}
	for i, lead := range r.First {
		if lead != sortedrun.Lead(want[i*f.PerBlock()]) {
			t.Fatalf("sparse index %d: %x", i, lead)
		}
	}
	got, err := readAll(t, fs, f, r.Meta)
	if err != nil || !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("OpenRun read %d entries (%v), want %d", len(got), err, len(want))
	}
	var blocks [][]byte
	err = r.ReadBlocks(0, len(r.First), func(b []byte, n int) {
		for i := range n {
			blocks = append(blocks, slices.Clone(f.Entry(b, i)))
		}
	})
	if err != nil || !slices.EqualFunc(blocks, want, slices.Equal) {
		t.Fatalf("ReadBlocks read %d entries (%v), want %d", len(blocks), err, len(want))
	}
	st := f.EncodeState(sortedrun.State{NextSeq: r.Seq + 1, Runs: []sortedrun.Meta{r.Meta}})
	n := 0
	_, damage, err := f.Walk(fs, dir, st, func(_ string, _ int64, _ sortedrun.Meta, e []byte) error {
		if !slices.Equal(e, want[n]) {
			t.Fatalf("Walk entry %d differs", n)
		}
		n++
		return nil
	})
	if err != nil || damage != nil || n != len(want) {
		t.Fatalf("Walk: %d entries, %v %v", n, damage, err)
	}
}

// TestWriterRefusesDisorder: an entry that sorts before the last one is an
// error of the writer, not a run out of order; one with the last one's
// key after it is skipped.
func TestWriterRefusesDisorder(t *testing.T) {
	forEach(t, func(t *testing.T, f *sortedrun.Format) {
		es := randomEntries(rand.New(rand.NewPCG(14, 14)), f, 3)
		mem, _ := faultyDir(t)
		r, err := f.WriteRun(mem, dir, 1, []sortedrun.Source{&slice{es: [][]byte{es[0], es[2], es[1]}}}, nil)
		if err == nil || r != nil {
			t.Fatalf("out of order: %v %v", r, err)
		}
		wantNoRun(t, mem)
		r = writeRun(t, mem, f, 2, [][]byte{es[0], es[1], es[1], es[2]})
		checkRun(t, mem, f, r, es)
	})
}

// TestTier: the size-tiered policy's bounds, on random run sets: at most
// maxRuns runs after the job, the run it stops at is larger than ratio
// times what it gathered, and nothing is merged without a reason.
func TestTier(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 15))
	for range 2000 {
		sizes := make([]uint64, rng.IntN(12))
		for i := range sizes {
			sizes[i] = 1 + rng.Uint64N(1<<uint(1+rng.IntN(30)))
		}
		fresh := rng.Uint64N(1 << 20)
		ratio, maxRuns := uint64(1+rng.IntN(3)), 2+rng.IntN(8)
		k := sortedrun.Tier(sizes, fresh, ratio, maxRuns)
		if k < 0 || k > len(sizes) || len(sizes) >= maxRuns && len(sizes)-k+1 > maxRuns {
			t.Fatalf("Tier(%v, %d, %d, %d) = %d", sizes, fresh, ratio, maxRuns, k)
		}
		acc := fresh
		for _, s := range sizes[len(sizes)-k:] {
			acc += s
		}
		if k < len(sizes) && len(sizes)-k < maxRuns && sizes[len(sizes)-k-1] <= ratio*acc {
			t.Fatalf("Tier(%v, %d, %d, %d) = %d stops at a run it should absorb", sizes, fresh, ratio, maxRuns, k)
		}
	}
	if k := sortedrun.Tier([]uint64{1000, 50, 20}, 10, 2, 6); k != 2 {
		t.Fatalf("20, then 50 <= 2*30, then 1000 > 160: %d", k)
	}
}
