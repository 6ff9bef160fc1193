package engine

import (
	"context"
	"slices"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/errs"
)

// ReceiveRequest asks for visible messages for a group.
type ReceiveRequest struct {
	Topic, Group string
	// Max is the most messages to return; default 32, limit 1000.
	Max int
	// Invisible is the lease: how long the messages stay hidden from the
	// group unless acked; default 30s, limit 12h.
	Invisible time.Duration
	// Wait is how long to wait for a message when none is visible (long
	// poll); 0 returns at once; limit 30s.
	Wait time.Duration
	// Ack holds receipts of this group to acknowledge first (at most
	// MaxReceive), all or nothing as Ack does: a consumer acks its last
	// batch as it asks for the next. When messages can be leased at once,
	// the ack and the leases' attempt record share one commit-log append,
	// one fsync instead of two; when the receive has to wait, the acks are
	// made before the wait. An error means nothing was acked and nothing
	// leased. So once the acks are made, a later failure of the same call
	// (shutdown, a read error) is logged and answered as no messages: the
	// next call reports it.
	Ack []string
}

// Received is a message handed to a consumer under a lease.
type Received struct {
	Visible
	// Receipt identifies this delivery for Ack, Nack and ChangeInvisibility.
	Receipt string
	// Attempt is 1 for the first delivery to this group.
	Attempt int
	Queue   int
}

type handout struct {
	queue   uint16
	offset  uint64
	attempt uint32
	seq     uint32
	n       uint64 // queue length when taken, to read the entry
	until   int64  // the lease's end when taken, for the trail
}

// Receive hands out up to Max visible messages of a topic to a group
// (created on first use) under a lease, waiting up to Wait for one, after
// acknowledging the receipts of req.Ack (see ReceiveRequest.Ack).
func (e *Engine) Receive(ctx context.Context, req ReceiveRequest) ([]Received, error) {
	return e.cons.receiveAs(ctx, req, false)
}

// receiveAs is Receive; internal is the engine's own receive (a redrive's
// reader), which may use the engine's own group.
func (c *consumers) receiveAs(ctx context.Context, req ReceiveRequest, internal bool) ([]Received, error) {
	if req.Max == 0 {
		req.Max = DefaultReceive
	}
	if req.Invisible == 0 {
		req.Invisible = DefaultInvisible
	}
	switch {
	case req.Max < 1 || req.Max > MaxReceive:
		return nil, errs.New(errs.InvalidArgument, "max %d is not in [1, %d]", req.Max, MaxReceive)
	case req.Invisible < time.Millisecond || req.Invisible > MaxInvisible:
		return nil, errs.New(errs.InvalidArgument, "invisible %v is not in [1ms, %v]", req.Invisible, MaxInvisible)
	case req.Wait < 0 || req.Wait > MaxReceiveWait:
		return nil, errs.New(errs.InvalidArgument, "wait %v is not in [0, %v]", req.Wait, MaxReceiveWait)
	case len(req.Ack) > MaxReceive:
		return nil, errs.New(errs.TooLarge, "%d receipts to ack; the limit is %d", len(req.Ack), MaxReceive)
	}
	g, err := c.createGroup(req.Topic, req.Group, GroupConfig{}, true, internal)
	if err != nil {
		return nil, err
	}
	if len(req.Ack) > 0 {
		out, done, err := c.receiveAcking(g, req)
		if done || err != nil {
			return out, err
		}
		// The acks are made: a failure from here on must not say otherwise.
		out, err = c.receive(ctx, g, req)
		if err != nil {
			if ctx.Err() == nil {
				c.opts.Logger.Warn("receive failed after its acks were made", "topic", req.Topic, "group", req.Group, "err", err)
			}
			return nil, nil
		}
		return out, nil
	}
	return c.receive(ctx, g, req)
}

// receiveAcking is the first turn of a receive that carries acks: it
// checks them and leases in one critical section. With messages to hand
// out, the acks are written with their attempt record (done). Without,
// they are made alone and the caller goes on to wait (not done).
func (c *consumers) receiveAcking(g *group, req ReceiveRequest) (out []Received, done bool, err error) {
	c.mu.Lock()
	if err := c.life.unavailableLocked(); err != nil {
		c.mu.Unlock()
		return nil, true, err
	}
	a, err := c.stopAckedLocked(req.Topic, req.Group, req.Ack)
	if err != nil {
		c.mu.Unlock()
		return nil, true, err
	}
	hs := c.takeLocked(g, req.Max, req.Invisible)
	c.mu.Unlock()
	if len(hs) == 0 {
		c.gate.RLock()
		defer c.gate.RUnlock()
		err := c.commitAcks(a)
		return nil, err != nil, err
	}
	out, err = c.deliver(g, hs, a)
	if err != nil {
		return nil, true, err
	}
	// Every one expired or gone: a long poll waits on for others.
	return out, len(out) > 0 || req.Wait == 0, nil
}

// receive is Receive's lease-or-wait loop, for a checked request whose
// acks (if any) are made.
func (c *consumers) receive(ctx context.Context, g *group, req ReceiveRequest) ([]Received, error) {
	var deadline <-chan time.Time
	if req.Wait > 0 {
		// The injected clock: tests advance it instead of sleeping.
		t := c.opts.Clock.NewTimer(req.Wait)
		defer t.Stop()
		deadline = t.C()
	}
	// catchUp is set when the wait ended while the dispatcher was behind
	// the clock (a clock that jumped: a virtual clock's advance, a wall
	// step): the receive then waits, for at most a second of real time,
	// until everything due by the end of its wait is visible, polling the
	// frontier, so that a long poll open across an advance gets what the
	// advance made due rather than an empty answer.
	var catchUp <-chan time.Time
	var poll <-chan time.Time
	var endOfWait int64
	for {
		c.mu.Lock()
		if err := c.life.unavailableLocked(); err != nil {
			c.mu.Unlock()
			return nil, err
		}
		hs := c.takeLocked(g, req.Max, req.Invisible)
		signal := c.life.visibleLocked()
		behind := catchUp != nil && c.disp.frontierLocked() < endOfWait
		c.mu.Unlock()
		if len(hs) > 0 {
			out, err := c.deliver(g, hs, nil)
			if err != nil || len(out) > 0 || (deadline == nil && catchUp == nil) {
				return out, err
			}
			// Every one was expired or gone: wait on for others.
			continue
		}
		if (deadline == nil && catchUp == nil) || (catchUp != nil && !behind) {
			return nil, nil
		}
		select {
		case <-signal:
		case <-poll:
			poll = time.After(2 * time.Millisecond)
		// The wait's end and a message made visible can be ready at
		// once (a clock advance fires both), and select takes either: so
		// the end of a wait, or of its catch-up, is followed by one more
		// take before the empty answer (the loop's top returns when
		// neither is left), never by the empty answer directly.
		case <-deadline:
			deadline, endOfWait = nil, c.clock.Now()
			if c.disp.frontier() >= endOfWait {
				continue
			}
			c.life.kickLoop()
			catchUp, poll = time.After(time.Second), time.After(2*time.Millisecond)
		case <-catchUp:
			catchUp, poll = nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.life.stopping():
			return nil, errs.New(errs.Unavailable, "broker is shutting down")
		}
	}
}

// takeLocked leases up to max messages of g: redeliveries first, then new
// ones, queues in turn. In a FIFO topic a queue with a message in flight or
// in backoff hands out nothing, and at most one message at a time.
func (c *consumers) takeLocked(g *group, max int, invisible time.Duration) []handout {
	if g.paused {
		return nil
	}
	nq := len(g.queues)
	hs := make([]handout, 0, c.handoutRoomLocked(g, max))
	expires := c.disp.leaseTimeLocked() + clock.CeilMillis(invisible) // 1.5 ms lasts 2, never 1
	for i := 0; i < nq && len(hs) < max; i++ {
		qi := (g.rr + i) % nq
		gq := g.queues[qi]
		n := g.topic.queues[qi].Len()
		limit := max - len(hs)
		if g.topic.fifo {
			if gq.nLeases > 0 || gq.nRetrying > 0 {
				continue
			}
			limit = 1
		}
		take := func(off uint64) {
			seq := c.nextLeaseSeqLocked()
			att := gq.attemptsOf(off) + 1
			gq.setAttempts(off, att)
			l := &lease{seq: seq, attempt: att}
			l.timer = c.disp.startTimerLocked(timerRef{kind: refLease, due: expires, group: g.id, queue: uint16(qi), offset: off, seq: l.seq})
			gq.setLease(off, l)
			hs = append(hs, handout{queue: uint16(qi), offset: off, attempt: att, seq: l.seq, n: n, until: expires})
			limit--
			g.delivered++
			if att > 1 {
				g.redelivered++
			}
		}
		for limit > 0 && len(gq.ready) > 0 {
			off := gq.ready[0]
			gq.ready = gq.ready[1:]
			if !gq.isDone(off) && gq.leaseOf(off) == nil {
				take(off)
			}
		}
		// Offsets are handed out only within MaxUnackedSpan of the oldest
		// one not yet done, so that done and attempts stay bounded (in
		// memory and in the checkpoint) even behind a stuck message.
		end := min(n, gq.acked+uint64(c.opts.MaxUnackedSpan))
		for limit > 0 && gq.next < end {
			off := gq.next
			gq.next++
			if gq.isDone(off) || gq.leaseOf(off) != nil || gq.retryOf(off).running() {
				continue
			}
			take(off)
		}
	}
	g.rr = (g.rr + 1) % nq
	return hs
}

// handoutRoomLocked bounds what takeLocked may hand out, to size its
// slice (a thousand handouts under a herd) rather than grow it by
// doubling, and without allocating for a take that finds nothing: in a
// FIFO topic one a free queue, otherwise the ready redeliveries and the
// new offsets within MaxUnackedSpan.
func (c *consumers) handoutRoomLocked(g *group, max int) int {
	n := 0
	for qi, gq := range g.queues {
		switch {
		case g.topic.fifo:
			if gq.nLeases == 0 && gq.nRetrying == 0 {
				n++
			}
		default:
			end := min(g.topic.queues[qi].Len(), gq.acked+uint64(c.opts.MaxUnackedSpan))
			n += len(gq.ready)
			if end > gq.next {
				n += int(min(end-gq.next, uint64(max)))
			}
		}
		if n >= max {
			return max
		}
	}
	return n
}

// deliver reads the handed-out messages and records the attempts, with
// the acks a (if not nil) in the same append. If a read fails, nothing is
// handed out: the leases are given back (and a's restored) and the caller
// gets Unavailable; the messages stay where they were for the next
// receive. A record that retention removed is skipped (and marked done).
// A record that fails validation is set aside (damage.go): the others are
// given back, a's restored, and the caller gets DataLoss.
func (c *consumers) deliver(g *group, hs []handout, a *ackBatch) ([]Received, error) {
	out, items, skip, expired, bad, err := c.readHandouts(g, hs)
	if err != nil || len(bad) > 0 {
		// The damaged ones keep their leases until they are set aside, so
		// that no other receive meets them meanwhile.
		c.mu.Lock()
		c.giveBackLocked(g, withoutBad(hs, bad))
		if a != nil {
			a.restoreLocked(c.disp)
		}
		c.mu.Unlock()
		if err != nil {
			c.stats.ReadErrors.Add(1)
			return nil, errs.Wrap(errs.Unavailable, err, "read topic %s", g.topic.name)
		}
		c.gate.RLock()
		defer c.gate.RUnlock()
		return nil, c.setAsideHandouts(g, bad)
	}
	c.gate.RLock()
	defer c.gate.RUnlock()
	if err := c.appendDelivery(g, hs, a, items); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if a != nil {
		a.doneLocked(c.life)
	}
	for _, it := range items {
		// The lease learns its message's position for the trail entries of
		// its ack, nack or expiry, unless it already ended.
		if l := g.queues[it.queue].leaseOf(it.offset); l != nil && l.attempt == it.attempt {
			l.pos, l.hasPos = it.pos, true
		}
	}
	if len(expired) > 0 {
		c.expireHandoutsLocked(g, expired)
	}
	gone := 0
	for _, sk := range skip {
		h := sk.handout
		gq := g.queues[h.queue]
		if l := gq.leaseOf(h.offset); l != nil && l.seq == h.seq {
			c.disp.stopTimerLocked(l.timer)
			gq.setLease(h.offset, nil)
		}
		gq.markDone(h.offset)
		// Skipped, not delivered: the group's counts say what consumers got.
		g.delivered--
		if h.attempt > 1 {
			g.redelivered--
		}
		if sk.gone {
			gone++
		}
	}
	if gone > 0 {
		c.stats.RetentionSkipped.Add(uint64(gone))
		c.opts.Logger.Warn("messages removed by retention before the group received them were skipped", "topic", g.topic.name, "group", g.name, "messages", gone)
	}
	return out, nil
}

// skipped is a handout passed over: its record is gone (retention), or
// the message is for another group (ForGroup).
type skipped struct {
	handout
	gone bool
}

// appendDelivery writes the attempt record of items, after a's ack record
// if a is not nil; the caller holds gate shared. The attempt record makes
// attempt counts survive a crash, so a message is handed out only once it
// is written: if it fails, the receive fails, the acks' leases (if any)
// are restored and the handouts given back, so that nothing is acked,
// nothing leased and no attempt counted. A log failed for good stops the
// engine here as under any other append, so no later receive hands out a
// message whose attempt no record counts.
func (c *consumers) appendDelivery(g *group, hs []handout, a *ackBatch, items []progressItem) error {
	recs := a.appendRecord(make([]commitlog.Record, 0, 4))
	if len(items) > 0 {
		recs = append(recs, encodeProgress(recAttempt, g.id, items))
		if !g.internal {
			recs = trailRecords(recs, deliveryTrail(g, items, c.clock.Now()))
		}
	}
	if len(recs) == 0 {
		return nil
	}
	if _, err := c.log.Append(recs...); err != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if a != nil {
			a.restoreLocked(c.disp)
		}
		c.giveBackLocked(g, hs)
		return c.life.storageErrLocked(err)
	}
	return nil
}

// readHandouts reads the records of hs and sorts them into messages to
// hand out (with their attempt items), messages to pass over (records
// retention removed, messages for another group: skip), messages past
// their deadline (expired) and damaged records (bad).
func (c *consumers) readHandouts(g *group, hs []handout) (out []Received, items []progressItem, skip []skipped, expired []handout, bad []damagedHandout, err error) {
	entries, err := handoutEntries(g.topic, hs)
	if err != nil {
		return nil, nil, nil, nil, nil, err
	}
	pos := make([]uint64, len(entries))
	for i, en := range entries {
		pos[i] = en.Pos
	}
	stored, damaged, err := c.readStoredEach(pos)
	if err != nil {
		return nil, nil, nil, nil, nil, err
	}
	out = make([]Received, 0, len(hs))
	items = make([]progressItem, 0, len(hs))
	now := c.clock.Now()
	for i, h := range hs {
		en, s := entries[i], stored[i]
		switch {
		case damaged[i] != nil:
			bad = append(bad, damagedHandout{handout: h, pos: en.Pos, err: damaged[i]})
			continue
		case s == nil:
			skip = append(skip, skipped{handout: h, gone: true})
			continue
		case s.ForGroup != "" && s.ForGroup != g.name:
			skip = append(skip, skipped{handout: h})
			continue
		case s.Deadline != 0 && now > s.Deadline:
			expired = append(expired, h)
			continue
		}
		out = append(out, Received{
			Visible: Visible{ID: c.ids.seal.ID(en.Pos, s.Nonce), Offset: h.offset, Due: en.Due, Visible: en.Visible, Message: s},
			Receipt: c.ids.encodeReceipt(g.id, h.queue, h.offset, h.seq), Attempt: int(h.attempt), Queue: int(h.queue),
		})
		items = append(items, progressItem{queue: h.queue, offset: h.offset, attempt: h.attempt, pos: en.Pos, until: h.until})
	}
	return out, items, skip, expired, bad, nil
}

// withoutBad returns the handouts of hs that are not in bad (which are
// few: usually none).
func withoutBad(hs []handout, bad []damagedHandout) []handout {
	if len(bad) == 0 {
		return hs
	}
	out := make([]handout, 0, len(hs))
	for _, h := range hs {
		if !slices.ContainsFunc(bad, func(b damagedHandout) bool { return b.handout == h }) {
			out = append(out, h)
		}
	}
	return out
}

// giveBackLocked undoes a handout that could not be delivered: the leases
// end, the attempt counts go back, and the offsets are ready again at once.
func (c *consumers) giveBackLocked(g *group, hs []handout) {
	for _, h := range hs {
		if c.takeBackLocked(g, h) {
			g.queues[h.queue].ready = append(g.queues[h.queue].ready, h.offset)
		}
	}
}

// takeBackLocked undoes the lease of a handout, if it still holds it: the
// lease ends and the attempt count and counters go back. It reports
// whether it did.
func (c *consumers) takeBackLocked(g *group, h handout) bool {
	gq := g.queues[h.queue]
	l := gq.leaseOf(h.offset)
	if l == nil || l.seq != h.seq {
		return false
	}
	c.disp.stopTimerLocked(l.timer)
	gq.setLease(h.offset, nil)
	if h.attempt <= 1 {
		gq.setAttempts(h.offset, 0)
	} else {
		gq.setAttempts(h.offset, h.attempt-1)
		g.redelivered--
	}
	g.delivered--
	return true
}

// deliveryTrail is the trail entries of the deliveries items of g at now.
func deliveryTrail(g *group, items []progressItem, now int64) []trailEntry {
	es := make([]trailEntry, len(items))
	for i, it := range items {
		es[i] = trailEntry{kind: trailDelivered, pos: it.pos, group: g.id, attempt: it.attempt, at: now, arg: it.until}
	}
	return es
}
