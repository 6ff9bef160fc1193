package kafkamode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Locate reads the delay record at (partition, offset) and tells where it
// is. Its errors wrap ErrNoMessage when there is no message there. Without
// search, a resolved message that is not a dead letter is reported
// WhereResolved without searching its business topic. A message copied
// forward is followed to its latest copy (Location.Copied): its original
// is resolved by the copy, not cancelled.
//
// A copy found resolved is looked past again (at most maxCopyHops times):
// the copy that resolved it may have committed after the search for
// copies read the partition and before the group offset was fetched, and
// the message would then read as cancelled while a newer copy holds it.
func (l *Locator) Locate(ctx context.Context, partition int32, offset int64, search bool) (Location, error) {
	loc, err := l.locateAt(ctx, partition, offset, search)
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
// a newer one.
const maxCopyHops = 4

// resolvedHere reports whether loc is a message resolved without a
// forward found: cancelled, or carried on by a copy forward.
func resolvedHere(loc Location) bool {
	return loc.Problem == "" && (loc.Where == WhereResolved || loc.Where == WhereCancelled)
}

// originOf is the value of hourglass-copied-from that the worker writes on
// every copy of the message first sent at (partition, offset): copies of
// copies keep naming that first position (Worker.output).
func (l *Locator) originOf(partition int32, offset int64) []byte {
	return []byte(l.cfg.DelayTopic + "/" + strconv.Itoa(int(partition)) + "/" + strconv.FormatInt(offset, 10))
}

// namesOrigin reports whether r's hourglass-copied-from is origin.
func namesOrigin(r *kgo.Record, origin []byte) bool {
	for _, h := range r.Headers {
		if h.Key == HeaderCopiedFrom && bytes.Equal(h.Value, origin) {
			return true
		}
	}
	return false
}

// latestCopy finds the latest copy forward of loc's message in its
// partition: a later record whose hourglass-copied-from names the
// message's first position (copies of copies keep naming it) and whose key
// and value are the message's (a header alone, which any producer can
// write, does not make a copy). It reads at most MaxForwardSearch records;
// beyond that it reports none.
func (l *Locator) latestCopy(ctx context.Context, loc Location) (offset int64, found bool, err error) {
	origin := l.originOf(loc.Partition, loc.Offset)
	for _, h := range loc.Record.Headers {
		if h.Key == HeaderCopiedFrom {
			origin = h.Value
		}
	}
	err = l.scan(ctx, l.cfg.DelayTopic, map[int32]int64{loc.Partition: loc.Offset + 1}, MaxForwardSearch, func(r *kgo.Record) bool {
		if bytes.Equal(r.Key, loc.Record.Key) && bytes.Equal(r.Value, loc.Record.Value) && namesOrigin(r, origin) {
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
// read as cancelled although it was delivered: when a reschedule asks
// about the copy it replaced (by the copy's ID), when inspect is given a
// copy's ID, or when the forward committed between Locate's look at the
// original and at the copy. Any producer can write hourglass-copied-from,
// so a forward naming that origin counts only if it carries loc's key and
// value too, as the forward of a copy does (forwardRecord); one naming
// loc's own position is its forward whatever loc's headers say.
func (l *Locator) isForwardOf(loc Location) func(*kgo.Record) bool {
	own := l.originOf(loc.Partition, loc.Offset)
	var first []byte
	for _, h := range loc.Record.Headers {
		if h.Key == HeaderCopiedFrom {
			first = h.Value
		}
	}
	return func(r *kgo.Record) bool {
		for _, h := range r.Headers {
			switch {
			case h.Key != HeaderSource:
			case bytes.Equal(h.Value, own):
				return true
			case first != nil && bytes.Equal(h.Value, first) &&
				bytes.Equal(r.Key, loc.Record.Key) && bytes.Equal(r.Value, loc.Record.Value):
				return true
			}
		}
		return false
	}
}
