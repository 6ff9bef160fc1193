package keyindex

import (
	"testing"

	"github.com/hourglass-mq/hourglass/sortedrun/sortedruntest"
	"github.com/hourglass-mq/hourglass/vfs"
)

// The fixture under testdata/def821c is a key index directory and its
// state written by the code of commit def821c, the last one before the
// run format moved to package sortedrun. Run files and states are durable
// formats: the current code must open it unchanged, and must write the
// same bytes from the same Puts. Never regenerate it to make a change
// pass; regenerate only with the code it is named after:
//
//	go test ./keyindex -run TestWriteFixture -args -update
var fixture = sortedruntest.Fixture{Dir: "testdata/def821c", Runs: "keys"}

// fixturePuts is what the fixture's index was given, one checkpoint per
// slice: 2000 keys (eight blocks), then 300, so few that they stay a run
// of their own, of which 100 give keys of the first a greater position,
// 100 a smaller one and 100 are new.
func fixturePuts() [][][2]uint64 {
	var first, second [][2]uint64
	for i := range 2000 {
		first = append(first, [2]uint64{spread(i), uint64(i + 1)})
	}
	for i := range 100 {
		second = append(second, [2]uint64{spread(i), uint64(5000 + i)}, [2]uint64{spread(100 + i), 0}, [2]uint64{spread(3000 + i), uint64(7000 + i)})
	}
	return [][][2]uint64{first, second}
}

// writeFixture builds the fixture's index in dir on the OS and returns its
// state.
func writeFixture(t *testing.T, dir string) []byte {
	x, err := Open(vfs.OS, dir, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	var st []byte
	for _, batch := range fixturePuts() {
		for _, p := range batch {
			x.Put(p[0], p[1])
		}
		st = checkpoint(t, x)
	}
	return st
}

// TestWriteFixture rewrites the fixture with -update.
func TestWriteFixture(t *testing.T) {
	fixture.Update(t, func(dir string) []byte { return writeFixture(t, dir) })
}

// TestOpenFixture: the current code opens the index def821c wrote, in two
// runs, and answers every key with its greatest position.
func TestOpenFixture(t *testing.T) {
	mem, st := fixture.CopyTo(t, dir)
	x := openAt(t, mem, st)
	if s := x.Stats(); s.Runs != 2 || s.RunEntries != 2300 {
		t.Fatalf("stats %+v, the fixture has 2 runs of 2300 entries", s)
	}
	want := map[uint64]uint64{}
	for _, batch := range fixturePuts() {
		for _, p := range batch {
			if cur, ok := want[p[0]]; !ok || p[1] > cur {
				want[p[0]] = p[1]
			}
		}
	}
	for h, pos := range want {
		wantGet(t, x, h, pos)
	}
	if _, ok, err := x.Get(spread(5000)); ok || err != nil {
		t.Fatalf("a key never put: %v %v", ok, err)
	}
}

// TestFixtureBytes: the current code writes, from the same Puts, the very
// bytes def821c wrote: the run files and the state.
func TestFixtureBytes(t *testing.T) {
	d := t.TempDir()
	fixture.SameAs(t, d, writeFixture(t, d))
}
