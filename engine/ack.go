package engine

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/errs"
)

// leaseLocked finds the live lease a receipt names.
func (c *consumers) leaseLocked(topic, name, receipt string) (*group, *groupQueue, uint16, uint64, *lease, error) {
	g, err := c.groupLocked(topic, name)
	if err != nil {
		return nil, nil, 0, 0, nil, err
	}
	gq, q, off, l, err := c.groupLeaseLocked(g, receipt)
	return g, gq, q, off, l, err
}

// groupLocked finds a group that must exist.
func (c *consumers) groupLocked(topic, name string) (*group, error) {
	g := c.group(topic, name)
	if g == nil {
		return nil, errs.New(errs.NotFound, "group %q of topic %q does not exist", name, topic)
	}
	return g, nil
}

// groupLeaseLocked finds the live lease of g a receipt names.
func (c *consumers) groupLeaseLocked(g *group, receipt string) (*groupQueue, uint16, uint64, *lease, error) {
	q, off, seq, err := c.ids.decodeReceipt(g.id, receipt)
	if err != nil {
		return nil, 0, 0, nil, err
	}
	if int(q) >= len(g.queues) {
		return nil, 0, 0, nil, errs.New(errs.NotFound, "receipt %q is unknown", receipt)
	}
	gq := g.queues[q]
	l := gq.leaseOf(off)
	if l == nil || l.seq != seq {
		return nil, 0, 0, nil, errs.New(errs.NotFound, "receipt %q is unknown or its lease has ended", receipt)
	}
	return gq, q, off, l, nil
}

// Ack ends deliveries: the messages will not be delivered to the group
// again. All receipts are checked first; if one is unknown nothing is acked.
func (e *Engine) Ack(ctx context.Context, topic, name string, receipts ...string) error {
	a, err := e.cons.stopAcks(ctx, topic, name, receipts)
	if err != nil {
		return err
	}
	defer e.gate.RUnlock()
	return e.cons.commitAcks(a)
}

// stopAcks checks an ack's receipts and ends their leases (Ack and
// AckBehind). On success it returns with gate held shared, for the caller to release once the ack
// is applied (invariant E2); on error nothing changed and gate is free.
func (c *consumers) stopAcks(ctx context.Context, topic, name string, receipts []string) (*ackBatch, error) {
	if len(receipts) == 0 {
		return nil, errs.New(errs.InvalidArgument, "no receipts to ack")
	}
	if len(receipts) > MaxReceive {
		return nil, errs.New(errs.TooLarge, "%d receipts; the limit is %d", len(receipts), MaxReceive)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.gate.RLock()
	c.mu.Lock()
	if err := c.life.unavailableLocked(); err != nil {
		c.mu.Unlock()
		c.gate.RUnlock()
		return nil, err
	}
	a, err := c.stopAckedLocked(topic, name, receipts)
	c.mu.Unlock()
	if err != nil {
		c.gate.RUnlock()
		return nil, err
	}
	return a, nil
}

// ackBatch is an ack whose leases are stopped (so none expires while its
// record is written) and whose record is not yet durable. Exactly one of
// restoreLocked (the record failed) and doneLocked (it is durable) follows.
type ackBatch struct {
	g      *group
	leases []ackedLease
	items  []progressItem
	// at is when the ack was asked for, for its trail entries; redriveTo
	// is the group a redrive acks dead letters for: then the entries say
	// "redriven" rather than "acked" (trailrec.go).
	at        int64
	redriveTo *group
}

type ackedLease struct {
	gq  *groupQueue
	q   uint16
	off uint64
	l   *lease
	ref timerRef
}

// stopAckedLocked checks every receipt, then stops their leases. If one
// is unknown it changes nothing. Receipts that name one lease (the same
// receipt twice) count once.
func (c *consumers) stopAckedLocked(topic, name string, receipts []string) (*ackBatch, error) {
	g, err := c.groupLocked(topic, name)
	if err != nil {
		return nil, err
	}
	a := &ackBatch{g: g, leases: make([]ackedLease, 0, len(receipts)), at: c.clock.Now()}
	for _, r := range receipts {
		gq, q, off, l, err := c.groupLeaseLocked(g, r)
		if err != nil {
			return nil, err
		}
		a.leases = append(a.leases, ackedLease{gq: gq, q: q, off: off, l: l, ref: l.timer.ref()})
	}
	// A consumer acks in the order it received, mostly by offset within
	// each queue: the sort is cheap, and cheaper than a set of receipts.
	slices.SortFunc(a.leases, func(x, y ackedLease) int {
		if c := cmp.Compare(x.q, y.q); c != 0 {
			return c
		}
		return cmp.Compare(x.off, y.off)
	})
	a.leases = slices.CompactFunc(a.leases, func(x, y ackedLease) bool { return x.l == y.l })
	a.items = make([]progressItem, len(a.leases))
	for i, t := range a.leases {
		a.items[i] = progressItem{queue: t.q, offset: t.off}
		c.disp.stopTimerLocked(t.l.timer)
		t.gq.setLease(t.off, nil)
	}
	return a, nil
}

// appendRecord appends a's records to recs, if a is not nil: the ack
// record, then the trail record that times it.
func (a *ackBatch) appendRecord(recs []commitlog.Record) []commitlog.Record {
	if a == nil {
		return recs
	}
	return trailRecords(append(recs, encodeProgress(recAck, a.g.id, a.items)), a.trail())
}

// trail is the trail entries of a: one a message, none for the engine's
// own group unless it redrives.
func (a *ackBatch) trail() []trailEntry {
	kind, gid := trailAcked, a.g.id
	switch {
	case a.redriveTo != nil:
		kind, gid = trailRedriven, a.redriveTo.id
	case a.g.internal:
		return nil
	}
	es := make([]trailEntry, 0, len(a.leases))
	for _, t := range a.leases {
		if !t.l.hasPos {
			continue
		}
		te := trailEntry{kind: kind, pos: t.l.pos, group: gid, attempt: t.l.attempt, at: a.at}
		if a.redriveTo != nil {
			te.attempt = 0 // the redrive reader's attempts mean nothing to the group
		}
		es = append(es, te)
	}
	return es
}

// restoreLocked gives the leases back after the ack's record failed.
func (a *ackBatch) restoreLocked(disp *dispatcher) {
	for _, t := range a.leases {
		t.l.timer = disp.startTimerLocked(t.ref)
		t.gq.setLease(t.off, t.l)
	}
}

// doneLocked applies the ack once its record is durable; a nil a has
// nothing to apply.
func (a *ackBatch) doneLocked(life *lifecycle) {
	if a == nil {
		return
	}
	for _, t := range a.leases {
		t.gq.markDone(t.off)
	}
	a.g.acked += uint64(len(a.leases))
	if a.g.topic.fifo {
		// The ack unblocks the queue's next message: wake long polls.
		life.notifyVisibleLocked()
	}
}

// commitAcks writes a's record alone and applies it. The caller holds
// gate shared (invariant E2: from before the append until the effect is
// applied).
func (c *consumers) commitAcks(a *ackBatch) error {
	_, err := c.log.Append(a.appendRecord(nil)...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		a.restoreLocked(c.disp)
		return c.life.storageErrLocked(err)
	}
	a.doneLocked(c.life)
	return nil
}

// Nack ends a delivery unsuccessfully: the message comes back after delay,
// or after the group's backoff when delay is 0, or moves to the dead-letter
// topic when it has had MaxAttempts deliveries.
func (e *Engine) Nack(ctx context.Context, topic, name, receipt string, delay time.Duration) error {
	if delay < 0 || delay > MaxInvisible {
		return errs.New(errs.InvalidArgument, "delay %v is not in [0, %v]", delay, MaxInvisible)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	g, gq, q, off, l, err := e.cons.leaseLocked(topic, name, receipt)
	if err != nil {
		return err
	}
	e.disp.stopTimerLocked(l.timer)
	gq.setLease(off, nil)
	now := e.disp.leaseTimeLocked()
	back := e.cons.failedLocked(g, gq, q, off, l.attempt, delay, now)
	e.cons.noteTrailLocked(g, l, trailNacked, now, back)
	return nil
}

// ChangeInvisibility moves the end of a lease to d from now.
func (e *Engine) ChangeInvisibility(ctx context.Context, topic, name, receipt string, d time.Duration) error {
	if d < time.Millisecond || d > MaxInvisible {
		return errs.New(errs.InvalidArgument, "invisible %v is not in [1ms, %v]", d, MaxInvisible)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _, _, _, l, err := e.cons.leaseLocked(topic, name, receipt)
	if err != nil {
		return err
	}
	ref := e.disp.stopTimerLocked(l.timer)
	ref.due = e.disp.leaseTimeLocked() + clock.CeilMillis(d) // never shorter than asked
	l.timer = e.disp.startTimerLocked(ref)
	return nil
}

// leaseExpiredLocked handles a lease that ended unacknowledged.
func (c *consumers) leaseExpiredLocked(ref timerRef) {
	g := c.byIDLocked(ref.group)
	if g == nil {
		return
	}
	gq := g.queues[ref.queue]
	l := gq.leaseOf(ref.offset)
	if l == nil || l.seq != ref.seq {
		return
	}
	gq.setLease(ref.offset, nil)
	// The backoff counts from when the lease ended, not from when the loop noticed.
	back := c.failedLocked(g, gq, ref.queue, ref.offset, l.attempt, 0, ref.due)
	c.noteTrailLocked(g, l, trailLeaseExpired, ref.due, back)
}

// failedLocked schedules a redelivery or a dead-lettering. It returns when
// the message comes back, or 0 when it is dead-lettered.
func (c *consumers) failedLocked(g *group, gq *groupQueue, q uint16, off uint64, attempt uint32, delay time.Duration, from int64) int64 {
	if int(attempt) >= g.cfg.MaxAttempts {
		c.addDeadLettersLocked(deadLetter{g: g, queue: q, offset: off, attempt: attempt})
		c.life.kickLoop()
		return 0
	}
	if delay == 0 {
		delay = g.cfg.Backoff(attempt)
	}
	due := from + clock.CeilMillis(delay)
	gq.setRetry(off, c.disp.startTimerLocked(timerRef{kind: refRetry, due: due, group: g.id, queue: q, offset: off}))
	return due
}

// retryReadyLocked makes a message whose backoff ended receivable again.
func (c *consumers) retryReadyLocked(ref timerRef) {
	g := c.byIDLocked(ref.group)
	if g == nil {
		return
	}
	gq := g.queues[ref.queue]
	gq.setRetry(ref.offset, timerHandle{})
	gq.ready = append(gq.ready, ref.offset)
	c.life.notifyVisibleLocked()
}
