package kafkamode

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// markerValue is the value of a live marker. A tombstone (nil value)
// deletes the marker.
var markerValue = []byte("resolved")

// markerKey is the state-topic key of the marker for delay record
// (partition, offset): "<delay topic>/<partition>/<offset>" in ASCII.
func markerKey(delayTopic string, partition int32, offset int64) []byte {
	b := make([]byte, 0, len(delayTopic)+24)
	b = append(b, delayTopic...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(partition), 10)
	b = append(b, '/')
	return strconv.AppendInt(b, offset, 10)
}

// parseMarkerKey returns the offset a marker key names, if the key belongs
// to delay partition (delayTopic, partition).
func parseMarkerKey(key []byte, delayTopic string, partition int32) (int64, bool) {
	prefix := delayTopic + "/" + strconv.Itoa(int(partition)) + "/"
	k := string(key)
	if !strings.HasPrefix(k, prefix) {
		return 0, false
	}
	o, err := strconv.ParseInt(k[len(prefix):], 10, 64)
	if err != nil || o < 0 {
		return 0, false
	}
	return o, true
}

// markerRecord is the state-topic record that sets (live) or deletes the
// marker of delay record (partition, offset). It goes to state partition
// number partition, so a new owner reads only its partitions' markers.
func (w *Worker) markerRecord(partition int32, offset int64, live bool) *kgo.Record {
	r := &kgo.Record{Topic: w.cfg.StateTopic, Partition: partition, Key: markerKey(w.cfg.DelayTopic, partition, offset)}
	if live {
		r.Value = markerValue
	}
	return r
}

// loadedPart is what the state topic holds for one delay partition: its
// live markers and its latest snapshot (nil: none).
type loadedPart struct {
	markers []int64
	snap    *snapshot
	// copies is the partition's copy records as its last owner wrote them
	// (deferral.go).
	copies map[int64]copyRef
}

// loadMarkers reads the live markers and the latest snapshot of the given
// delay partitions from the state topic: every committed record up to the state partition's end. It
// reads with read_committed and keeps control records, and stops at the
// record just below the high watermark measured at the start: a transaction
// a previous owner left open holds the fetch at the last stable offset
// until it commits or aborts, so no marker written before the start is
// missed.
func (w *Worker) loadMarkers(ctx context.Context, partitions []int32) (map[int32]*loadedPart, error) {
	out := make(map[int32]*loadedPart, len(partitions))
	ends, err := kadm.NewClient(w.aux).ListEndOffsets(ctx, w.cfg.StateTopic)
	if err != nil {
		return nil, fmt.Errorf("list the state topic's end offsets: %w", err)
	}
	last := make(map[int32]int64) // offset to read up to, inclusive
	start := make(map[int32]kgo.Offset)
	for _, p := range partitions {
		lo, ok := ends.Lookup(w.cfg.StateTopic, p)
		if !ok || lo.Err != nil {
			return nil, fmt.Errorf("%w: state topic %s has no partition %d (it needs as many partitions as the delay topic)",
				errNoStatePartition, w.cfg.StateTopic, p)
		}
		if lo.Offset > 0 {
			last[p] = lo.Offset - 1
			start[p] = kgo.NewOffset().AtStart()
		}
	}
	if len(last) == 0 {
		for _, p := range partitions {
			out[p] = &loadedPart{}
		}
		return out, nil
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(w.cfg.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.cfg.StateTopic: start}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	st := &stateRead{live: make(map[int32]map[int64]struct{}, len(last)), snaps: make(map[int32]*snapAssembler, len(last)),
		copies: make(map[int32]map[int64]copyRef)}
	for len(last) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("read state %s/%d: %w", t, p, err) })
		if ferr != nil {
			return nil, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, want := last[r.Partition]
			if !want {
				return
			}
			if r.Offset >= end {
				// The record at end may be aborted data (filtered out), in
				// which case the first record seen is past it.
				delete(last, r.Partition)
			}
			if r.Offset > end || r.Attrs.IsControl() {
				return
			}
			st.add(w, r)
		})
	}
	st.result(w, partitions, out)
	return out, nil
}

// stateRead is what loadMarkers gathered from the state topic: the live
// markers and the snapshot chunks of each partition.
type stateRead struct {
	live   map[int32]map[int64]struct{}
	snaps  map[int32]*snapAssembler
	copies map[int32]map[int64]copyRef
}

// add takes one state record at or before the end being read to.
func (st *stateRead) add(w *Worker, r *kgo.Record) {
	w.stats.StateRecordsRead.Add(1)
	if c, ok := parseSnapKey(r.Key, w.cfg.DelayTopic, r.Partition); ok {
		a := st.snaps[r.Partition]
		if a == nil {
			a = &snapAssembler{}
			st.snaps[r.Partition] = a
		}
		a.add(c, r.Value)
		return
	}
	if string(r.Key) == string(copiesKey(w.cfg.DelayTopic, r.Partition)) {
		if m, ok := parseCopies(r.Value); ok {
			st.copies[r.Partition] = m
		} else {
			w.cfg.Logger.Warn("ignoring an unreadable copies record", "partition", r.Partition)
		}
		return
	}
	o, ok := parseMarkerKey(r.Key, w.cfg.DelayTopic, r.Partition)
	if !ok {
		return
	}
	m := st.live[r.Partition]
	if m == nil {
		m = make(map[int64]struct{})
		st.live[r.Partition] = m
	}
	if r.Value == nil {
		delete(m, o)
	} else {
		m[o] = struct{}{}
	}
}

// result fills out with each partition's markers and snapshot.
func (st *stateRead) result(w *Worker, partitions []int32, out map[int32]*loadedPart) {
	for _, p := range partitions {
		lp := &loadedPart{copies: st.copies[p]}
		for o := range st.live[p] {
			lp.markers = append(lp.markers, o)
		}
		if a := st.snaps[p]; a != nil {
			snap, err := a.snapshot()
			if err != nil {
				// Not fatal: the partition is then read from its
				// committed offset, as without a snapshot.
				w.cfg.Logger.Warn("ignoring the partition's snapshot", "partition", p, "err", err)
			}
			lp.snap = snap
		}
		out[p] = lp
	}
}
