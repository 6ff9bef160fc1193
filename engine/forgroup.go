package engine

import (
	"sort"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/queueindex"
)

// Messages for one consumer group (SendRequest.ForGroup): RocketMQ's
// %RETRY%<group>, without a topic per group. A redrive of a group's dead
// letters, or a consumer's retry sent back with a delay, must reach that
// group again and no other group of the topic.
//
// The group's name is in the message's record (message.Stored.ForGroup,
// codec version 4), so it survives every restart and replay, a copy
// forward by compaction, and a backup. The message goes through the
// topic's timer and queue index like any other; the topic's other groups
// pass over its queue entry in two ways:
//
//   - when a group is handed the entry, deliver reads the record, finds it
//     is for another group and marks the offset done for this group
//     without handing it out or counting a delivery (readHandouts). This
//     holds whatever happened before: a restart, a timer loaded from its
//     bucket, a group created after the message fired. It is what
//     guarantees that no other group ever receives the message;
//   - eagerly, so that the other groups' backlogs never count it: the
//     engine remembers the identity position of a message for one group
//     that falls due within a bucket width of now (forGroup, at most the
//     near window's such messages, so memory does not grow with what is
//     pending), and when its fire appends it to a queue, every other
//     group of the topic marks that offset done at once, live and in
//     replay alike. A group further behind than MaxUnackedSpan is left to
//     the first way, so that its done offsets stay bounded.
//
// Marks of the second way are not written to the log: they follow from
// the record, and the checkpoint keeps them with the groups' progress. A
// replay that does not see the message's record (it lies before the
// checkpoint) leaves them to the first way.

// redriveGroup is the group through which Redrive reads a dead-letter
// topic: the engine's own, hidden wherever users see groups.
const redriveGroup = "redrive"

// isEngineGroup reports whether name on topic is the engine's own group.
// The name is kept from before it was reserved, so that a data directory
// whose redrive reader exists keeps its progress; no client may create
// or use it (createGroup).
func isEngineGroup(topic, name string) bool {
	return name == redriveGroup && IsDeadLetterTopic(topic)
}

// userGroupsLocked counts the groups that MaxGroups bounds: all but the
// engine's own.
func (c *consumers) userGroupsLocked() int {
	n := 0
	for _, g := range c.groupsByID {
		if !g.internal {
			n++
		}
	}
	return n
}

// EngineGroups lists the engine's own consumer groups, which Groups,
// DescribeTopic and the metrics leave out: today the redrive's reader of
// each dead-letter topic that was redriven (its name is "redrive"; its
// backlog is the dead letters not redriven yet). For operators and tests.
func (e *Engine) EngineGroups() []GroupInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []GroupInfo
	for _, g := range e.cons.groupsByID {
		if g.internal {
			out = append(out, e.cons.groupInfoLocked(g))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

// checkForGroup validates a send's ForGroup: the group must exist on the
// message's topic, and be a client's group.
func (c *consumers) checkForGroup(r *SendRequest, t *topic) error {
	if r.ForGroup == "" {
		return nil
	}
	if err := message.ValidateName("group", r.ForGroup); err != nil {
		return err
	}
	if t == nil {
		return errs.New(errs.NotFound, "topic %q does not exist, so neither does group %q the message is for", r.Message.Topic, r.ForGroup)
	}
	if g := c.group(t.name, r.ForGroup); g == nil || g.internal {
		return errs.New(errs.NotFound, "group %q of topic %q, which the message is for, does not exist", r.ForGroup, t.name)
	}
	return nil
}

// noteForGroupLocked remembers a message for one group whose timer falls
// due soon, for the other groups to pass over its entry when it fires.
func (c *consumers) noteForGroupLocked(ref timerRef, s *message.Stored, t *topic) {
	g := c.group(t.name, s.ForGroup)
	if g == nil || ref.due > c.clock.Now()+c.opts.BucketWidth.Milliseconds() {
		return
	}
	if c.forGroup == nil {
		c.forGroup = map[uint64]uint32{}
	}
	c.forGroup[ref.pos] = g.id
}

// passOverLocked marks, in every group of t but the one it is for, the
// offset of each entry of es that is for one group; first is the offset of
// es[0] in queue q. ok is false when the entries did not reach the index:
// they are forgotten here and left to deliver's check.
func (c *consumers) passOverLocked(t *topic, q uint16, first uint64, es []queueindex.Entry, ok bool) {
	var others []*group
	for i, en := range es {
		gid, found := c.forGroup[en.Pos]
		if !found {
			continue
		}
		delete(c.forGroup, en.Pos)
		if !ok {
			continue
		}
		if others == nil {
			for _, g := range c.groupsByID {
				if g.topic == t {
					others = append(others, g)
				}
			}
		}
		off := first + uint64(i)
		for _, g := range others {
			gq := g.queues[q]
			if g.id != gid && off < gq.acked+uint64(c.opts.MaxUnackedSpan) {
				gq.markDone(off)
			}
		}
	}
}
