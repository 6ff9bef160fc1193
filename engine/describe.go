package engine

import (
	"cmp"
	"context"
	"sort"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// GroupInfo describes a consumer group.
type GroupInfo struct {
	Topic, Name string
	Config      GroupConfig
	// Backlog is the visible messages not yet acked (including in flight).
	Backlog int64
	// InFlight is the messages under a lease now.
	InFlight int64
	// Counters since the process started.
	Delivered, Acked, Redelivered, DeadLettered uint64
	DeadLetterTopic                             string
}

// TopicStats describes a topic with its counts and groups.
type TopicStats struct {
	TopicInfo
	// Pending is the messages accepted and not yet visible or cancelled.
	Pending int64
	// Visible is the messages made visible since the topic was created.
	Visible uint64
	// Counters since the process started.
	Sent, Fired, Cancelled uint64
	Groups                 []GroupInfo
}

func (e *Engine) groupInfoLocked(g *group) GroupInfo {
	gi := GroupInfo{Topic: g.topic.name, Name: g.name, Config: g.cfg, DeadLetterTopic: g.dlq,
		Delivered: g.delivered, Acked: g.acked, Redelivered: g.redelivered, DeadLettered: g.deadLettered}
	for i, gq := range g.queues {
		gi.Backlog += int64(g.topic.queues[i].Len()) - int64(gq.acked) - int64(gq.nDone)
		gi.InFlight += int64(gq.nLeases)
	}
	return gi
}

// Groups lists the consumer groups of a topic, by name.
func (e *Engine) Groups(topic string) ([]GroupInfo, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cat.topic(topic) == nil {
		return nil, errs.New(errs.NotFound, "topic %q does not exist", topic)
	}
	return e.groupsLocked(topic), nil
}

func (e *Engine) groupsLocked(topic string) []GroupInfo {
	var out []GroupInfo
	for _, g := range e.cons.groupsByID {
		if g.topic.name == topic {
			out = append(out, e.groupInfoLocked(g))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// DescribeTopic returns a topic's configuration, counts and groups.
func (e *Engine) DescribeTopic(name string) (TopicStats, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.cat.topic(name)
	if t == nil {
		return TopicStats{}, errs.New(errs.NotFound, "topic %q does not exist", name)
	}
	ts := TopicStats{TopicInfo: TopicInfo{Name: t.name, Queues: len(t.queues), FIFO: t.fifo},
		Pending: t.pending, Sent: t.sent, Fired: t.fired, Cancelled: t.cancelled, Groups: e.groupsLocked(name)}
	for _, q := range t.queues {
		ts.Lengths = append(ts.Lengths, q.Len())
		ts.Visible += q.Len()
	}
	return ts, nil
}

// redriveGroup is the group through which Redrive reads a dead-letter
// topic.
const redriveGroup = "redrive"

// Redrive moves up to max messages from a group's dead-letter topic back
// to the topic, as new messages visible now. Each is acked in the
// dead-letter topic only after its copy is durable, so a crash in between
// may redrive a message twice, never lose one.
func (e *Engine) Redrive(ctx context.Context, topic, group string, max int) (int, error) {
	if max < 1 || max > MaxReceive {
		return 0, errs.New(errs.InvalidArgument, "max %d is not in [1, %d]", max, MaxReceive)
	}
	g := e.cons.group(topic, group) // no lock: see consumers.groups
	if g == nil {
		return 0, errs.New(errs.NotFound, "group %q of topic %q does not exist", group, topic)
	}
	if e.cat.topic(g.dlq) == nil { // no lock: see catalog.byName
		return 0, nil
	}
	// The redrive's reader is the engine's own group: made here, so that
	// the receive below finds it, past MaxGroups if need be.
	if _, err := e.createGroup(g.dlq, redriveGroup, GroupConfig{}, true, true); err != nil {
		return 0, err
	}
	// At most a batch: the redrive sends what it reads as one.
	got, err := e.Receive(ctx, ReceiveRequest{Topic: g.dlq, Group: redriveGroup, Max: min(max, e.opts.MaxBatch), Invisible: time.Minute})
	if err != nil || len(got) == 0 {
		return 0, err
	}
	reqs := make([]SendRequest, len(got))
	receipts := make([]string, len(got))
	for i, r := range got {
		m := r.Message.Message
		m.Topic = topic
		props := map[string]string{}
		for k, v := range m.Properties {
			props[k] = v
		}
		props["hourglass-redriven-from"] = r.ID.String()
		m.Properties = props
		reqs[i] = SendRequest{Message: m, When: message.When{}}
		receipts[i] = r.Receipt
	}
	if _, err := e.sendBatch(ctx, reqs, true); err != nil {
		if !errs.PerMessage(err) {
			// Give the leases back: the next redrive reads them at once
			// instead of after the minute's lease.
			e.Release(g.dlq, redriveGroup, receipts)
			return 0, err
		}
		return e.redriveEach(ctx, g, reqs, receipts)
	}
	if err := e.Ack(ctx, g.dlq, redriveGroup, receipts...); err != nil {
		return 0, err
	}
	return len(got), nil
}

// redriveEach sends a redrive's messages one at a time, after the batch
// was refused for one of them: the others move, and a dead letter that
// today's limits refuse (a body over a lowered limit) stays in the
// dead-letter topic, its lease given back with its attempts unchanged,
// instead of failing every batch that holds it. It returns how many moved,
// and the first refusal when none did.
func (e *Engine) redriveEach(ctx context.Context, g *group, reqs []SendRequest, receipts []string) (int, error) {
	var moved []string
	var first error
	for i := range reqs {
		if _, err := e.sendBatch(ctx, reqs[i:i+1], true); err != nil {
			e.Release(g.dlq, redriveGroup, receipts[i:i+1])
			first = cmp.Or(first, err)
			continue
		}
		moved = append(moved, receipts[i])
	}
	if len(moved) == 0 {
		return 0, first
	}
	e.opts.Logger.Warn("redrive left dead letters that the limits refuse", "topic", g.topic.name, "group", g.name, "left", len(reqs)-len(moved), "err", first)
	if err := e.Ack(ctx, g.dlq, redriveGroup, moved...); err != nil {
		return 0, err
	}
	return len(moved), nil
}
