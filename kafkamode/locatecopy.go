package kafkamode

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Locate reads the delay record at (partition, offset) and tells where it
// is. Its errors wrap ErrNoMessage when there is no message there. Without
// search, a resolved message that is not a dead letter is reported
// WhereResolved without searching its business topic. A message copied
// forward is followed to its latest copy (Location.Copied): its original
// is resolved by the copy, not cancelled. An original that the delay
// topic's retention deleted is followed through its copies still in the
// partition (locateFirst): copy-forward exists so that a message outlives
// its first record, and its ID must too.
//
// A copy found resolved is looked past again (at most maxCopyHops times):
// the copy that resolved it may have committed after the search for
// copies read the partition and before the group offset was fetched, and
// the message would then read as cancelled while a newer copy holds it.
func (l *Locator) Locate(ctx context.Context, partition int32, offset int64, search bool) (Location, error) {
	loc, err := l.locateFirst(ctx, partition, offset, search)
	if err != nil || !resolvedHere(loc) {
		return loc, err
	}
	out, cur := loc, loc
	for range maxCopyHops {
		c, found, err := l.latestCopy(ctx, cur)
		if err != nil {
			return loc, err
		}
		if !found {
			return out, nil
		}
		cl, err := l.locateAt(ctx, partition, c, search)
		if err != nil {
			return loc, fmt.Errorf("message %d/%d was copied forward to offset %d: %w", partition, offset, c, err)
		}
		cl.Copied, cl.Origin = true, offset
		out, cur = cl, cl
		if !resolvedHere(cl) {
			break
		}
	}
	return out, nil
}

// maxCopyHops bounds how many times Locate looks past a resolved copy for
// a newer one, and how many times locateFirst looks again for the
// earliest copy when the one it found was deleted meanwhile.
const maxCopyHops = 4

// resolvedHere reports whether loc is a message resolved without a
// forward found: cancelled, or carried on by a copy forward.
func resolvedHere(loc Location) bool {
	return loc.Problem == "" && (loc.Where == WhereResolved || loc.Where == WhereCancelled)
}

// errDeleted is wrapped (with ErrNoMessage) by locateAt's error for an
// offset below the partition's start: deleted by the delay topic's
// retention.
var errDeleted = errors.New("deleted by the delay topic's retention")

// deletedMeanwhile is the error of a failed read of (partition, offset)
// that locateAt found above the partition's start: errDeleted's if
// retention has deleted the offset since (the read then finds the records
// after it, or none), so that locateFirst looks for its copies; else err.
func (l *Locator) deletedMeanwhile(ctx context.Context, partition int32, offset int64, err error) error {
	starts, lerr := l.adm.ListStartOffsets(ctx, l.cfg.DelayTopic)
	if lerr != nil {
		return err
	}
	if so, ok := starts.Lookup(l.cfg.DelayTopic, partition); ok && so.Err == nil && offset < so.Offset {
		return fmt.Errorf("%w: offset %d of partition %d was %w while it was read (it starts at %d)",
			ErrNoMessage, offset, partition, errDeleted, so.Offset)
	}
	return err
}

// locateFirst is locateAt of the message first sent at (partition,
// offset). When retention deleted that record, the message may live on:
// a message still pending at half the retention was copied forward before
// the record could be deleted (readRetention), and inspect, cancel and
// reschedule by its ID must still find it (a 404 would say there is no
// such message). Its earliest copy still in the partition then stands
// for it (Copied set); Locate follows that copy to the latest one, as it
// follows an original. Without a copy the deletion's error is returned
// (a message forwarded or cancelled before retention deleted it is gone).
// The earliest copy may be deleted in turn before it is read: then the
// next one is looked for.
func (l *Locator) locateFirst(ctx context.Context, partition int32, offset int64, search bool) (Location, error) {
	loc, err := l.locateAt(ctx, partition, offset, search)
	if !errors.Is(err, errDeleted) {
		return loc, err
	}
	for range maxCopyHops {
		c, found, ferr := l.earliestCopy(ctx, partition, offset)
		switch {
		case ferr != nil:
			return loc, ferr
		case !found:
			return loc, err
		}
		cl, cerr := l.locateAt(ctx, partition, c, search)
		if cerr == nil {
			cl.Copied, cl.Origin = true, offset
			return cl, nil
		}
		if !errors.Is(cerr, errDeleted) {
			return loc, fmt.Errorf("message %d/%d was copied forward to offset %d: %w", partition, offset, c, cerr)
		}
	}
	return loc, err
}

// originOf is the value of hourglass-copied-from that the worker writes on
// every copy of the message first sent at (partition, offset): copies of
// copies keep naming that first position (Worker.output).
func (l *Locator) originOf(partition int32, offset int64) []byte {
	return markerKey(l.cfg.DelayTopic, partition, offset)
}

// earliestCopy finds the first record still in partition whose
// hourglass-copied-from names (partition, offset), a position retention
// deleted. The original's key and value, which latestCopy checks a copy
// against, are gone with it, so this record is taken for the message on
// its header alone; the later copies must then match its key and value.
// A producer could forge it, but one that writes to the delay topic can
// cancel any message anyway. It reads at most MaxForwardSearch records;
// beyond that it reports none.
func (l *Locator) earliestCopy(ctx context.Context, partition int32, offset int64) (copyAt int64, found bool, err error) {
	origin := l.originOf(partition, offset)
	err = l.scan(ctx, l.cfg.DelayTopic, map[int32]int64{partition: offset + 1}, MaxForwardSearch, func(r *kgo.Record) bool {
		if hasHeader(r, HeaderCopiedFrom, origin) {
			copyAt, found = r.Offset, true
			return false
		}
		return true
	})
	if errors.Is(err, errSearchBound) {
		return 0, false, nil
	}
	return copyAt, found, err
}

// hasHeader reports whether r has a header key of value v.
func hasHeader(r *kgo.Record, key string, v []byte) bool {
	for _, h := range r.Headers {
		if h.Key == key && bytes.Equal(h.Value, v) {
			return true
		}
	}
	return false
}

// copiedFrom is r's hourglass-copied-from (the last, if several), the
// position its message was first sent at when r is a copy forward.
func copiedFrom(r *kgo.Record) (origin []byte, ok bool) {
	for _, h := range r.Headers {
		if h.Key == HeaderCopiedFrom {
			origin, ok = h.Value, true
		}
	}
	return origin, ok
}

// sameMessage reports whether r carries m's key and value, as a copy
// forward of m and the forward of such a copy do.
func sameMessage(r, m *kgo.Record) bool {
	return bytes.Equal(r.Key, m.Key) && bytes.Equal(r.Value, m.Value)
}

// latestCopy finds the latest copy forward of loc's message in its
// partition: a later record whose hourglass-copied-from names the
// message's first position (copies of copies keep naming it) and whose key
// and value are the message's (a header alone, which any producer can
// write, does not make a copy). It reads at most MaxForwardSearch records;
// beyond that it reports none.
func (l *Locator) latestCopy(ctx context.Context, loc Location) (offset int64, found bool, err error) {
	origin := l.originOf(loc.Partition, loc.Offset)
	if v, ok := copiedFrom(loc.Record); ok {
		origin = v
	}
	err = l.scan(ctx, l.cfg.DelayTopic, map[int32]int64{loc.Partition: loc.Offset + 1}, MaxForwardSearch, func(r *kgo.Record) bool {
		if sameMessage(r, loc.Record) && hasHeader(r, HeaderCopiedFrom, origin) {
			offset, found = r.Offset, true
		}
		return true
	})
	if errors.Is(err, errSearchBound) {
		return 0, false, nil
	}
	return offset, found, err
}

// isForwardOf returns the test findForward applies to a record of loc's
// business topic: is it the forward of loc's message? A forward names in
// hourglass-source the position at which its message was first sent
// (Worker.output): loc's own for a message sent there, the original's for
// a copy forward, which the copy's hourglass-copied-from names. Searching
// a copy by its own position never finds its forward, and the message
// read as cancelled although it was delivered: when Locate follows an
// original that retention deleted to its copies (locateFirst), when a
// reschedule asks about the copy it replaced (by the copy's ID), when
// inspect is given a copy's ID, or when the forward committed between
// Locate's look at the original and at the copy. Any producer can write
// hourglass-copied-from, so a forward naming that origin counts only if
// it carries loc's key and value too, as the forward of a copy does
// (forwardRecord); one naming loc's own position is its forward whatever
// loc's headers say.
func (l *Locator) isForwardOf(loc Location) func(*kgo.Record) bool {
	own := l.originOf(loc.Partition, loc.Offset)
	first, _ := copiedFrom(loc.Record)
	return func(r *kgo.Record) bool {
		return hasHeader(r, HeaderSource, own) ||
			first != nil && sameMessage(r, loc.Record) && hasHeader(r, HeaderSource, first)
	}
}
