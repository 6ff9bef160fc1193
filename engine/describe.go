package engine

import (
	"sort"

	"github.com/hourglass-mq/hourglass/errs"
)

// GroupInfo describes a consumer group.
type GroupInfo struct {
	Topic, Name string
	Config      GroupConfig
	// Backlog is the visible messages not yet acked (including in flight).
	Backlog int64
	// InFlight is the messages under a lease now.
	InFlight int64
	// Paused is true while the group's receives hand out nothing.
	Paused bool
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

func (c *consumers) groupInfoLocked(g *group) GroupInfo {
	gi := GroupInfo{Topic: g.topic.name, Name: g.name, Config: g.cfg, DeadLetterTopic: g.dlq, Paused: g.paused,
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
	return e.cons.groupsLocked(topic), nil
}

func (c *consumers) groupsLocked(topic string) []GroupInfo {
	var out []GroupInfo
	c.eachLocked(func(g *group) {
		if g.topic.name == topic && !g.internal {
			out = append(out, c.groupInfoLocked(g))
		}
	})
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
		Pending: t.pending, Sent: t.sent, Fired: t.fired, Cancelled: t.cancelled, Groups: e.cons.groupsLocked(name)}
	for _, q := range t.queues {
		ts.Lengths = append(ts.Lengths, q.Len())
		ts.Visible += q.Len()
	}
	return ts, nil
}
