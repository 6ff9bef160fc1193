package engine

import (
	"errors"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// Visible is a message in a topic queue, as consumers see it.
type Visible struct {
	ID      message.ID
	Offset  uint64 // index of the entry in its queue
	Due     int64
	Visible int64
	Message *message.Stored
}

// TopicInfo describes a topic.
type TopicInfo struct {
	Name   string
	Queues int
	FIFO   bool
	// Lengths is the number of visible entries ever appended per queue.
	Lengths []uint64
}

// Topics lists the topics.
func (e *Engine) Topics() []TopicInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]TopicInfo, 0, e.cat.countLocked())
	for t := range e.cat.topicsLocked() {
		ti := TopicInfo{Name: t.name, Queues: len(t.queues), FIFO: t.fifo}
		for _, q := range t.queues {
			ti.Lengths = append(ti.Lengths, q.Len())
		}
		out = append(out, ti)
	}
	return out
}

// ReadQueue returns up to max visible messages of a topic queue starting
// at offset from. It does not consume: consumer groups keep their own
// progress. A message whose record was removed by retention is skipped;
// so is one whose record is damaged, which the damage report lists (with
// no group) and the log says. A message for one consumer group
// (Message.ForGroup, a redrive's copy) is returned like any other: a
// reader acting for a group passes over the others' (RocketMQ's pull does).
func (e *Engine) ReadQueue(topic string, queue int, from uint64, max int) ([]Visible, error) {
	e.mu.Lock()
	t := e.cat.topic(topic)
	if t == nil {
		e.mu.Unlock()
		return nil, errs.New(errs.NotFound, "topic %q does not exist", topic)
	}
	if queue < 0 || queue >= len(t.queues) {
		e.mu.Unlock()
		return nil, errs.New(errs.InvalidArgument, "topic %q has queues 0 to %d, not %d", topic, len(t.queues)-1, queue)
	}
	q := t.queues[queue]
	n := q.Len()
	e.mu.Unlock()
	entries, err := q.Read(from, max, n)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "read queue %s/%d", topic, queue)
	}
	out := make([]Visible, 0, len(entries))
	for i, en := range entries {
		s, _, err := e.readStored(en.Pos)
		if errors.Is(err, errGone) {
			continue
		}
		if _, ok := commitlog.DamagedAt(err); ok {
			// No group to set it aside for: passed over, as a removed
			// record is, and reported (damage.go), so that an offset
			// reader (a RocketMQ pull) is not stuck on it for ever.
			e.side.dmg.passedOver(e.opts.Logger, e.segs.segmentOf, en.Pos, topic, queue, from+uint64(i), err)
			continue
		}
		if err != nil {
			return nil, errs.Wrap(errs.Unavailable, err, "read message at %d", en.Pos)
		}
		out = append(out, Visible{ID: e.ids.seal.ID(en.Pos, s.Nonce), Offset: from + uint64(i),
			Due: en.Due, Visible: en.Visible, Message: s})
	}
	return out, nil
}

// TopicKind returns a topic's queue count and whether it is FIFO, without
// the engine's lock: both are fixed when the topic is created, and a topic
// is never removed (catalog.byName). ok is false for an unknown topic.
func (e *Engine) TopicKind(name string) (queues int, fifo, ok bool) {
	t := e.cat.topic(name)
	if t == nil {
		return 0, false, false
	}
	return len(t.queues), t.fifo, true
}
