package kafkamode

// offsetRuns is an ascending list of offsets kept as runs of consecutive
// offsets: a partition's read, unresolved offsets (partProgress.pending).
// A delay topic written by ordinary producers has no gaps between its
// records, so the offsets pending in it are one run whatever their
// number: the worker's RAM for them does not grow with the messages that
// wait in the spill. Each transaction of a transactional producer leaves
// one offset (its commit marker) out, which starts a new run; a run costs
// 16 bytes.
//
// Invariant: runs are ascending, non-empty and separated by at least one
// missing offset; n is the sum of their counts.
type offsetRuns struct {
	runs []offRun
	n    int
}

// offRun is the offsets [start, start+count).
type offRun struct {
	start, count int64
}

// push appends o, which must be above every offset held.
func (r *offsetRuns) push(o int64) {
	if k := len(r.runs); k > 0 && r.runs[k-1].start+r.runs[k-1].count == o {
		r.runs[k-1].count++
	} else {
		r.runs = append(r.runs, offRun{start: o, count: 1})
	}
	r.n++
}

// len is the number of offsets held.
func (r *offsetRuns) len() int { return r.n }

// each calls f with the offsets in ascending order until f returns false.
func (r *offsetRuns) each(f func(o int64) bool) {
	for _, run := range r.runs {
		for o := run.start; o < run.start+run.count; o++ {
			if !f(o) {
				return
			}
		}
	}
}

// dropFront removes the k lowest offsets (k <= len). The runs' array is
// copied when its dead front would pin a large one.
func (r *offsetRuns) dropFront(k int) {
	r.n -= k
	i := 0
	for k > 0 {
		run := &r.runs[i]
		if int64(k) < run.count {
			run.start += int64(k)
			run.count -= int64(k)
			break
		}
		k -= int(run.count)
		i++
	}
	r.runs = r.runs[i:]
	if cap(r.runs) > 1024 && len(r.runs) < cap(r.runs)/4 {
		r.runs = append([]offRun(nil), r.runs...)
	}
}

// values returns the offsets as a slice (for tests and logs).
func (r *offsetRuns) values() []int64 {
	out := make([]int64, 0, r.n)
	r.each(func(o int64) bool { out = append(out, o); return true })
	return out
}
