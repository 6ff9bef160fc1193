package timerstore

// A run's tail summary and the checks of runs opened from their tails.

import (
	"encoding/binary"
	"path"

	"github.com/hourglass-mq/hourglass/sortedrun"
	"github.com/hourglass-mq/hourglass/vfs"
)

// bucketAux is the summary a run's tail holds (sortedrun.TailAux): the
// bucket width the run was written with and, for each bucket holding
// entries, its start and how many, in order:
//
//	offset size  field
//	0      8     width i64 ms
//	8      8     n     u64 buckets
//	16     16n   start i64, count u64 for each bucket, starts increasing
//
// Open counts the buckets of a run from it, instead of from every entry,
// when the width is the store's; otherwise it reads the run whole.
type bucketAux struct {
	width int64
	b     []byte // the buckets counted, 16 bytes each
	cur   int64  // the bucket being counted
	n     uint64
}

func newBucketAux(width int64) *bucketAux { return &bucketAux{width: width} }

// Add counts an entry, given in run order.
func (a *bucketAux) Add(e []byte) {
	b := bucketOf(int64(binary.LittleEndian.Uint64(e)), a.width)
	if a.n > 0 && b != a.cur {
		a.flush()
	}
	a.cur = b
	a.n++
}

func (a *bucketAux) flush() {
	a.b = binary.LittleEndian.AppendUint64(a.b, uint64(a.cur))
	a.b = binary.LittleEndian.AppendUint64(a.b, a.n)
	a.n = 0
}

// Bytes returns the summary.
func (a *bucketAux) Bytes() []byte {
	if a.n > 0 {
		a.flush()
	}
	out := binary.LittleEndian.AppendUint64(make([]byte, 0, 16+len(a.b)), uint64(a.width))
	out = binary.LittleEndian.AppendUint64(out, uint64(len(a.b))/16)
	return append(out, a.b...)
}

// bucketOf is Store.BucketOf for a width.
func bucketOf(t, width int64) int64 {
	b := t - t%width
	if t < 0 && t%width != 0 {
		b -= width
	}
	return b
}

// bucketCount is one bucket of a summary.
type bucketCount struct{ start, n int64 }

// decodeBuckets checks the summary of run r against what the run says
// of itself (its entry count, its first and last due times) and returns
// its buckets; ok is false when it is not one to count from: another
// width, or one that disagrees (then the run is read whole and counted
// again, never trusted).
func decodeBuckets(r *sortedrun.Run, width int64) ([]bucketCount, bool) {
	le := binary.LittleEndian
	a := r.Aux
	if len(a) < 16 || int64(le.Uint64(a)) != width {
		return nil, false
	}
	n := le.Uint64(a[8:])
	if n == 0 || n > uint64(len(a)-16)/16 || uint64(len(a)) != 16+16*n {
		return nil, false
	}
	out := make([]bucketCount, n)
	var total uint64
	for i := range out {
		p := a[16+16*i:]
		c := bucketCount{start: int64(le.Uint64(p)), n: int64(le.Uint64(p[8:]))}
		if c.n <= 0 || bucketOf(c.start, width) != c.start || i > 0 && c.start <= out[i-1].start {
			return nil, false
		}
		total += uint64(c.n)
		out[i] = c
	}
	if total != r.Entries || out[0].start != bucketOf(due(r.First[0]), width) || out[n-1].start != bucketOf(due(r.Last), width) {
		return nil, false
	}
	return out, true
}

// openRun opens run m. Without visit, it opens the run from its tail and
// counts its buckets from the tail's summary when both are good, reading
// two blocks instead of the whole run (the rest is checked by a
// RunsPlan's Each); otherwise it reads the run whole, counting every
// live entry and handing it to visit (when not nil).
func (s *Store) openRun(m sortedrun.Meta, visit func(Entry)) (*run, error) {
	if visit == nil {
		sr, _, err := format.OpenRunTail(s.fs, s.dir, m)
		if err != nil {
			return nil, err
		}
		if sr != nil {
			if bs, ok := decodeBuckets(sr, s.width); ok {
				for _, c := range bs {
					if c.start+s.width > m.DeadBelow {
						s.countAddN(c.start, c.n)
					}
				}
				return &run{Run: sr, listed: true}, nil
			}
			sr.Unref()
		}
	}
	// A run is in due order, so its entries come bucket after bucket:
	// they are counted a bucket at a time (one map update a bucket, not
	// one an entry).
	var c bucketTally
	sr, err := format.OpenRun(s.fs, s.dir, m, func(b []byte) {
		if e := getEntry(b); e.Due >= m.DeadBelow {
			c.add(s, s.BucketOf(e.Due))
			if visit != nil {
				visit(e)
			}
		}
	})
	c.flush(s)
	if err != nil {
		return nil, err
	}
	return &run{Run: sr, listed: true}, nil
}

// damageMark is the file RunsPlan.Each leaves in the directory when it
// finds damage in a run Open did not read whole: the next Open of a state
// refuses it (ErrCorrupt), so that the engine rebuilds the index from its
// log, and the rebuild's Open (a nil state) deletes it with every other
// file that is not a listed run.
const damageMark = sortedrun.DamageMark

// checkMark fails with ErrCorrupt when dir holds a damage mark.
func checkMark(fs vfs.FS, dir string) error {
	what, found, err := sortedrun.ReadDamageMark(fs, dir)
	if err != nil || !found {
		return err
	}
	return &CorruptError{Err: ErrCorrupt, File: path.Join(dir, damageMark), What: "an earlier check of the index found damage: " + what}
}

// RunsPlan captures, cheaply and without I/O (owner's lock), the run set
// as it is, each run referenced and with what the state says of it now,
// for Each to read whole without the lock.
func (s *Store) RunsPlan() *RunsPlan {
	p := &RunsPlan{fs: s.fs, dir: s.dir}
	for _, r := range s.runs {
		r.Ref()
		p.runs = append(p.runs, runPart{r: r, meta: r.Meta})
	}
	return p
}

// RunsPlan is what RunsPlan captured.
type RunsPlan struct {
	fs   vfs.FS
	dir  string
	runs []runPart
	done bool
}

// Each reads every run of the plan whole, checking it as Open checks a
// run it reads whole (every block, the counts, the order, the sum, and
// the sparse index a tail gave), and hands each live entry (at or after
// the run's deadBelow when the plan was taken) to visit, in file order,
// run after run. onRead, when not nil, is called before each read with its
// size; its error stops Each and is returned. Damage is ErrCorrupt, and is
// recorded by the run (the run's tail withdrawn, a mark in the directory:
// sortedrun's noteDamage, as for damage any read meets) so that the next
// Open refuses the state and the engine rebuilds the index; when neither
// record can be made, the error says so. Each may run without the owner's
// lock and must be called once; it drops the plan's references.
func (p *RunsPlan) Each(visit func(Entry), onRead func(n int) error) error {
	if p.done {
		panic("timerstore: RunsPlan.Each called twice")
	}
	p.done = true
	defer func() {
		for _, rp := range p.runs {
			rp.r.Unref()
		}
	}()
	for _, rp := range p.runs {
		err := rp.r.Verify(onRead, func(b []byte) {
			if e := getEntry(b); e.Due >= rp.meta.DeadBelow {
				visit(e)
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Drop gives back the plan's references without reading: for a plan
// that will not run.
func (p *RunsPlan) Drop() {
	if !p.done {
		p.done = true
		for _, rp := range p.runs {
			rp.r.Unref()
		}
	}
}
