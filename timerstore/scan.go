package timerstore

import (
	"math"
	"slices"
	"sort"
)

// A scan pages through the index in (due, pos) order for an operator's
// listing of pending messages: each page costs reads proportional to the
// page, not to the index. A run is searched in its sparse index of block
// first-due times (in RAM) and read from the block that may hold the
// scan's start, a few blocks at a time, until it has given a page's worth
// of entries; the memtables are walked bucket by bucket in due order. So a
// page of n entries reads about n/170 + 1 blocks of each run that holds
// entries past the start, whatever the number of timers.

// ScanPlan captures, cheaply and without I/O, what Read needs to return
// up to max entries with (due, pos) at or after from and due before hi,
// in (due, pos) order: the runs that may hold them (each referenced), and
// copies of the memtables' matching entries, a page's worth of buckets.
// Like a LoadPlan, the owner takes it under its lock and calls Read once
// without it. Dead entries (below a source's cut) are left out; entries
// of cancelled or moved timers are not known here, so the caller checks
// each entry it gets.
func (s *Store) ScanPlan(from Entry, hi int64, limit int) *ScanPlan {
	p := &ScanPlan{from: from, hi: hi, limit: limit}
	if limit <= 0 || from.Due >= hi {
		return p
	}
	p.mem = s.scanMem(s.mem, math.MinInt64, from, hi, limit)
	for _, m := range s.frozen {
		p.mem = append(p.mem, s.scanMem(m, m.deadBelow, from, hi, limit)...)
	}
	for _, r := range s.runs {
		if r.last() >= max(from.Due, r.DeadBelow) && len(r.First) > 0 && due(r.First[0]) < hi {
			r.Ref()
			p.runs = append(p.runs, runPart{r: r, meta: r.Meta})
		}
	}
	return p
}

// scanMem returns m's entries at or after from (and deadBelow), before
// hi: whole buckets in due order until limit entries are taken, so that
// every entry of m before the last one returned is among them.
func (s *Store) scanMem(m *memtable, deadBelow int64, from Entry, hi int64, limit int) []Entry {
	first := int64(math.MinInt64) // BucketOf would wrap below it
	if from.Due > math.MinInt64+s.width {
		first = s.BucketOf(from.Due)
	}
	var bs []int64
	for b := range m.m {
		if b >= first && b < hi {
			bs = append(bs, b)
		}
	}
	slices.Sort(bs)
	var out []Entry
	for _, b := range bs {
		if len(out) >= limit {
			break
		}
		for _, e := range m.m[b] {
			if e.Due >= deadBelow && e.Due < hi && !e.before(from) {
				out = append(out, e)
			}
		}
	}
	return out
}

// ScanPlan is what ScanPlan captured.
type ScanPlan struct {
	from  Entry
	hi    int64
	limit int
	mem   []Entry
	runs  []runPart
	done  bool
}

// ScanResult is a page of a scan and what reading it cost.
type ScanResult struct {
	// Entries are at most the plan's limit, in (due, pos) order, each (due,
	// pos) pair once.
	Entries []Entry
	// Blocks is the number of run blocks read (BlockSize bytes each).
	Blocks int
	// More is true when the page is full: there may be entries after its
	// last one (the next page may be empty).
	More bool
}

// Read returns the plan's page. Damage in a run is ErrCorrupt. It may run
// without the owner's lock, and must be called once.
func (p *ScanPlan) Read() (ScanResult, error) {
	if p.done {
		panic("timerstore: ScanPlan.Read called twice")
	}
	p.done = true
	defer func() {
		for _, rp := range p.runs {
			rp.r.Unref()
		}
	}()
	var res ScanResult
	out := p.mem
	for _, rp := range p.runs {
		es, blocks, err := rp.scan(p.from, p.hi, p.limit)
		res.Blocks += blocks
		if err != nil {
			return ScanResult{}, err
		}
		out = append(out, es...)
	}
	slices.SortFunc(out, compareEntries)
	out = slices.CompactFunc(out, func(a, b Entry) bool { return a.Due == b.Due && a.Pos == b.Pos })
	// A full page says there may be more: a source that stopped on the
	// limit may hold entries after the page's last.
	if len(out) >= p.limit {
		out, res.More = out[:p.limit], true
	}
	res.Entries = out
	return res, nil
}

// scan reads the run's entries at or after from (and its cut), before hi,
// until it has limit of them, a few blocks a read.
func (rp runPart) scan(from Entry, hi int64, limit int) ([]Entry, int, error) {
	r := rp.r
	lo := max(from.Due, rp.meta.DeadBelow)
	start := max(sort.Search(len(r.First), func(i int) bool { return due(r.First[i]) >= lo })-1, 0)
	step := limit/format.PerBlock() + 2
	var out []Entry
	blocks := 0
	stop := false
	for i := start; i < len(r.First) && !stop && len(out) < limit; i += step {
		end := min(i+step, len(r.First))
		err := r.ReadBlocks(i, end, func(b []byte, n int) {
			for k := range n {
				e := getEntry(format.Entry(b, k))
				switch {
				case e.Due >= hi:
					stop = true
					return
				case e.Due >= lo && !e.before(from):
					out = append(out, e)
				}
			}
		})
		blocks += end - i
		if err != nil {
			return nil, blocks, err
		}
	}
	return out, blocks, nil
}
