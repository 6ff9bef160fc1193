package engine

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// deadLetter is a message waiting to move to its group's dead-letter topic.
type deadLetter struct {
	g       *group
	queue   uint16
	offset  uint64
	attempt uint32
	reason  string // "" for max attempts; ReasonExpired
}

// deadLetterPrefix starts the name of every dead-letter topic. The prefix
// is reserved: only the engine creates such topics and sends to them, so
// the origin properties of a dead letter are the engine's and a redrive
// never moves a message a client placed there.
const deadLetterPrefix = "%DLQ%"

// DeadLetterTopic is the name of a group's dead-letter topic. Two (topic,
// group) pairs can spell one name ("a.b"+"c" and "a"+"b.c"); createGroup
// refuses the second, so each dead-letter topic has one group.
func DeadLetterTopic(topic, group string) string { return deadLetterPrefix + topic + "." + group }

// IsDeadLetterTopic reports whether name is in the reserved namespace of
// dead-letter topics.
func IsDeadLetterTopic(name string) bool { return strings.HasPrefix(name, deadLetterPrefix) }

// reservedTopic refuses a client's send to, or creation of, a topic in the
// dead-letter namespace.
func reservedTopic(name string) error {
	if IsDeadLetterTopic(name) {
		return errs.New(errs.InvalidArgument, "topic %q: names starting with %q are reserved for dead-letter topics, which the broker creates and fills itself (receive from them; redrive moves them back)", name, deadLetterPrefix)
	}
	return nil
}

// moveDeadLetters copies messages that ran out of attempts to their
// group's dead-letter topic and acks them in the group, in one write. apply
// is the engine's apply of a durably written message
// (Engine.applyMessageLocked), which the dispatch loop hands down: the
// copy goes the way of any sent message.
func (c *consumers) moveDeadLetters(apply func(pos uint64, s *message.Stored, t *topic)) {
	c.mu.Lock()
	jobs := c.takeDeadLettersLocked()
	c.mu.Unlock()
	var retry []deadLetter
	for _, j := range jobs {
		if err := c.moveDeadLetter(j, apply); err != nil {
			c.opts.Logger.Error("dead-lettering failed; will retry", "topic", j.g.topic.name, "group", j.g.name, "err", err)
			retry = append(retry, j)
		}
	}
	if len(retry) > 0 {
		c.retryDeadLetters(retry...)
	}
}

// retryDeadLetters gives moves that failed back to the loop, which tries
// them again after a pause: not at once, so as not to spin on a failing
// disk.
func (c *consumers) retryDeadLetters(jobs ...deadLetter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.retryDeadLettersLocked(c.clock.Now(), time.Second, jobs)
}

func (c *consumers) moveDeadLetter(j deadLetter, apply func(pos uint64, s *message.Stored, t *topic)) error {
	c.mu.Lock()
	n := j.g.topic.queues[j.queue].Len()
	c.mu.Unlock()
	en, err := j.g.topic.queues[j.queue].Read(j.offset, 1, n)
	if err != nil || len(en) != 1 {
		return errs.Wrap(errs.Internal, err, "read queue entry")
	}
	var recs []commitlog.Record
	var s *message.Stored
	// Dead-letter topics are created whatever NoAutoCreate says: the group
	// exists, so its dead letters must have somewhere to go.
	c.mu.Lock()
	dlq := c.cat.topic(j.g.dlq)
	c.mu.Unlock()
	if dlq == nil {
		t, err := c.cat.createTopic(j.g.dlq, TopicConfig{}, true)
		if errs.CodeOf(err) == errs.AlreadyExists {
			err = nil
		}
		if err != nil {
			return err
		}
		dlq = t
	}
	// Only a record retention removed is acked without a copy: a read
	// that fails (EIO) leaves the message where it is, and the move is
	// retried, instead of acking it with nothing in the dead-letter topic.
	// A damaged record has nothing to copy, ever: it is set aside, as a
	// receive that meets one does (damage.go), not retried for ever.
	s, _, err = readStoredFrom(c.mu, c.segs, c.log, en[0].Pos)
	if _, ok := commitlog.DamagedAt(err); ok {
		return c.setAsideDeadLetter(j, en[0].Pos, err)
	}
	switch {
	case errors.Is(err, errGone):
		s = nil
	case err != nil:
		c.stats.ReadErrors.Add(1)
		return errs.Wrap(errs.Unavailable, err, "read the message to dead-letter")
	default:
		props := map[string]string{}
		for k, v := range s.Properties {
			props[k] = v
		}
		props["hourglass-origin-topic"] = s.Topic
		props["hourglass-origin-id"] = c.ids.seal.ID(en[0].Pos, s.Nonce).String()
		props["hourglass-attempts"] = strconv.Itoa(int(j.attempt))
		if j.reason != "" {
			props[DeadReasonProperty] = j.reason
		}
		m := message.Message{Topic: dlq.name, Key: s.Key, Tag: s.Tag, Group: s.Group, Properties: props, Body: s.Body}
		s = &message.Stored{Message: m, Due: c.clock.Now(), Sent: c.clock.Now(), Queue: pickQueue(dlq, &m), Nonce: c.ids.nonce.Add(1)}
		recs = append(recs, commitlog.Record{Type: recMessage, Payload: message.Encode(nil, s)})
	}
	recs = append(recs, encodeProgress(recAck, j.g.id, []progressItem{{queue: j.queue, offset: j.offset}}))
	recs = deadLetterTrail(recs, j, en[0].Pos, s, c.clock.Now())
	c.gate.RLock()
	defer c.gate.RUnlock()
	pos, err := c.log.Append(recs...)
	if err != nil {
		return c.life.storageErr(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s != nil {
		apply(uint64(pos[0]), s, dlq)
	}
	j.g.queues[j.queue].markDone(j.offset)
	j.g.deadLettered++
	if j.reason == ReasonExpired {
		c.stats.Expired.Add(1)
	}
	c.life.kickLoop()
	return nil
}

// deadLetterTrail appends to recs (the copy cp, if any, then the ack) the
// trail record of the dead-lettering j of the message at pos: it points
// back at the copy by the bytes between them, and has the copy's time, so
// that none of the copy's events comes before it. The engine's own group
// has no trail.
func deadLetterTrail(recs []commitlog.Record, j deadLetter, pos uint64, cp *message.Stored, now int64) []commitlog.Record {
	if j.g.internal {
		return recs
	}
	if cp != nil {
		now = cp.Sent
	}
	te := trailEntry{kind: trailDeadMaxAttempts, pos: pos, group: j.g.id, attempt: j.attempt, at: now}
	switch j.reason {
	case ReasonExpired:
		te.kind = trailDeadExpired
	case ReasonGivenUp:
		te.kind = trailDeadGivenUp
	}
	if len(recs) == 2 {
		te.arg = frameBytes(recs[0]) + frameBytes(recs[1])
	}
	return append(recs, encodeTrail([]trailEntry{te}))
}

// ReasonGivenUp is the dead-letter reason of a message its consumer moved
// there itself (DeadLetterAttempts).
const ReasonGivenUp = "given-up"

// MaxReportedAttempts bounds the attempts a consumer may report to
// DeadLetterAttempts: the most MaxAttempts a group may have.
const MaxReportedAttempts = 1000

// DeadLetterAttempts moves the leased message a receipt names to its
// group's dead-letter topic now, whatever its attempts, and acks it in the
// group: its consumer gives up on it (RocketMQ's
// ForwardMessageToDeadLetterQueue, which the official push consumers call
// once a message failed their maximum attempts, and retry until it
// succeeds). It returns once the copy and the ack are durable. The receipt
// must name a live lease, as an ack's must, or a message the group has
// finished with (acked, or dead-lettered already, say by the engine once
// its lease ran out): then nothing more is done and the answer is nil, so
// a client that retries a forward until it succeeds lets go of it. If the
// write fails the lease is over all the same, and the message is moved
// later by the loop, as one out of attempts is.
//
// attempts is the deliveries the consumer counts, its own retries
// included (RocketMQ's push consumers retry a FIFO message locally, under
// one lease, and report their delivery_attempt in the forward); 0 means it
// reports none. The dead letter's hourglass-attempts property records the
// attempts the group made: the larger of the broker's deliveries of the
// message to the group and the consumer's count. Without this the property
// said 1 for a message its consumer had tried 16 times under one lease.
// attempts outside [0, MaxReportedAttempts] is refused with
// InvalidArgument, and nothing moves.
func (e *Engine) DeadLetterAttempts(ctx context.Context, topic, name, receipt string, attempts int) error {
	if attempts < 0 || attempts > MaxReportedAttempts {
		return errs.New(errs.InvalidArgument, "reported delivery attempts %d is not in [0, %d]", attempts, MaxReportedAttempts)
	}
	e.mu.Lock()
	if err := e.life.unavailableLocked(); err != nil {
		e.mu.Unlock()
		return err
	}
	g, gq, q, off, l, err := e.cons.leaseLocked(topic, name, receipt)
	if err != nil {
		done := g != nil && e.cons.finishedLocked(g, receipt)
		e.mu.Unlock()
		if done {
			return nil
		}
		return err
	}
	e.disp.stopTimerLocked(l.timer)
	gq.setLease(off, nil)
	e.mu.Unlock()
	j := deadLetter{g: g, queue: q, offset: off, attempt: max(l.attempt, uint32(attempts)), reason: ReasonGivenUp}
	if err := e.cons.moveDeadLetter(j, e.applyMessageLocked); err != nil {
		e.cons.retryDeadLetters(j)
		return err
	}
	return nil
}

// finishedLocked reports whether a genuine receipt of g names a message the
// group is done with.
func (c *consumers) finishedLocked(g *group, receipt string) bool {
	q, off, _, err := c.ids.decodeReceipt(g.id, receipt)
	if err != nil || int(q) >= len(g.queues) {
		return false
	}
	gq := g.queues[q]
	return gq.isDone(off)
}
