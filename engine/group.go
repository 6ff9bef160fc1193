package engine

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// Consumer groups: each group of a topic receives every message of the
// topic once (at least once). A receive hands out visible messages under a
// lease (an invisibility duration); an ack ends them; a lease that ends
// unacknowledged, or a nack, brings the message back after a backoff through
// the engine's timing wheel; after MaxAttempts deliveries it moves to the
// group's dead-letter topic.
//
// Durable: group creation, acks and delivery attempts are commit-log
// records, and the checkpoint holds each group queue's progress. Not
// durable: leases and backoffs. After a crash every message that was in
// flight is handed out again at once, with its attempt count kept: that is
// the documented redelivery window of at-least-once.

// Record types of consumer groups (part of the on-disk format).
const (
	recGroup   commitlog.Type = 6 // id u32, topic u32, max attempts u32, backoff base ms i64, max ms i64, name
	recAck     commitlog.Type = 7 // group u32, n u32, n x (queue u16, offset u64)
	recAttempt commitlog.Type = 8 // group u32, n u32, n x (queue u16, offset u64, attempt u32)
)

// Limits of Receive.
const (
	MaxReceive       = 1000
	MaxInvisible     = 12 * time.Hour
	MaxReceiveWait   = 30 * time.Second
	DefaultReceive   = 32
	DefaultInvisible = 30 * time.Second
)

// GroupConfig configures a consumer group; zero values mean defaults.
type GroupConfig struct {
	// MaxAttempts is how many deliveries a message gets before it moves to
	// the dead-letter topic; default 16.
	MaxAttempts int
	// BackoffBase is the wait before the second delivery; each further
	// attempt doubles it; default 1s.
	BackoffBase time.Duration
	// BackoffMax caps the backoff; default 5m.
	BackoffMax time.Duration
}

func (c *GroupConfig) setDefaults() {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 16
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = time.Second
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = 5 * time.Minute
	}
}

func (c GroupConfig) validate() error {
	switch {
	case c.MaxAttempts < 1 || c.MaxAttempts > 1000:
		return errs.New(errs.InvalidArgument, "max attempts %d is not in [1, 1000]", c.MaxAttempts)
	case c.BackoffBase < time.Millisecond || c.BackoffBase > time.Hour:
		return errs.New(errs.InvalidArgument, "backoff base %v is not in [1ms, 1h]", c.BackoffBase)
	case c.BackoffMax < c.BackoffBase || c.BackoffMax > 24*time.Hour:
		return errs.New(errs.InvalidArgument, "backoff max %v is not in [backoff base, 24h]", c.BackoffMax)
	}
	return nil
}

// backoff returns the wait after the attempt-th delivery failed.
func (c GroupConfig) backoff(attempt uint32) time.Duration {
	d := c.BackoffBase
	for i := uint32(1); i < attempt && d < c.BackoffMax; i++ {
		d *= 2
	}
	return min(d, c.BackoffMax)
}

// group is one consumer group of one topic.
type group struct {
	id     uint32
	name   string
	topic  *topic
	cfg    GroupConfig
	dlq    string
	queues []*groupQueue
	rr     int
	// Counters, under mu.
	delivered, acked, redelivered, deadLettered uint64
}

// groupQueue is a group's progress in one queue. Invariant: every offset
// below acked is done; done holds the done offsets at or above acked;
// next >= acked is the first offset never handed out since start.
type groupQueue struct {
	acked    uint64
	next     uint64
	done     map[uint64]bool
	attempts map[uint64]uint32
	leases   map[uint64]*lease
	retrying map[uint64]*wheelTimer
	ready    []uint64 // offsets whose backoff ended, in order
}

type lease struct {
	seq     uint32
	attempt uint32
	timer   *wheelTimer
}

func newGroupQueue() *groupQueue {
	return &groupQueue{done: map[uint64]bool{}, attempts: map[uint64]uint32{}, leases: map[uint64]*lease{}, retrying: map[uint64]*wheelTimer{}}
}

func (gq *groupQueue) markDone(off uint64) {
	if off < gq.acked {
		return
	}
	gq.done[off] = true
	delete(gq.attempts, off)
	for gq.done[gq.acked] {
		delete(gq.done, gq.acked)
		gq.acked++
	}
	if gq.next < gq.acked {
		gq.next = gq.acked
	}
}

// deadLetter is a message waiting to move to its group's dead-letter topic.
type deadLetter struct {
	g       *group
	queue   uint16
	offset  uint64
	attempt uint32
}

func groupKey(topic, name string) string { return topic + "\x00" + name }

// DeadLetterTopic is the name of a group's dead-letter topic.
func DeadLetterTopic(topic, group string) string { return "%DLQ%" + topic + "." + group }

// CreateGroup durably creates a consumer group of a topic; it starts at
// the first message of every queue.
func (e *Engine) CreateGroup(topic, name string, cfg GroupConfig) error {
	_, err := e.createGroup(topic, name, cfg, false)
	return err
}

func (e *Engine) createGroup(topicName, name string, cfg GroupConfig, existingOK bool) (*group, error) {
	if err := message.ValidateTopic(name); err != nil {
		return nil, errs.New(errs.InvalidArgument, "group name: %s", err.Error())
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := message.ValidateTopic(DeadLetterTopic(topicName, name)); err != nil {
		return nil, errs.New(errs.InvalidArgument, "topic and group names together are too long for the dead-letter topic")
	}
	// The common case, the group exists, takes mu only.
	e.mu.Lock()
	if err := e.unavailableLocked(); err != nil {
		e.mu.Unlock()
		return nil, err
	}
	if g := e.groups[groupKey(topicName, name)]; g != nil {
		e.mu.Unlock()
		if existingOK {
			return g, nil
		}
		return g, errs.New(errs.AlreadyExists, "group %q of topic %q exists", name, topicName)
	}
	e.mu.Unlock()
	// Creation: serialised by createMu, the record's fsync without mu (see
	// createTopic).
	e.createMu.Lock()
	defer e.createMu.Unlock()
	e.gate.RLock()
	defer e.gate.RUnlock()
	e.mu.Lock()
	t := e.topicsByName[topicName]
	g := e.groups[groupKey(topicName, name)]
	id := e.nextGroupID
	e.mu.Unlock()
	switch {
	case t == nil:
		return nil, errs.New(errs.NotFound, "topic %q does not exist", topicName)
	case g != nil && existingOK:
		return g, nil
	case g != nil:
		return g, errs.New(errs.AlreadyExists, "group %q of topic %q exists", name, topicName)
	}
	if _, err := e.clog.Append(encodeGroup(id, t.id, cfg, name)); err != nil {
		return nil, e.storageErr(err)
	}
	e.mu.Lock()
	g = e.applyGroupLocked(id, t, cfg, name)
	e.mu.Unlock()
	e.log.Info("group created", "topic", topicName, "group", name)
	return g, nil
}

func (e *Engine) applyGroupLocked(id uint32, t *topic, cfg GroupConfig, name string) *group {
	g := &group{id: id, name: name, topic: t, cfg: cfg, dlq: DeadLetterTopic(t.name, name)}
	for range t.queues {
		g.queues = append(g.queues, newGroupQueue())
	}
	e.groups[groupKey(t.name, name)] = g
	e.groupsByID[id] = g
	if id >= e.nextGroupID {
		e.nextGroupID = id + 1
	}
	return g
}

func encodeGroup(id, topicID uint32, cfg GroupConfig, name string) commitlog.Record {
	b := binary.LittleEndian.AppendUint32(nil, id)
	b = binary.LittleEndian.AppendUint32(b, topicID)
	b = binary.LittleEndian.AppendUint32(b, uint32(cfg.MaxAttempts))
	b = binary.LittleEndian.AppendUint64(b, uint64(cfg.BackoffBase.Milliseconds()))
	b = binary.LittleEndian.AppendUint64(b, uint64(cfg.BackoffMax.Milliseconds()))
	return commitlog.Record{Type: recGroup, Payload: append(b, name...)}
}

func decodeGroup(p []byte) (id, topicID uint32, cfg GroupConfig, name string, err error) {
	if len(p) < 28 {
		return 0, 0, cfg, "", errBadPayload
	}
	cfg.MaxAttempts = int(binary.LittleEndian.Uint32(p[8:]))
	cfg.BackoffBase = time.Duration(binary.LittleEndian.Uint64(p[12:])) * time.Millisecond
	cfg.BackoffMax = time.Duration(binary.LittleEndian.Uint64(p[20:])) * time.Millisecond
	return binary.LittleEndian.Uint32(p), binary.LittleEndian.Uint32(p[4:]), cfg, string(p[28:]), nil
}

// progressItem names one message of a group: queue and offset, and for
// attempt records the attempt number.
type progressItem struct {
	queue   uint16
	offset  uint64
	attempt uint32
}

func encodeProgress(typ commitlog.Type, gid uint32, items []progressItem) commitlog.Record {
	b := binary.LittleEndian.AppendUint32(nil, gid)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(items)))
	for _, it := range items {
		b = binary.LittleEndian.AppendUint16(b, it.queue)
		b = binary.LittleEndian.AppendUint64(b, it.offset)
		if typ == recAttempt {
			b = binary.LittleEndian.AppendUint32(b, it.attempt)
		}
	}
	return commitlog.Record{Type: typ, Payload: b}
}

func decodeProgress(typ commitlog.Type, p []byte) (uint32, []progressItem, error) {
	if len(p) < 8 {
		return 0, nil, errBadPayload
	}
	gid, n := binary.LittleEndian.Uint32(p), int(binary.LittleEndian.Uint32(p[4:]))
	size := 10
	if typ == recAttempt {
		size = 14
	}
	p = p[8:]
	if len(p) != n*size {
		return 0, nil, errBadPayload
	}
	items := make([]progressItem, n)
	for i := range items {
		b := p[i*size:]
		items[i] = progressItem{queue: binary.LittleEndian.Uint16(b), offset: binary.LittleEndian.Uint64(b[2:])}
		if typ == recAttempt {
			items[i].attempt = binary.LittleEndian.Uint32(b[10:])
		}
	}
	return gid, items, nil
}

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
}

// Receive hands out up to Max visible messages of a topic to a group
// (created on first use) under a lease, waiting up to Wait for one.
func (e *Engine) Receive(ctx context.Context, req ReceiveRequest) ([]Received, error) {
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
	}
	g, err := e.createGroup(req.Topic, req.Group, GroupConfig{}, true)
	if err != nil {
		return nil, err
	}
	var deadline <-chan time.Time
	if req.Wait > 0 {
		// The injected clock: tests advance it instead of sleeping.
		t := e.opts.Clock.NewTimer(req.Wait)
		defer t.Stop()
		deadline = t.C()
	}
	for {
		e.mu.Lock()
		if err := e.unavailableLocked(); err != nil {
			e.mu.Unlock()
			return nil, err
		}
		hs := e.takeLocked(g, req.Max, req.Invisible)
		signal := e.visibleCh
		e.mu.Unlock()
		if len(hs) > 0 {
			return e.deliver(g, hs)
		}
		if deadline == nil {
			return nil, nil
		}
		select {
		case <-signal:
		case <-deadline:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-e.done:
			return nil, errs.New(errs.Unavailable, "broker is shutting down")
		}
	}
}

// takeLocked leases up to max messages of g: redeliveries first, then new
// ones, queues in turn. In a FIFO topic a queue with a message in flight or
// in backoff hands out nothing, and at most one message at a time.
func (e *Engine) takeLocked(g *group, max int, invisible time.Duration) []handout {
	var hs []handout
	nq := len(g.queues)
	expires := e.lastAdvanceOrNow() + invisible.Milliseconds()
	for i := 0; i < nq && len(hs) < max; i++ {
		qi := (g.rr + i) % nq
		gq := g.queues[qi]
		n := g.topic.queues[qi].Len()
		limit := max - len(hs)
		if g.topic.fifo {
			if len(gq.leases) > 0 || len(gq.retrying) > 0 {
				continue
			}
			limit = 1
		}
		take := func(off uint64) {
			e.leaseSeq++
			att := gq.attempts[off] + 1
			gq.attempts[off] = att
			l := &lease{seq: e.leaseSeq, attempt: att}
			l.timer = e.addWheelLocked(timerRef{kind: refLease, due: expires, group: g.id, queue: uint16(qi), offset: off, seq: l.seq})
			gq.leases[off] = l
			hs = append(hs, handout{queue: uint16(qi), offset: off, attempt: att, seq: l.seq, n: n})
			limit--
			g.delivered++
			if att > 1 {
				g.redelivered++
			}
		}
		for limit > 0 && len(gq.ready) > 0 {
			off := gq.ready[0]
			gq.ready = gq.ready[1:]
			if off >= gq.acked && !gq.done[off] && gq.leases[off] == nil {
				take(off)
			}
		}
		// Offsets are handed out only within MaxUnackedSpan of the oldest
		// one not yet done, so that done and attempts stay bounded (in
		// memory and in the checkpoint) even behind a stuck message.
		end := min(n, gq.acked+uint64(e.opts.MaxUnackedSpan))
		for limit > 0 && gq.next < end {
			off := gq.next
			gq.next++
			if gq.done[off] || gq.leases[off] != nil || gq.retrying[off] != nil {
				continue
			}
			take(off)
		}
	}
	g.rr = (g.rr + 1) % nq
	return hs
}

// lastAdvanceOrNow is the wheel's time, the base of lease deadlines.
func (e *Engine) lastAdvanceOrNow() int64 {
	return max(e.lastAdvance, e.Now())
}

// deliver reads the handed-out messages and records the attempts. If a
// read fails, nothing is handed out: the leases are given back and the
// caller gets Unavailable; the messages stay where they were for the next
// receive. Only a record that retention removed is skipped (and marked done).
func (e *Engine) deliver(g *group, hs []handout) ([]Received, error) {
	out := make([]Received, 0, len(hs))
	items := make([]progressItem, 0, len(hs))
	var gone []handout
	for _, h := range hs {
		en, err := g.topic.queues[h.queue].Read(h.offset, 1, h.n)
		if err == nil && len(en) != 1 {
			err = fmt.Errorf("queue entry %d is missing", h.offset)
		}
		var s *message.Stored
		if err == nil {
			s, _, err = e.readStored(en[0].Pos)
			if errors.Is(err, errGone) {
				gone = append(gone, h)
				continue
			}
		}
		if err != nil {
			e.mu.Lock()
			e.giveBackLocked(g, hs)
			e.mu.Unlock()
			e.stats.ReadErrors.Add(1)
			return nil, errs.Wrap(errs.Unavailable, err, "read topic %s queue %d offset %d", g.topic.name, h.queue, h.offset)
		}
		out = append(out, Received{
			Visible: Visible{ID: e.seal.ID(en[0].Pos, s.Nonce), Offset: h.offset, Due: en[0].Due, Visible: en[0].Visible, Message: s},
			Receipt: e.encodeReceipt(g.id, h.queue, h.offset, h.seq), Attempt: int(h.attempt), Queue: int(h.queue),
		})
		items = append(items, progressItem{queue: h.queue, offset: h.offset, attempt: h.attempt})
	}
	e.gate.RLock()
	defer e.gate.RUnlock()
	// The attempt record makes attempt counts survive a crash. If it cannot
	// be written the messages are still handed out: delivery is at least once.
	if len(items) > 0 {
		if _, err := e.clog.Append(encodeProgress(recAttempt, g.id, items)); err != nil {
			e.log.Warn("attempt record write failed", "err", err)
		}
	}
	if len(gone) > 0 {
		e.mu.Lock()
		for _, h := range gone {
			gq := g.queues[h.queue]
			if l := gq.leases[h.offset]; l != nil && l.seq == h.seq {
				e.wheel.Cancel(l.timer)
				e.free = append(e.free, l.timer)
				delete(gq.leases, h.offset)
			}
			gq.markDone(h.offset)
		}
		e.mu.Unlock()
	}
	return out, nil
}

// giveBackLocked undoes a handout that could not be delivered: the leases
// end, the attempt counts go back, and the offsets are ready again at once.
func (e *Engine) giveBackLocked(g *group, hs []handout) {
	for _, h := range hs {
		gq := g.queues[h.queue]
		l := gq.leases[h.offset]
		if l == nil || l.seq != h.seq {
			continue
		}
		e.wheel.Cancel(l.timer)
		e.free = append(e.free, l.timer)
		delete(gq.leases, h.offset)
		if h.attempt <= 1 {
			delete(gq.attempts, h.offset)
		} else {
			gq.attempts[h.offset] = h.attempt - 1
			g.redelivered--
		}
		g.delivered--
		gq.ready = append(gq.ready, h.offset)
	}
}

// A receipt names one lease: queue u16, offset u64, lease sequence u32 and
// a tag u64 that seals them with the group's id under the process's receipt
// key, so a receipt cannot be made up or carried over from an earlier
// process, and sequence numbers never meet an old receipt.
const receiptLen = 2 + 8 + 4 + 8

func (e *Engine) receiptTag(gid uint32, queue uint16, offset uint64, seq uint32) uint64 {
	return e.receipts.Tag(offset, uint64(gid)<<32|uint64(seq)^uint64(queue)<<16)
}

func (e *Engine) encodeReceipt(gid uint32, queue uint16, offset uint64, seq uint32) string {
	var b [receiptLen]byte
	binary.BigEndian.PutUint16(b[:], queue)
	binary.BigEndian.PutUint64(b[2:], offset)
	binary.BigEndian.PutUint32(b[10:], seq)
	binary.BigEndian.PutUint64(b[14:], e.receiptTag(gid, queue, offset, seq))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// decodeReceipt parses a receipt of group gid and checks its tag.
func (e *Engine) decodeReceipt(gid uint32, s string) (queue uint16, offset uint64, seq uint32, err error) {
	b, derr := base64.RawURLEncoding.DecodeString(s)
	if derr != nil || len(b) != receiptLen {
		return 0, 0, 0, errs.New(errs.InvalidArgument, "receipt %q is malformed", s)
	}
	queue, offset, seq = binary.BigEndian.Uint16(b), binary.BigEndian.Uint64(b[2:]), binary.BigEndian.Uint32(b[10:])
	if binary.BigEndian.Uint64(b[14:]) != e.receiptTag(gid, queue, offset, seq) {
		return 0, 0, 0, errs.New(errs.NotFound, "receipt %q is unknown or its lease has ended", s)
	}
	return queue, offset, seq, nil
}

// leaseLocked finds the live lease a receipt names.
func (e *Engine) leaseLocked(topic, name, receipt string) (*group, *groupQueue, uint16, uint64, *lease, error) {
	g := e.groups[groupKey(topic, name)]
	if g == nil {
		return nil, nil, 0, 0, nil, errs.New(errs.NotFound, "group %q of topic %q does not exist", name, topic)
	}
	q, off, seq, err := e.decodeReceipt(g.id, receipt)
	if err != nil {
		return nil, nil, 0, 0, nil, err
	}
	if int(q) >= len(g.queues) {
		return nil, nil, 0, 0, nil, errs.New(errs.NotFound, "receipt %q is unknown", receipt)
	}
	gq := g.queues[q]
	l := gq.leases[off]
	if l == nil || l.seq != seq {
		return nil, nil, 0, 0, nil, errs.New(errs.NotFound, "receipt %q is unknown or its lease has ended", receipt)
	}
	return g, gq, q, off, l, nil
}

// Ack ends deliveries: the messages will not be delivered to the group
// again. All receipts are checked first; if one is unknown nothing is acked.
func (e *Engine) Ack(ctx context.Context, topic, name string, receipts ...string) error {
	if len(receipts) == 0 {
		return errs.New(errs.InvalidArgument, "no receipts to ack")
	}
	if len(receipts) > MaxReceive {
		return errs.New(errs.TooLarge, "%d receipts; the limit is %d", len(receipts), MaxReceive)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	e.gate.RLock()
	defer e.gate.RUnlock()
	e.mu.Lock()
	if err := e.unavailableLocked(); err != nil {
		e.mu.Unlock()
		return err
	}
	type taken struct {
		gq  *groupQueue
		off uint64
		l   *lease
		ref timerRef
	}
	var g *group
	var ts []taken
	items := make([]progressItem, 0, len(receipts))
	seen := map[string]bool{}
	for _, r := range receipts {
		if seen[r] {
			continue
		}
		seen[r] = true
		gg, gq, q, off, l, err := e.leaseLocked(topic, name, r)
		if err != nil {
			e.mu.Unlock()
			return err
		}
		g = gg
		ts = append(ts, taken{gq: gq, off: off, l: l, ref: l.timer.Value})
		items = append(items, progressItem{queue: q, offset: off})
	}
	// Stop the leases now so none expires while the ack is written.
	for _, t := range ts {
		e.wheel.Cancel(t.l.timer)
		e.free = append(e.free, t.l.timer)
		delete(t.gq.leases, t.off)
	}
	e.mu.Unlock()
	_, err := e.clog.Append(encodeProgress(recAck, g.id, items))
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		for _, t := range ts {
			t.l.timer = e.addWheelLocked(t.ref)
			t.gq.leases[t.off] = t.l
		}
		return e.storageErr(err)
	}
	for _, t := range ts {
		t.gq.markDone(t.off)
	}
	g.acked += uint64(len(ts))
	if g.topic.fifo {
		// The ack unblocks the queue's next message: wake long polls.
		e.notifyVisibleLocked()
	}
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
	g, gq, q, off, l, err := e.leaseLocked(topic, name, receipt)
	if err != nil {
		return err
	}
	e.wheel.Cancel(l.timer)
	e.free = append(e.free, l.timer)
	delete(gq.leases, off)
	e.failedLocked(g, gq, q, off, l.attempt, delay, e.lastAdvanceOrNow())
	return nil
}

// ChangeInvisibility moves the end of a lease to d from now.
func (e *Engine) ChangeInvisibility(ctx context.Context, topic, name, receipt string, d time.Duration) error {
	if d < time.Millisecond || d > MaxInvisible {
		return errs.New(errs.InvalidArgument, "invisible %v is not in [1ms, %v]", d, MaxInvisible)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _, _, _, l, err := e.leaseLocked(topic, name, receipt)
	if err != nil {
		return err
	}
	ref := l.timer.Value
	e.wheel.Cancel(l.timer)
	e.free = append(e.free, l.timer)
	ref.due = e.lastAdvanceOrNow() + d.Milliseconds()
	l.timer = e.addWheelLocked(ref)
	return nil
}

// leaseExpiredLocked handles a lease that ended unacknowledged.
func (e *Engine) leaseExpiredLocked(ref timerRef) {
	g := e.groupsByID[ref.group]
	if g == nil {
		return
	}
	gq := g.queues[ref.queue]
	l := gq.leases[ref.offset]
	if l == nil || l.seq != ref.seq {
		return
	}
	delete(gq.leases, ref.offset)
	// The backoff counts from when the lease ended, not from when the loop noticed.
	e.failedLocked(g, gq, ref.queue, ref.offset, l.attempt, 0, ref.due)
}

// failedLocked schedules a redelivery or a dead-lettering.
func (e *Engine) failedLocked(g *group, gq *groupQueue, q uint16, off uint64, attempt uint32, delay time.Duration, from int64) {
	if int(attempt) >= g.cfg.MaxAttempts {
		e.deadLetters = append(e.deadLetters, deadLetter{g: g, queue: q, offset: off, attempt: attempt})
		e.kickLoop()
		return
	}
	if delay == 0 {
		delay = g.cfg.backoff(attempt)
	}
	gq.retrying[off] = e.addWheelLocked(timerRef{kind: refRetry, due: from + delay.Milliseconds(), group: g.id, queue: q, offset: off})
}

// retryReadyLocked makes a message whose backoff ended receivable again.
func (e *Engine) retryReadyLocked(ref timerRef) {
	g := e.groupsByID[ref.group]
	if g == nil {
		return
	}
	gq := g.queues[ref.queue]
	delete(gq.retrying, ref.offset)
	gq.ready = append(gq.ready, ref.offset)
	e.notifyVisibleLocked()
}

// moveDeadLetters copies messages that ran out of attempts to their
// group's dead-letter topic and acks them in the group, in one write.
func (e *Engine) moveDeadLetters() {
	e.mu.Lock()
	jobs := e.deadLetters
	e.deadLetters = nil
	e.mu.Unlock()
	var retry []deadLetter
	for _, j := range jobs {
		if err := e.moveDeadLetter(j); err != nil {
			e.log.Error("dead-lettering failed; will retry", "topic", j.g.topic.name, "group", j.g.name, "err", err)
			retry = append(retry, j)
		}
	}
	if len(retry) > 0 {
		e.mu.Lock()
		e.deadLetters = append(e.deadLetters, retry...)
		// Do not spin on a failing disk: the loop retries after a pause.
		e.deadLetterAfter = e.Now() + 1000
		e.mu.Unlock()
	}
}

func (e *Engine) moveDeadLetter(j deadLetter) error {
	e.mu.Lock()
	n := j.g.topic.queues[j.queue].Len()
	e.mu.Unlock()
	en, err := j.g.topic.queues[j.queue].Read(j.offset, 1, n)
	if err != nil || len(en) != 1 {
		return errs.Wrap(errs.Internal, err, "read queue entry")
	}
	var recs []commitlog.Record
	var s *message.Stored
	// Dead-letter topics are created whatever NoAutoCreate says: the group
	// exists, so its dead letters must have somewhere to go.
	e.mu.Lock()
	dlq := e.topicsByName[j.g.dlq]
	e.mu.Unlock()
	if dlq == nil {
		t, err := e.createTopic(j.g.dlq, TopicConfig{})
		if errs.CodeOf(err) == errs.AlreadyExists {
			err = nil
		}
		if err != nil {
			return err
		}
		dlq = t
	}
	if s, _, err = e.readStored(en[0].Pos); err == nil {
		props := map[string]string{}
		for k, v := range s.Properties {
			props[k] = v
		}
		props["hourglass-origin-topic"] = s.Topic
		props["hourglass-origin-id"] = e.seal.ID(en[0].Pos, s.Nonce).String()
		props["hourglass-attempts"] = strconv.Itoa(int(j.attempt))
		m := message.Message{Topic: dlq.name, Key: s.Key, Tag: s.Tag, Group: s.Group, Properties: props, Body: s.Body}
		s = &message.Stored{Message: m, Due: e.Now(), Sent: e.Now(), Queue: pickQueue(dlq, &m), Nonce: e.nonce.Add(1)}
		recs = append(recs, commitlog.Record{Type: recMessage, Payload: message.Encode(nil, s)})
	}
	recs = append(recs, encodeProgress(recAck, j.g.id, []progressItem{{queue: j.queue, offset: j.offset}}))
	e.gate.RLock()
	defer e.gate.RUnlock()
	pos, err := e.clog.Append(recs...)
	if err != nil {
		return e.storageErr(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if s != nil {
		e.applyMessageLocked(uint64(pos[0]), s, dlq)
	}
	j.g.queues[j.queue].markDone(j.offset)
	j.g.deadLettered++
	e.kickLoop()
	return nil
}
