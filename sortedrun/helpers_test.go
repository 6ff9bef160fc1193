package sortedrun_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hourglass-mq/hourglass/keyindex"
	"github.com/hourglass-mq/hourglass/sortedrun"
	"github.com/hourglass-mq/hourglass/timerstore"
	"github.com/hourglass-mq/hourglass/vfs"
)

// The tests of this package run over the format of every user, so that
// its fault and property tests cover both.
var formats = []*sortedrun.Format{timerstore.RunFormat(), keyindex.RunFormat()}

const dir = "runs"

// forEach runs body once per user's format.
func forEach(t *testing.T, body func(t *testing.T, f *sortedrun.Format)) {
	for _, f := range formats {
		t.Run(f.Name, func(t *testing.T) { body(t, f) })
	}
}

// randomEntries returns n entries of random bytes in f's order, one per
// key: valid for any format, whatever its fields mean.
func randomEntries(rng *rand.Rand, f *sortedrun.Format, n int) [][]byte {
	var es [][]byte
	for len(es) < n {
		for range n - len(es) {
			es = append(es, randomEntry(rng, f))
		}
		es = model(f, es, nil)
	}
	return es[:n:n]
}

// randomEntry returns an entry of random bytes.
func randomEntry(rng *rand.Rand, f *sortedrun.Format) []byte {
	e := make([]byte, f.EntrySize)
	for i := range e {
		e[i] = byte(rng.Uint32())
	}
	return e
}

// model is what a merge of es (in source order) writes: those keep
// accepts (all when nil), in f's order, of equal ones the earliest, and
// the first of each key.
func model(f *sortedrun.Format, es [][]byte, keep func([]byte) bool) [][]byte {
	s := slices.Clone(es)
	if keep != nil {
		s = slices.DeleteFunc(s, func(e []byte) bool { return !keep(e) })
	}
	slices.SortStableFunc(s, f.Compare)
	var out [][]byte
	for _, e := range s {
		if len(out) > 0 && bytes.Equal(out[len(out)-1][:f.KeySize], e[:f.KeySize]) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// slice is a Source over sorted entries.
type slice struct {
	es [][]byte
	i  int
}

func (s *slice) Next() bool    { s.i++; return s.i <= len(s.es) }
func (s *slice) Entry() []byte { return s.es[s.i-1] }
func (s *slice) Err() error    { return nil }

// writeRun writes es (sorted, one per key) as run seq of dir and returns
// it, open.
func writeRun(t testing.TB, fs vfs.FS, f *sortedrun.Format, seq uint64, es [][]byte) *sortedrun.Run {
	t.Helper()
	if err := fs.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	r, err := f.WriteRun(fs, dir, seq, []sortedrun.Source{&slice{es: es}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r == nil {
		t.Fatal("no run written")
	}
	t.Cleanup(r.Unref)
	return r
}

// readAll opens run m of dir and returns its entries.
func readAll(t testing.TB, fs vfs.FS, f *sortedrun.Format, m sortedrun.Meta) ([][]byte, error) {
	t.Helper()
	var got [][]byte
	r, err := f.OpenRun(fs, dir, m, func(e []byte) { got = append(got, slices.Clone(e)) })
	if err != nil {
		return got, err
	}
	r.Unref()
	return got, nil
}

// wantCorrupt fails unless err is f's damage naming name and off.
func wantCorrupt(t testing.TB, f *sortedrun.Format, err error, name string, off int64) {
	t.Helper()
	var ce *sortedrun.CorruptError
	if !errors.Is(err, f.Corrupt) || !errors.As(err, &ce) {
		t.Fatalf("%v, want %v", err, f.Corrupt)
	}
	if ce.File != name || ce.Offset != off {
		t.Fatalf("damage named %s at %d, want %s at %d: %v", ce.File, ce.Offset, name, off, err)
	}
}
