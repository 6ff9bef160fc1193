package timerstore

import (
	"slices"
	"testing"

	"github.com/hourglass-mq/hourglass/sortedrun/sortedruntest"
	"github.com/hourglass-mq/hourglass/vfs"
)

// The fixture under testdata/def821c is a timer directory and its state
// written by the code of commit def821c, the last one before the run
// format moved to package sortedrun. Run files and states are durable
// formats: the current code must open it unchanged, and must write the
// same bytes from the same Adds. Never regenerate it to make a change
// pass; regenerate only with the code it is named after:
//
//	go test ./timerstore -run TestWriteFixture -args -update
var fixture = sortedruntest.Fixture{Dir: "testdata/def821c", Runs: "timers"}

// fixtureCut is the time of the fixture's Remove: buckets ending at or
// before it are forgotten.
const fixtureCut = 2 * width

// fixtureAdds is what the fixture's store was given: a first checkpoint
// of 2000 timers over buckets -2..35 (negative due times too), a second
// of 110 more, 10 of them repeating a (due, pos) pair of the first, so
// small that it stays a run of its own, then a Remove of fixtureCut and a
// third checkpoint: two runs, each with entries below its deadBelow.
func fixtureAdds() (first, second []Entry) {
	for i := range 2000 {
		first = append(first, entry(int64(i*19)-2*width, uint64(i+1)))
	}
	for i := range 100 {
		second = append(second, entry(int64(i*37)+width, uint64(5000+i)))
	}
	second = append(second, first[1990:]...)
	return first, second
}

// writeFixture builds the fixture's store in dir on the OS and returns its
// state.
func writeFixture(t *testing.T, dir string) []byte {
	s, err := Open(vfs.OS, dir, width, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, second := fixtureAdds()
	for _, e := range first {
		s.Add(e)
	}
	checkpoint(t, s)
	for _, e := range second {
		s.Add(e)
	}
	checkpoint(t, s)
	s.Remove(fixtureCut)
	return checkpoint(t, s)
}

// TestWriteFixture rewrites the fixture with -update.
func TestWriteFixture(t *testing.T) {
	fixture.Update(t, func(dir string) []byte { return writeFixture(t, dir) })
}

// TestOpenFixture: the current code opens the directory def821c wrote
// and loads every live timer of it, each (due, pos) pair once, and none
// of the buckets the Remove forgot.
func TestOpenFixture(t *testing.T) {
	mem, st := fixture.CopyTo(t, dir)
	visited := 0
	s, err := Open(mem, dir, width, st, func(Entry) { visited++ })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Runs() != 2 {
		t.Fatalf("%d runs, the fixture has 2", s.Runs())
	}
	want := map[int64][]Entry{}
	first, second := fixtureAdds()
	for _, e := range slices.Concat(first, second) {
		if b := s.BucketOf(e.Due); b >= fixtureCut && !slices.Contains(want[b], e) {
			want[b] = append(want[b], e)
		}
	}
	n := 0
	for b, es := range want {
		slices.SortFunc(es, compareEntries)
		if got := load(t, s, b); !slices.Equal(got, es) {
			t.Fatalf("bucket %d: %d entries, want %d", b, len(got), len(es))
		}
		n += len(es)
	}
	if visited != n+10 { // the repeated pairs are in both runs
		t.Fatalf("Open visited %d live entries, want %d", visited, n+10)
	}
	for b := int64(-2 * width); b < fixtureCut; b += width {
		if es := load(t, s, b); len(es) != 0 {
			t.Fatalf("forgotten bucket %d loads %d entries", b, len(es))
		}
	}
}

// TestFixtureBytes: the current code writes, from the same Adds, the very
// bytes def821c wrote: the run files and the state.
func TestFixtureBytes(t *testing.T) {
	d := t.TempDir()
	fixture.SameAs(t, d, writeFixture(t, d))
}
