package engine

import (
	"errors"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// The consumers' side of browsing (browse.go): what a group has in flight
// and what its dead-letter topic holds that the group's redrive reader has
// not finished with. Both walk offsets in (queue, offset) order, a bounded
// number a page, and read only the queue entries and records of what they
// show.

// spot is a (queue, offset) of a group queue, with what a listing shows
// of its lease.
type spot struct {
	queue    uint16
	offset   uint64
	attempt  uint32
	leaseEnd int64
}

// userGroup returns the user's group of topic and name, or NotFound.
func (c *consumers) userGroup(topic, name string) (*group, error) {
	g := c.group(topic, name) // no lock: see consumers.groups
	if g == nil || g.internal {
		return nil, errs.New(errs.NotFound, "group %q of topic %q does not exist", name, topic)
	}
	return g, nil
}

// leasedLocked returns the leases of g from (q0, off0) on, in (queue,
// offset) order: at most want of them, looking at at most scan offsets. It
// returns where to go on from, and whether the walk reached the end.
func (c *consumers) leasedLocked(g *group, q0 uint16, off0 uint64, want, scan int) ([]spot, uint16, uint64, bool) {
	var out []spot
	for q := int(q0); q < len(g.queues); q++ {
		gq := g.queues[q]
		off := gq.acked
		if q == int(q0) {
			off = max(off, off0)
		}
		for ; off < gq.next; off++ {
			if len(out) >= want || scan <= 0 {
				return out, uint16(q), off, false
			}
			scan--
			if l := gq.leaseOf(off); l != nil {
				out = append(out, spot{queue: uint16(q), offset: off, attempt: l.attempt, leaseEnd: l.timer.ref().due})
			}
		}
	}
	return out, 0, 0, true
}

// InFlight lists the messages a group has under a lease now, with each
// delivery's attempt and the end of its lease, by queue and offset.
func (b *Browser) InFlight(req ListRequest) (ListPage, error) {
	e := b.eng
	if err := req.check(ListInFlight); err != nil {
		return ListPage{}, err
	}
	q0, off0, _, err := decodeCursor(ListInFlight, req.Cursor)
	if err != nil {
		return ListPage{}, err
	}
	g, err := e.cons.userGroup(req.Topic, req.Group)
	if err != nil {
		return ListPage{}, err
	}
	e.mu.Lock()
	if err := e.life.unavailableLocked(); err != nil {
		e.mu.Unlock()
		return ListPage{}, err
	}
	var spots []spot
	nq, noff, end := uint16(0), uint64(0), true
	if q0 < uint64(len(g.queues)) { // a cursor past the queues is at the end
		spots, nq, noff, end = e.cons.leasedLocked(g, uint16(q0), off0, listReadBudget, listScanBudget)
	}
	e.mu.Unlock()
	page := ListPage{Scanned: len(spots)}
	for _, sp := range spots {
		if len(page.Items) >= req.Limit {
			page.Next = encodeCursor(ListInFlight, uint64(sp.queue), sp.offset)
			return page, nil
		}
		s, pos, err := b.readEntry(g.topic, int(sp.queue), sp.offset)
		page.Read++
		if err != nil {
			return ListPage{}, err
		}
		if s == nil || !req.match(s) || !req.inDue(s.Due) {
			continue
		}
		page.Items = append(page.Items, Listed{ID: e.ids.seal.ID(pos, s.Nonce), State: StateVisible, Topic: s.Topic, Queue: int(sp.queue),
			Key: s.Key, Tag: s.Tag, Due: s.Due, Sent: s.Sent, BodyBytes: len(s.Body), Properties: s.Properties,
			Group: g.name, Attempt: int(sp.attempt), LeaseEnd: sp.leaseEnd})
	}
	if !end {
		page.Next = encodeCursor(ListInFlight, uint64(nq), noff)
	}
	return page, nil
}

// readEntry reads the message at offset off of queue q of t: nil when
// retention removed its record.
func (b *Browser) readEntry(t *topic, q int, off uint64) (*message.Stored, uint64, error) {
	x := t.queues[q]
	en, err := x.Read(off, 1, x.Len())
	if err != nil || len(en) != 1 {
		return nil, 0, errs.Wrap(errs.Unavailable, err, "read offset %d of queue %d of topic %s", off, q, t.name)
	}
	s, _, err := b.eng.readStored(en[0].Pos)
	switch {
	case errors.Is(err, errGone):
		return nil, en[0].Pos, nil
	case err != nil:
		return nil, 0, errs.Wrap(errs.Unavailable, err, "read the message at log position %d", en[0].Pos)
	}
	return s, en[0].Pos, nil
}

// readerLocked returns the redrive reader of g's dead-letter topic, or
// nil when no redrive ran yet (it has finished with nothing).
func (c *consumers) readerLocked(g *group) *group { return c.group(g.dlq, redriveGroup) }

// deadLeftLocked reports whether the dead letter at (q, off) of a
// dead-letter topic is still there for the reader rg (nil: none yet).
func deadLeftLocked(rg *group, q int, off uint64) bool {
	return rg == nil || !rg.queues[q].isDone(off)
}

// deadFloorLocked is the first offset of queue q the reader rg may not
// have finished with.
func deadFloorLocked(rg *group, q int) uint64 {
	if rg == nil {
		return 0
	}
	return rg.queues[q].acked
}

// Dead lists a group's dead letters, with the reason and the attempts of
// each, by queue and offset of its dead-letter topic: those that neither a
// redrive nor a delete or purge has taken.
func (b *Browser) Dead(req ListRequest) (ListPage, error) {
	e := b.eng
	if err := req.check(ListDead); err != nil {
		return ListPage{}, err
	}
	q0, off0, _, err := decodeCursor(ListDead, req.Cursor)
	if err != nil {
		return ListPage{}, err
	}
	g, err := e.cons.userGroup(req.Topic, req.Group)
	if err != nil {
		return ListPage{}, err
	}
	dlq := e.cat.topic(g.dlq)
	var page ListPage
	if dlq == nil || q0 >= uint64(len(dlq.queues)) {
		return page, nil // nothing was ever dead-lettered, or a cursor at the end
	}
	for q := int(q0); q < len(dlq.queues); q++ {
		from := uint64(0)
		if q == int(q0) {
			from = off0
		}
		stop, next, err := b.deadQueue(&req, &page, g, dlq, q, from)
		if err != nil {
			return ListPage{}, err
		}
		if stop {
			page.Next = encodeCursor(ListDead, uint64(q), next)
			return page, nil
		}
	}
	return page, nil
}

// deadQueue adds the dead letters of queue q from offset from on to page.
// It stops when the page is full or a budget is spent, and returns the
// offset to go on from.
func (b *Browser) deadQueue(req *ListRequest, page *ListPage, g *group, dlq *topic, q int, from uint64) (bool, uint64, error) {
	e := b.eng
	x := dlq.queues[q]
	n := x.Len()
	e.mu.Lock()
	from = max(from, deadFloorLocked(e.cons.readerLocked(g), q))
	e.mu.Unlock()
	for from < n {
		if len(page.Items) >= req.Limit || page.Scanned >= listScanBudget || page.Read >= listReadBudget {
			return true, from, nil
		}
		ents, err := x.Read(from, min(256, listScanBudget-page.Scanned), n)
		if err != nil {
			return false, 0, errs.Wrap(errs.Unavailable, err, "read the dead-letter topic %s", dlq.name)
		}
		left := make([]bool, len(ents))
		e.mu.Lock()
		rg := e.cons.readerLocked(g)
		for i := range ents {
			left[i] = deadLeftLocked(rg, q, from+uint64(i))
		}
		e.mu.Unlock()
		for i, en := range ents {
			if len(page.Items) >= req.Limit || page.Read >= listReadBudget {
				return true, from, nil
			}
			from++
			page.Scanned++
			if !left[i] {
				continue
			}
			s, _, err := e.readStored(en.Pos)
			page.Read++
			switch {
			case errors.Is(err, errGone):
				continue
			case err != nil:
				return false, 0, errs.Wrap(errs.Unavailable, err, "read the dead letter at log position %d", en.Pos)
			}
			if !req.match(s) || !req.inDue(s.Due) {
				continue
			}
			it := Listed{ID: e.ids.seal.ID(en.Pos, s.Nonce), State: StateVisible, Topic: s.Topic, Queue: q, Key: s.Key, Tag: s.Tag,
				Due: s.Due, Sent: s.Sent, BodyBytes: len(s.Body), Properties: s.Properties, Group: g.name}
			deadItem(&it, s.Properties)
			page.Items = append(page.Items, it)
		}
	}
	return false, 0, nil
}
