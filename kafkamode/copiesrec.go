package kafkamode

import (
	"context"
	"encoding/binary"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// copiesVersion is the first byte of a copies record's value.
const copiesVersion = 0x01

// copiesKey is the state-topic key of delay partition p's copy records.
func copiesKey(delayTopic string, p int32) []byte {
	return []byte(delayTopic + "/" + strconv.Itoa(int(p)) + "/copies")
}

// encodeCopies is a copies record's value: copiesVersion, the count, then
// per copy its offset and first offset (uvarints) and its key hash (8
// bytes, big-endian); at most maxCopyRefs, the highest offsets.
func encodeCopies(copies map[int64]copyRef) []byte {
	xs := make([]int64, 0, len(copies))
	for x := range copies {
		xs = append(xs, x)
	}
	slices.Sort(xs)
	if len(xs) > maxCopyRefs {
		xs = xs[len(xs)-maxCopyRefs:]
	}
	b := binary.AppendUvarint([]byte{copiesVersion}, uint64(len(xs)))
	for _, x := range xs {
		b = binary.AppendUvarint(b, uint64(x))
		b = binary.AppendUvarint(b, uint64(copies[x].first))
		b = binary.BigEndian.AppendUint64(b, copies[x].keyHash)
	}
	return b
}

// parseCopies decodes a copies record's value.
func parseCopies(v []byte) (map[int64]copyRef, bool) {
	if len(v) < 2 || v[0] != copiesVersion {
		return nil, false
	}
	v = v[1:]
	next := func() (int64, bool) {
		x, n := binary.Uvarint(v)
		if n <= 0 || x > 1<<62 {
			return 0, false
		}
		v = v[n:]
		return int64(x), true
	}
	n, ok := next()
	if !ok || n > int64(len(v))/10 {
		return nil, false
	}
	out := make(map[int64]copyRef, n)
	for i := int64(0); i < n; i++ {
		x, ok1 := next()
		f, ok2 := next()
		if !ok1 || !ok2 || f >= x || len(v) < 8 {
			return nil, false
		}
		out[x] = copyRef{first: f, keyHash: binary.BigEndian.Uint64(v)}
		v = v[8:]
	}
	if len(v) != 0 {
		return nil, false
	}
	return out, true
}

// copiesRecords returns, for each partition the transaction's copies went
// to, the state record of its copy records as they will be once the
// transaction commits. It runs after the copies were flushed (their
// offsets known) and before the commit.
func (w *Worker) copiesRecords(outputs map[*kgo.Record]*entry) []*kgo.Record {
	next := map[*partProgress]map[int64]copyRef{}
	for r, e := range outputs {
		if !e.copy || r.Topic != w.cfg.DelayTopic {
			continue
		}
		m, ok := next[e.pp]
		if !ok {
			m = make(map[int64]copyRef, len(e.pp.copies.copies)+1)
			for x, ref := range e.pp.copies.copies {
				m[x] = ref
			}
			next[e.pp] = m
		}
		m[r.Offset] = copyRef{first: firstOffset(e), keyHash: e.keyHash}
	}
	out := make([]*kgo.Record, 0, len(next))
	for pp, m := range next {
		out = append(out, &kgo.Record{Topic: w.cfg.StateTopic, Partition: pp.partition,
			Key: copiesKey(w.cfg.DelayTopic, pp.partition), Value: encodeCopies(m)})
	}
	return out
}

// recordCopies produces the copies records of a transaction whose records
// were flushed (so the copies' offsets are known) and flushes them: one
// more round trip, only for transactions that copy.
func (w *Worker) recordCopies(ctx context.Context, outputs map[*kgo.Record]*entry, promise func(*kgo.Record, error)) error {
	recs := w.copiesRecords(outputs)
	if len(recs) == 0 {
		return nil
	}
	for _, r := range recs {
		w.ses.produce(ctx, r, promise)
	}
	return w.ses.flush(ctx)
}
