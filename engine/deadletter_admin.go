package engine

import (
	"context"
	"slices"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// An operator's actions on one group's dead letters (issue 30): resend a
// selection to the group, delete a selection, purge them all. Each is the
// redrive's own mechanism (redrive.go): the dead letters are leased by
// the group's redrive reader, the engine's own group of the dead-letter
// topic, and then acked by it, for a resend in the same commit-log append
// as the copies sent back for the group only (SendRequest.ForGroup); for
// a delete or a purge, alone. So each is durable once it returns, and a
// crash leaves a dead letter either where it was or finished with, never
// both; what a listing shows (Browser.Dead) is what the reader has not
// finished with. A selection is all or nothing: every ID is checked (it
// exists, it is a dead letter of this group, nothing else holds it) before
// any is touched.

// MaxDeadSelection is the most dead letters one resend or delete names.
const MaxDeadSelection = 1000

// DeadLetters is an operator's actions on dead letters. Get one with
// NewDeadLetters; it holds no state of its own and is safe for concurrent
// use.
type DeadLetters struct{ eng *Engine }

// NewDeadLetters returns the dead-letter actions of e.
func NewDeadLetters(e *Engine) *DeadLetters { return &DeadLetters{eng: e} }

// deadRef is a selected dead letter: its ID, record, and place in the
// dead-letter topic.
type deadRef struct {
	id     message.ID
	s      *message.Stored
	queue  uint16
	offset uint64
}

// reader returns g (a user's group) and its dead-letter topic's redrive
// reader, made if need be; NotFound when the group has no dead-letter
// topic yet.
func (d *DeadLetters) reader(topic, group string) (*group, *group, *topic, error) {
	c := d.eng.cons
	g, err := c.userGroup(topic, group)
	if err != nil {
		return nil, nil, nil, err
	}
	dlq := d.eng.cat.topic(g.dlq)
	if dlq == nil {
		return g, nil, nil, nil
	}
	rg, err := c.createGroup(g.dlq, redriveGroup, GroupConfig{}, true, true)
	if err != nil {
		return nil, nil, nil, err
	}
	return g, rg, dlq, nil
}

// locate checks a selection and finds each dead letter's place.
func (d *DeadLetters) locate(g *group, rg *group, dlq *topic, ids []message.ID) ([]deadRef, error) {
	e := d.eng
	switch {
	case len(ids) == 0:
		return nil, errs.New(errs.InvalidArgument, "no dead letter IDs given")
	case len(ids) > MaxDeadSelection:
		return nil, errs.New(errs.TooLarge, "%d dead letters selected; the limit is %d", len(ids), MaxDeadSelection)
	}
	refs := make([]deadRef, len(ids))
	want := map[uint64]int{} // position -> index in refs
	for i, id := range ids {
		if _, dup := want[id.Pos]; dup {
			return nil, errs.New(errs.InvalidArgument, "dead letter %s is selected twice", id)
		}
		s, err := e.readMessage(id)
		if err != nil {
			return nil, err
		}
		switch {
		case dlq != nil && s.Topic == dlq.name:
		case IsDeadLetterTopic(s.Topic):
			return nil, errs.New(errs.FailedPrecondition, "message %s is a dead letter of another group (its dead-letter topic is %s), not of group %q of topic %q", id, s.Topic, g.name, g.topic.name)
		default:
			return nil, errs.New(errs.FailedPrecondition, "message %s is not a dead letter: it is a message of topic %s; list dead letters with GET /v1/topics/%s/groups/%s/dead", id, s.Topic, g.topic.name, g.name)
		}
		refs[i] = deadRef{id: id, s: s, queue: uint16(s.Queue)}
		want[id.Pos] = i
	}
	// Find each one's offset: the dead-letter topic's queues hold them in
	// the order they were dead-lettered, from the reader's oldest not
	// finished with on.
	for q := range dlq.queues {
		if err := d.findOffsets(rg, dlq, q, refs, want); err != nil {
			return nil, err
		}
	}
	for _, i := range want {
		return nil, errs.New(errs.NotFound, "dead letter %s of group %q is no longer there: it was resent, deleted or purged", refs[i].id, g.name)
	}
	return refs, nil
}

// findOffsets fills in the offsets of the refs in queue q, and takes them
// out of want.
func (d *DeadLetters) findOffsets(rg *group, dlq *topic, q int, refs []deadRef, want map[uint64]int) error {
	e := d.eng
	left := 0
	for _, i := range want {
		if int(refs[i].queue) == q {
			left++
		}
	}
	x := dlq.queues[q]
	n := x.Len()
	e.mu.Lock()
	from := deadFloorLocked(rg, q)
	e.mu.Unlock()
	for ; left > 0 && from < n; from += 4096 {
		ents, err := x.Read(from, 4096, n)
		if err != nil {
			return errs.Wrap(errs.Unavailable, err, "read the dead-letter topic %s", dlq.name)
		}
		for k, en := range ents {
			if i, ok := want[en.Pos]; ok && int(refs[i].queue) == q {
				refs[i].offset = from + uint64(k)
				delete(want, en.Pos)
				left--
			}
		}
	}
	return nil
}

// leaseLocked leases the selected dead letters to the reader rg, all or
// none, and returns their receipts.
func (d *DeadLetters) leaseLocked(g, rg *group, refs []deadRef) ([]string, error) {
	c := d.eng.cons
	if err := d.eng.life.unavailableLocked(); err != nil {
		return nil, err
	}
	for _, r := range refs {
		gq := rg.queues[r.queue]
		switch {
		case gq.isDone(r.offset):
			return nil, errs.New(errs.NotFound, "dead letter %s of group %q is no longer there: it was resent, deleted or purged", r.id, g.name)
		case gq.leaseOf(r.offset) != nil || gq.retryOf(r.offset).running():
			return nil, errs.New(errs.FailedPrecondition, "dead letter %s of group %q is being redriven or deleted right now; list the dead letters again", r.id, g.name)
		case r.offset >= gq.acked+uint64(d.eng.opts.MaxUnackedSpan):
			return nil, errs.New(errs.FailedPrecondition, "dead letter %s of group %q is more than %d dead letters past the oldest one left; resend, delete or purge the older ones first", r.id, g.name, d.eng.opts.MaxUnackedSpan)
		}
	}
	receipts := make([]string, len(refs))
	for i, r := range refs {
		receipts[i] = c.leaseOneLocked(rg, r.queue, r.offset, time.Minute)
	}
	return receipts, nil
}

// leaseOneLocked leases offset off of queue q to g, as a receive's take
// does, and returns the receipt. The caller checked that it is free.
func (c *consumers) leaseOneLocked(g *group, q uint16, off uint64, invisible time.Duration) string {
	gq := g.queues[q]
	seq := c.nextLeaseSeqLocked()
	att := gq.attemptsOf(off) + 1
	gq.setAttempts(off, att)
	l := &lease{seq: seq, attempt: att}
	expires := c.disp.leaseTimeLocked() + clock.CeilMillis(invisible)
	l.timer = c.disp.startTimerLocked(timerRef{kind: refLease, due: expires, group: g.id, queue: q, offset: off, seq: seq})
	gq.setLease(off, l)
	g.delivered++
	if att > 1 {
		g.redelivered++
	}
	return c.ids.encodeReceipt(g.id, q, off, seq)
}

// take checks a selection of group's dead letters and leases them to the
// group's redrive reader, all or none.
func (d *DeadLetters) take(topic, group string, ids []message.ID) (*group, []deadRef, []string, error) {
	g, rg, dlq, err := d.reader(topic, group)
	if err != nil {
		return nil, nil, nil, err
	}
	refs, err := d.locate(g, rg, dlq, ids)
	if err != nil {
		return nil, nil, nil, err
	}
	d.eng.mu.Lock()
	defer d.eng.mu.Unlock()
	receipts, err := d.leaseLocked(g, rg, refs)
	return g, refs, receipts, err
}

// Resend sends the selected dead letters of group (of topic) back to the
// group, as new messages visible now for that group only: the topic's
// other groups never see them. It returns how many moved; a dead letter
// that today's limits refuse stays where it is (see Redrive).
func (d *DeadLetters) Resend(ctx context.Context, topic, group string, ids []message.ID) (int, error) {
	if len(ids) > d.eng.opts.MaxBatch {
		return 0, errs.New(errs.TooLarge, "%d dead letters selected; a resend sends at most %d (the batch limit)", len(ids), d.eng.opts.MaxBatch)
	}
	g, refs, receipts, err := d.take(topic, group, ids)
	if err != nil {
		return 0, err
	}
	reqs := make([]SendRequest, len(refs))
	for i, r := range refs {
		reqs[i] = redriveRequest(r.s.Message, topic, group, r.id)
	}
	return d.redriveSend(ctx, g, reqs, receipts)
}

// Delete removes the selected dead letters of group (of topic): they are
// acked by the redrive reader and are never listed or redriven again.
func (d *DeadLetters) Delete(ctx context.Context, topic, group string, ids []message.ID) (int, error) {
	g, refs, receipts, err := d.take(topic, group, ids)
	if err != nil {
		return 0, err
	}
	if err := d.eng.Ack(ctx, g.dlq, redriveGroup, receipts...); err != nil {
		d.eng.Release(g.dlq, redriveGroup, receipts)
		return 0, err
	}
	return len(refs), nil
}

// Purge removes every dead letter of group (of topic) there was when it
// began, MaxReceive at a time, each batch acked by the redrive reader in
// one durable append. Dead letters a redrive holds at that moment are left
// to it. It returns how many it removed; after an error, those removed
// before it stay removed.
func (d *DeadLetters) Purge(ctx context.Context, topic, group string) (int, error) {
	e := d.eng
	_, rg, dlq, err := d.reader(topic, group)
	if err != nil || dlq == nil {
		return 0, err
	}
	ends := make([]uint64, len(dlq.queues))
	for q, x := range dlq.queues {
		ends[q] = x.Len()
	}
	purged := 0
	for {
		if err := ctx.Err(); err != nil {
			return purged, err
		}
		e.mu.Lock()
		if err := e.life.unavailableLocked(); err != nil {
			e.mu.Unlock()
			return purged, err
		}
		receipts := e.cons.leaseFreeLocked(rg, ends, MaxReceive)
		e.mu.Unlock()
		if len(receipts) == 0 {
			return purged, nil
		}
		if err := e.Ack(ctx, dlq.name, redriveGroup, receipts...); err != nil {
			e.Release(dlq.name, redriveGroup, receipts)
			return purged, err
		}
		purged += len(receipts)
	}
}

// leaseFreeLocked leases to g up to most offsets below ends (per queue)
// that g has not finished with and that nothing holds, within
// MaxUnackedSpan of each queue's oldest, and returns their receipts.
func (c *consumers) leaseFreeLocked(g *group, ends []uint64, most int) []string {
	var out []string
	for q, gq := range g.queues {
		end := min(ends[q], gq.acked+uint64(c.opts.MaxUnackedSpan))
		for off := gq.acked; off < end && len(out) < most; off++ {
			if gq.isDone(off) || gq.leaseOf(off) != nil || gq.retryOf(off).running() {
				continue
			}
			out = append(out, c.leaseOneLocked(g, uint16(q), off, time.Minute))
		}
	}
	return slices.Clip(out)
}
