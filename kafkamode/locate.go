package kafkamode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Where a message is, as Locate tells it from the committed progress.
const (
	// WherePending: not resolved yet, due in the future.
	WherePending = "pending"
	// WhereDue: not resolved yet, due now or in the past (being forwarded,
	// or the records before it in the group are still being read).
	WhereDue = "due"
	// WhereForwarded: resolved, and its forward was found in the business
	// topic (Location.Forwarded says when it was produced).
	WhereForwarded = "visible"
	// WhereCancelled: resolved, and no forward of it was found in the
	// business topic from its due time to the topic's end: a cancel (or a
	// reschedule) resolved it. Also what a forward deleted by the business
	// topic's retention looks like.
	WhereCancelled = "cancelled"
	// WhereDeadLettered: its control headers are bad; resolved by a dead
	// letter (or, if not yet resolved, WhereDue: about to be).
	WhereDeadLettered = "dead_lettered"
	// WhereResolved: resolved, forwarded or cancelled; the search of the
	// business topic stopped at its bound before telling which.
	WhereResolved = "resolved"
)

// Location is what Locate found out about the delay record at (Partition,
// Offset).
type Location struct {
	Partition int32
	Offset    int64
	// Record is the delay record (key, value, headers, timestamp).
	Record *kgo.Record
	// Where is one of the Where* constants.
	Where string
	// Due is its due time (Unix ms); 0 when its headers are bad.
	Due int64
	// BizTopic is its _bizTopic; empty when its headers are bad.
	BizTopic string
	// Problem is why it is dead-lettered (bad headers), or "".
	Problem string
	// Committed is the group's committed offset of the partition (-1:
	// none yet); Marked says the state topic resolves the record above
	// the committed offset.
	Committed int64
	Marked    bool
	// Forwarded is when the forward was produced (its record timestamp,
	// Unix ms), for WhereForwarded.
	Forwarded int64
	// Copied says the message asked for (at Origin) was copied forward
	// within its partition before retention would delete it: every other
	// field describes its latest copy, which is the message now (Offset is
	// the copy's). A change of the message must name the copy's offset.
	Copied bool
	Origin int64
}

// ErrNoMessage is wrapped by Locate's errors for a position that holds no
// delay message: beyond the partition's end, deleted by retention, a
// control or aborted record, or a cancel record.
var ErrNoMessage = errors.New("no message at this position")

// MaxForwardSearch bounds the records of the business topic Locate reads
// to find a resolved message's forward; beyond it the answer is
// WhereResolved.
const MaxForwardSearch = 200_000

// Locator answers where a message of the delay topic is, from what is
// committed in Kafka: the group's offsets, the fired markers of the state
// topic and the business topics. It needs no worker and sees what every
// worker committed, so any worker (or any process with the same Config)
// answers alike. It does not see a transaction still in progress: a record
// being forwarded right now is reported pending or due until it commits.
type Locator struct {
	cfg Config
	cl  *kgo.Client
	adm *kadm.Client
}

// NewLocator returns a Locator of cfg's topics and group (cfg as a worker
// has it: see Worker.Config) that uses cl for its metadata requests. The
// caller closes cl after the Locator's last use.
func NewLocator(cfg Config, cl *kgo.Client) *Locator {
	return &Locator{cfg: cfg, cl: cl, adm: kadm.NewClient(cl)}
}

// locateAt is Locate without following copies.
func (l *Locator) locateAt(ctx context.Context, partition int32, offset int64, search bool) (Location, error) {
	loc := Location{Partition: partition, Offset: offset, Committed: -1}
	starts, err := l.adm.ListStartOffsets(ctx, l.cfg.DelayTopic)
	if err != nil {
		return loc, fmt.Errorf("list the delay topic's start offsets: %w", err)
	}
	ends, err := l.adm.ListCommittedOffsets(ctx, l.cfg.DelayTopic)
	if err != nil {
		return loc, fmt.Errorf("list the delay topic's end offsets: %w", err)
	}
	so, ok1 := starts.Lookup(l.cfg.DelayTopic, partition)
	eo, ok2 := ends.Lookup(l.cfg.DelayTopic, partition)
	switch {
	case !ok1 || !ok2 || so.Err != nil || eo.Err != nil:
		return loc, fmt.Errorf("%w: the delay topic %s has no partition %d", ErrNoMessage, l.cfg.DelayTopic, partition)
	case offset >= eo.Offset:
		return loc, fmt.Errorf("%w: partition %d of %s ends at offset %d (committed records), before %d",
			ErrNoMessage, partition, l.cfg.DelayTopic, eo.Offset, offset)
	case offset < so.Offset:
		return loc, fmt.Errorf("%w: offset %d of partition %d was %w (it starts at %d)",
			ErrNoMessage, offset, partition, errDeleted, so.Offset)
	}
	if loc.Record, err = l.readAt(ctx, partition, offset); err != nil {
		return loc, l.deletedMeanwhile(ctx, partition, offset, err)
	}
	r := loc.Record
	if _, isCancel, _ := parseCancel(r); isCancel && !hasScheduleHeaders(r) {
		return loc, fmt.Errorf("%w: offset %d of partition %d is a cancel record (header %s), not a message",
			ErrNoMessage, offset, partition, HeaderCancel)
	}
	s, perr := l.cfg.scheduleOf(r)
	if _, isCancel, cerr := parseCancel(r); isCancel && cerr != nil {
		perr = cerr
	}
	if perr != nil {
		loc.Problem = perr.Error()
	} else {
		loc.Due, loc.BizTopic = s.due, s.bizTopic
	}
	offs, err := l.adm.FetchOffsets(ctx, l.cfg.Group)
	if err != nil {
		return loc, fmt.Errorf("fetch the committed offsets of group %s: %w", l.cfg.Group, err)
	}
	if o, ok := offs.Lookup(l.cfg.DelayTopic, partition); ok && o.Err == nil {
		loc.Committed = o.At
	}
	resolved := offset < loc.Committed
	if !resolved {
		if loc.Marked, err = l.marked(ctx, partition, offset); err != nil {
			return loc, err
		}
		resolved = loc.Marked
	}
	switch {
	case !resolved && loc.Problem != "":
		loc.Where = WhereDue
	case !resolved && loc.Due > time.Now().UnixMilli():
		loc.Where = WherePending
	case !resolved:
		loc.Where = WhereDue
	case loc.Problem != "":
		loc.Where = WhereDeadLettered
	case !search:
		loc.Where = WhereResolved
	default:
		loc.Where, loc.Forwarded, err = l.findForward(ctx, loc)
	}
	return loc, err
}

// readAt reads the committed record at (partition, offset) of the delay
// topic.
func (l *Locator) readAt(ctx context.Context, partition int32, offset int64) (*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(l.cfg.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{l.cfg.DelayTopic: {partition: kgo.NewOffset().At(offset)}}),
		// Control records too: the offset may be a transaction marker,
		// possibly the last record below the end (then nothing else would
		// ever come).
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read offset %d of partition %d: %w", offset, partition, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return nil, fmt.Errorf("read offset %d of partition %d: %w", offset, partition, ferr)
		}
		if recs := fs.Records(); len(recs) > 0 {
			if recs[0].Offset != offset || recs[0].Attrs.IsControl() {
				return nil, fmt.Errorf("%w: offset %d of partition %d holds no record (an aborted write or a transaction marker)",
					ErrNoMessage, offset, partition)
			}
			return recs[0], nil
		}
	}
}

// marked reports whether the committed state resolves (partition,
// offset) above the committed offset (committedState.resolvedAbove).
func (l *Locator) marked(ctx context.Context, partition int32, offset int64) (bool, error) {
	cs, err := l.committedState(ctx, partition)
	if err != nil {
		return false, err
	}
	return cs.resolvedAbove(offset), nil
}

// findForward searches loc's business topic, from a minute before its
// due time, for its forward: a record whose hourglass-source names it
// (isForwardOf).
func (l *Locator) findForward(ctx context.Context, loc Location) (where string, at int64, err error) {
	forwardOf := l.isForwardOf(loc)
	// The forward's timestamp is its produce time, at or after the due
	// time on the worker's clock; a minute covers clocks that differ.
	from, err := l.adm.ListOffsetsAfterMilli(ctx, max(loc.Due-60_000, 0), loc.BizTopic)
	if err != nil {
		return "", 0, fmt.Errorf("list offsets of %s after its due time: %w", loc.BizTopic, err)
	}
	starts := map[int32]int64{}
	from.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset >= 0 {
			starts[o.Partition] = o.Offset
		}
	})
	found := false
	err = l.scan(ctx, loc.BizTopic, starts, MaxForwardSearch, func(r *kgo.Record) bool {
		if forwardOf(r) {
			found, at = true, r.Timestamp.UnixMilli()
			return false
		}
		return true
	})
	switch {
	case found:
		return WhereForwarded, at, nil
	case errors.Is(err, errSearchBound):
		return WhereResolved, 0, nil
	case err != nil:
		return "", 0, err
	}
	return WhereCancelled, 0, nil
}

// errSearchBound ends a scan that read its most records.
var errSearchBound = errors.New("search bound reached")

// scan reads topic's partitions from the offsets in starts (raised to
// each partition's first offset) to their last committed record
// (read_committed), handing each record to f until f returns false. With
// limit > 0 it stops with errSearchBound after limit records.
func (l *Locator) scan(ctx context.Context, topic string, starts map[int32]int64, limit int, f func(*kgo.Record) bool) error {
	ends, err := l.adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("list the end offsets of %s: %w", topic, err)
	}
	begin, err := l.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("list the start offsets of %s: %w", topic, err)
	}
	last := map[int32]int64{} // read up to, exclusive
	from := map[int32]kgo.Offset{}
	for p, o := range starts {
		e, ok := ends.Lookup(topic, p)
		b, _ := begin.Lookup(topic, p)
		o = max(o, b.Offset)
		if ok && e.Err == nil && o < e.Offset {
			last[p], from[p] = e.Offset, kgo.NewOffset().At(o)
		}
	}
	if len(from) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(l.cfg.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	n := 0
	for len(last) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read %s: %w", topic, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("read %s/%d: %w", t, p, err) })
		if ferr != nil {
			return ferr
		}
		stop := false
		fs.EachRecord(func(r *kgo.Record) {
			end, want := last[r.Partition]
			if stop || !want {
				return
			}
			if r.Offset >= end-1 {
				delete(last, r.Partition) // the last record may be a marker, filtered or kept
			}
			if r.Offset >= end || r.Attrs.IsControl() {
				return
			}
			if n++; limit > 0 && n > limit {
				stop = true
				return
			}
			stop = !f(r)
		})
		if stop {
			if limit > 0 && n > limit {
				return errSearchBound
			}
			return nil
		}
	}
	return nil
}

// MaxKeySearch bounds the delay records LatestPending reads.
const MaxKeySearch = 1_000_000

// LatestPending returns the offset of the latest unresolved message of
// delay partition partition with key key and business topic bizTopic, as
// committed: it reads the partition from the group's committed offset to
// its end, skipping records a fired marker resolves. ok is false when
// there is none. A message resolved already (forwarded, cancelled) is not
// found: what lies below the committed offset is not searched.
func (l *Locator) LatestPending(ctx context.Context, partition int32, key []byte, bizTopic string) (offset int64, ok bool, err error) {
	offs, err := l.pendingWithKey(ctx, partition, key, func(s schedule) bool { return s.bizTopic == bizTopic })
	if err != nil || len(offs) == 0 {
		return 0, false, err
	}
	return offs[len(offs)-1], true, nil
}

// PendingWithKey returns the offsets, in order, of the unresolved messages
// of delay partition partition with key key, whatever their business
// topic, as committed (see LatestPending): what a cancel by key written
// now would cancel, unless the worker forwards them first.
func (l *Locator) PendingWithKey(ctx context.Context, partition int32, key []byte) ([]int64, error) {
	return l.pendingWithKey(ctx, partition, key, func(schedule) bool { return true })
}

// pendingWithKey reads partition from the group's committed offset to its
// end and returns the offsets of the records with key whose schedule
// headers are good and pass match, skipping those a fired marker resolves.
func (l *Locator) pendingWithKey(ctx context.Context, partition int32, key []byte, match func(schedule) bool) ([]int64, error) {
	offs, err := l.adm.FetchOffsets(ctx, l.cfg.Group)
	if err != nil {
		return nil, fmt.Errorf("fetch the committed offsets of group %s: %w", l.cfg.Group, err)
	}
	var from int64
	if o, found := offs.Lookup(l.cfg.DelayTopic, partition); found && o.Err == nil && o.At > 0 {
		from = o.At
	}
	cs, err := l.committedState(ctx, partition)
	if err != nil {
		return nil, err
	}
	var out []int64
	err = l.scan(ctx, l.cfg.DelayTopic, map[int32]int64{partition: from}, MaxKeySearch, func(r *kgo.Record) bool {
		if !bytes.Equal(r.Key, key) || cs.resolvedAbove(r.Offset) {
			return true
		}
		if s, err := l.cfg.scheduleOf(r); err == nil && match(s) {
			out = append(out, r.Offset)
		}
		return true
	})
	if errors.Is(err, errSearchBound) {
		return nil, fmt.Errorf("more than %d delay records of partition %d to search: give the message ID", MaxKeySearch, partition)
	}
	return out, err
}

// KeyPartition returns the delay partition of a record with key among n
// partitions, as Kafka's Java client and franz-go's default partitioner
// choose it (murmur2 of the key): a cancel by key must be produced there,
// where the messages with that key are.
func KeyPartition(key []byte, n int) int32 {
	return int32(kgo.StickyKeyPartitioner(nil).ForTopic("").Partition(&kgo.Record{Key: key}, n))
}

// Resolved reports whether the delay record at (partition, offset) is
// resolved in the committed progress: below the group's committed offset,
// or marked by a fired marker.
func (l *Locator) Resolved(ctx context.Context, partition int32, offset int64) (bool, error) {
	offs, err := l.adm.FetchOffsets(ctx, l.cfg.Group)
	if err != nil {
		return false, fmt.Errorf("fetch the committed offsets of group %s: %w", l.cfg.Group, err)
	}
	if o, ok := offs.Lookup(l.cfg.DelayTopic, partition); ok && o.Err == nil && offset < o.At {
		return true, nil
	}
	return l.marked(ctx, partition, offset)
}
