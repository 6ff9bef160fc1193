package kafkamode

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

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
// live legacy markers, its latest snapshot (nil: none) and the offsets
// the resolution records of that snapshot's epoch name.
type loadedPart struct {
	markers []int64
	snap    *snapshot
	// resolved is what the epoch's resolution records name; epoch is the
	// latest snapshot header's id (0: none) and slot the next free slot
	// in it.
	resolved rangeSet
	epoch    uint64
	slot     int
	// copies is the partition's copy records as its last owner wrote them
	// (deferral.go).
	copies map[int64]copyRef
}

// loadState reads the live markers, the latest snapshot and the
// resolution records of the given delay partitions from the state topic,
// from the offset of each that the group's last commit names (commitMeta:
// where its latest snapshot begins; the start without one) to the end.
// So it reads the snapshot and what was resolved since, whatever the
// partition's history. It reads with read_committed and keeps control
// records, and stops at the record just below the high watermark measured
// at the start: a transaction a previous owner left open holds the fetch
// at the last stable offset until it commits or aborts, so nothing
// written before the start is missed.
func (w *Worker) loadState(ctx context.Context, partitions []int32) (map[int32]*loadedPart, error) {
	from, err := stateStarts(ctx, w.ses.admin(), w.cfg)
	if err != nil {
		return nil, err
	}
	ends, err := w.ses.admin().ListEndOffsets(ctx, w.cfg.StateTopic)
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
		if at := max(from[p], 0); lo.Offset > at {
			last[p] = lo.Offset - 1
			start[p] = kgo.NewOffset().At(at)
		}
	}
	st := newStateRead(w.cfg, &w.stats.StateRecordsRead)
	if len(last) > 0 {
		if err := w.readState(ctx, start, last, st); err != nil {
			return nil, err
		}
	}
	out := make(map[int32]*loadedPart, len(partitions))
	for _, p := range partitions {
		out[p] = st.result(p)
	}
	return out, nil
}

// stateStarts returns, per delay partition, the state offset its group
// commit's metadata names (commitMeta); -1 or absent: read from the
// start. It waits for a transactional commit still pending
// (RequireStable), a killed owner's, so the offset is the latest.
func stateStarts(ctx context.Context, adm *kadm.Client, cfg Config) (map[int32]int64, error) {
	offs, err := adm.FetchOffsets(kadm.RequireStable(ctx), cfg.Group)
	if err != nil {
		return nil, fmt.Errorf("fetch the committed offsets of group %s: %w", cfg.Group, err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic != cfg.DelayTopic || o.Err != nil {
			return
		}
		if at, ok := parseCommitMeta(o.Metadata); ok {
			out[o.Partition] = at
		}
	})
	return out, nil
}

// readState reads the state partitions in start up to the offsets in last
// (inclusive) into st.
func (w *Worker) readState(ctx context.Context, start map[int32]kgo.Offset, last map[int32]int64, st *stateRead) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(w.cfg.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.cfg.StateTopic: start}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	for len(last) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("read state %s/%d: %w", t, p, err) })
		if ferr != nil {
			return ferr
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
			st.add(r)
		})
	}
	return nil
}

// stateRead is what a read of the state topic gathered, per partition:
// the live legacy markers, the snapshot records, the copy records and the
// resolution records by epoch.
type stateRead struct {
	cfg    Config
	count  *atomic.Int64 // records read
	live   map[int32]map[int64]struct{}
	snaps  map[int32]*snapAssembler
	copies map[int32]map[int64]copyRef
	res    map[int32]map[uint64]*epochRes
}

// epochRes is what the resolution records of one epoch name.
type epochRes struct {
	ranges   []offRange
	nextSlot int
}

func newStateRead(cfg Config, count *atomic.Int64) *stateRead {
	return &stateRead{cfg: cfg, count: count, live: map[int32]map[int64]struct{}{}, snaps: map[int32]*snapAssembler{},
		copies: map[int32]map[int64]copyRef{}, res: map[int32]map[uint64]*epochRes{}}
}

// add takes one committed state record, in log order.
func (st *stateRead) add(r *kgo.Record) {
	if st.count != nil {
		st.count.Add(1)
	}
	topic := st.cfg.DelayTopic
	if c, ok := parseSnapKey(r.Key, topic, r.Partition); ok {
		a := st.snaps[r.Partition]
		if a == nil {
			a = &snapAssembler{}
			st.snaps[r.Partition] = a
		}
		a.add(c, r.Value, r.Offset)
		return
	}
	if string(r.Key) == string(copiesKey(topic, r.Partition)) {
		if m, ok := parseCopies(r.Value); ok {
			st.copies[r.Partition] = m
		} else {
			st.cfg.Logger.Warn("ignoring an unreadable copies record", "partition", r.Partition)
		}
		return
	}
	if slot, ok := parseResolutionKey(r.Key, topic, r.Partition); ok {
		st.addResolution(r, slot)
		return
	}
	o, ok := parseMarkerKey(r.Key, topic, r.Partition)
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

func (st *stateRead) addResolution(r *kgo.Record, slot int) {
	if r.Value == nil {
		return
	}
	epoch, ranges, err := decodeResolution(r.Value)
	if err != nil {
		// Never written so by a worker: a transaction commits its
		// records whole. Ignoring it could forward a message again, so
		// say so loudly.
		st.cfg.Logger.Error("ignoring an unreadable resolution record", "partition", r.Partition, "offset", r.Offset, "err", err)
		return
	}
	byEpoch := st.res[r.Partition]
	if byEpoch == nil {
		byEpoch = map[uint64]*epochRes{}
		st.res[r.Partition] = byEpoch
	}
	er := byEpoch[epoch]
	if er == nil {
		er = &epochRes{}
		byEpoch[epoch] = er
	}
	er.ranges = append(er.ranges, ranges...)
	er.nextSlot = max(er.nextSlot, slot+1)
}

// result returns partition p's markers, snapshot and resolutions: those
// of the latest snapshot's epoch, or of every epoch if that snapshot
// cannot be used (the partition is then read from its committed offset).
func (st *stateRead) result(p int32) *loadedPart {
	lp := &loadedPart{copies: st.copies[p]}
	for o := range st.live[p] {
		lp.markers = append(lp.markers, o)
	}
	whole := true
	if a := st.snaps[p]; a != nil {
		lp.epoch = a.epoch()
		snap, err := a.snapshot()
		if err != nil {
			// Not fatal: the partition is then read from its
			// committed offset, as without a snapshot.
			st.cfg.Logger.Warn("ignoring the partition's snapshot", "partition", p, "err", err)
		}
		lp.snap, whole = snap, snap == nil
	}
	for epoch, er := range st.res[p] {
		if whole || epoch == lp.epoch {
			lp.resolved.merge(normalRanges(er.ranges))
		}
		if epoch == lp.epoch {
			lp.slot = er.nextSlot
		}
	}
	return lp
}

// normalRanges sorts ranges and merges those that overlap or touch.
func normalRanges(rs []offRange) []offRange {
	slices.SortFunc(rs, func(a, b offRange) int { return cmp.Compare(a.start, b.start) })
	var out []offRange
	for _, r := range rs {
		if k := len(out); k > 0 && out[k-1].end >= r.start {
			out[k-1].end = max(out[k-1].end, r.end)
			continue
		}
		out = append(out, r)
	}
	return out
}
