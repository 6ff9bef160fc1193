package kafkamode

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
)

// bodyRunGap is the largest gap between two wanted offsets of a partition
// that the loader reads through rather than seeking: reading a few hundred
// unwanted records costs less than a seek's extra round trip.
const bodyRunGap = 512

// bodyResult answers one load: the records found, keyed by entry, and the
// entries whose record is gone (deleted by the delay topic's retention).
type bodyResult struct {
	got     map[*entry]*kgo.Record
	missing []*entry
	err     error
	wants   []want // what was asked

}

// bodyLoader fetches the bodies of indexed records shortly before they are
// due, by (partition, offset), with a direct (group-less) consumer of its
// own. It runs on its own goroutine so the worker's loop keeps firing while
// it reads; it never touches an entry's fields (the loop owns them), only
// reads the partition and offset it was given with the entry.
type bodyLoader struct {
	topic string
	cl    *kgo.Client
}

// want is one body to fetch.
type want struct {
	e         *entry
	partition int32
	offset    int64
}

// load fetches the records at the wanted positions. For each partition it
// splits the sorted offsets into runs whose gaps are at most bodyRunGap and
// reads each run from its first offset to its last, one run per partition
// per round.
func (l *bodyLoader) load(ctx context.Context, wants []want) bodyResult {
	res := bodyResult{got: make(map[*entry]*kgo.Record, len(wants)), wants: wants}
	runs := splitBodyRuns(wants)
	for round := 0; ; round++ {
		rd := planBodyRound(runs, round)
		if len(rd.add) == 0 {
			return res
		}
		l.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{l.topic: rd.add})
		parts := make([]int32, 0, len(rd.add))
		for p := range rd.add {
			parts = append(parts, p)
		}
		l.fetchBodyRound(ctx, rd, &res)
		l.cl.RemoveConsumePartitions(map[string][]int32{l.topic: parts})
		if res.err != nil {
			return res
		}
	}
}

// bodyRun is one run of wanted offsets of a partition, sorted, with gaps of
// at most bodyRunGap between neighbours.
type bodyRun struct{ ws []want }

// splitBodyRuns groups the wants by partition, sorts each partition's wants
// by offset and cuts them into runs wherever the gap exceeds bodyRunGap.
func splitBodyRuns(wants []want) map[int32][]bodyRun {
	byPart := make(map[int32][]want)
	for _, w := range wants {
		byPart[w.partition] = append(byPart[w.partition], w)
	}
	runs := make(map[int32][]bodyRun)
	for p, ws := range byPart {
		sort.Slice(ws, func(i, j int) bool { return ws[i].offset < ws[j].offset })
		cur := bodyRun{ws: ws[:1]}
		for i := 1; i < len(ws); i++ {
			if ws[i].offset-ws[i-1].offset > bodyRunGap {
				runs[p] = append(runs[p], cur)
				cur = bodyRun{}
			}
			cur.ws = append(cur.ws, ws[i])
		}
		runs[p] = append(runs[p], cur)
	}
	return runs
}

// bodyRound is what one round reads: per partition, the offset to start at,
// the entries wanted by offset, and the run's first and last offsets.
type bodyRound struct {
	add         map[int32]kgo.Offset
	byOffset    map[int32]map[int64]*entry
	first, last map[int32]int64
}

// planBodyRound picks, for every partition that still has one, its run
// number round. An empty add means every run has been read.
func planBodyRound(runs map[int32][]bodyRun, round int) bodyRound {
	rd := bodyRound{
		add:      make(map[int32]kgo.Offset),
		byOffset: make(map[int32]map[int64]*entry),
		first:    make(map[int32]int64),
		last:     make(map[int32]int64),
	}
	for p, rs := range runs {
		if round >= len(rs) {
			continue
		}
		ws := rs[round].ws
		rd.add[p] = kgo.NewOffset().At(ws[0].offset)
		rd.first[p], rd.last[p] = ws[0].offset, ws[len(ws)-1].offset
		m := make(map[int64]*entry, len(ws))
		for _, w := range ws {
			m[w.offset] = w.e
		}
		rd.byOffset[p] = m
	}
	return rd
}

// fetchBodyRound polls until every partition of the round has reached its
// run's last offset, filling res.got with the wanted records and
// res.missing with the wanted entries the fetch skipped. It stops early,
// with res.err set, on a cancelled context or a fetch error; the caller
// removes the round's partitions from the consumer either way.
func (l *bodyLoader) fetchBodyRound(ctx context.Context, rd bodyRound, res *bodyResult) {
	open := len(rd.add)
	for open > 0 {
		fs := l.cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			res.err = err
			return
		}
		fs.EachError(func(t string, p int32, err error) {
			res.err = fmt.Errorf("fetch bodies from %s/%d: %w", t, p, err)
		})
		if res.err != nil {
			return
		}
		fs.EachRecord(func(r *kgo.Record) {
			m := rd.byOffset[r.Partition]
			// Records below the run's first offset are left over
			// from an earlier round's buffered fetch.
			if m == nil || r.Offset < rd.first[r.Partition] {
				return
			}
			if e, ok := m[r.Offset]; ok {
				res.got[e] = r
				delete(m, r.Offset)
			}
			if r.Offset >= rd.last[r.Partition] {
				// Whatever is still wanted in this run was
				// skipped by the fetch: deleted by retention.
				for _, e := range m {
					res.missing = append(res.missing, e)
				}
				delete(rd.byOffset, r.Partition)
				open--
			}
		})
	}
}
