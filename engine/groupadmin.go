package engine

import (
	"context"
	"encoding/binary"
	"sort"
	"time"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// An operator's changes to a group after its creation: its policy, pause
// and resume, and seek. Each is a group-change record (type 12), appended
// and then applied by the one apply function replay also calls; the
// checkpoint holds the result (the policy, the paused flag, the progress a
// seek set). Layout (little endian):
//
//	op u8 | group u32 | op payload
//	op 1  policy  max attempts u32 | backoff base ms i64 | backoff max ms i64
//	op 2  pause   (nothing)
//	op 3  resume  (nothing)
//	op 4  seek    to i64 | n u16 | n x offset u64 (the queues' new starts)
//
// A seek records the offsets it found, not only the time, so that replay
// applies exactly what the live seek did. An unknown op is refused as
// damage (a newer broker wrote it).

const (
	opPolicy uint8 = iota + 1
	opPause
	opResume
	opSeek
)

// groupChange is one decoded group-change record.
type groupChange struct {
	op      uint8
	group   uint32
	cfg     GroupConfig // opPolicy
	to      int64       // opSeek
	offsets []uint64    // opSeek, one a queue
	// from is not in the record: each queue's first offset not done
	// before a seek, for its answer.
	from []uint64
}

func encodeGroupChange(gc groupChange) commitlog.Record {
	b := append(make([]byte, 0, 32), gc.op)
	b = binary.LittleEndian.AppendUint32(b, gc.group)
	switch gc.op {
	case opPolicy:
		b = binary.LittleEndian.AppendUint32(b, uint32(gc.cfg.MaxAttempts))
		b = binary.LittleEndian.AppendUint64(b, uint64(gc.cfg.BackoffBase.Milliseconds()))
		b = binary.LittleEndian.AppendUint64(b, uint64(gc.cfg.BackoffMax.Milliseconds()))
	case opSeek:
		b = binary.LittleEndian.AppendUint64(b, uint64(gc.to))
		b = binary.LittleEndian.AppendUint16(b, uint16(len(gc.offsets)))
		for _, off := range gc.offsets {
			b = binary.LittleEndian.AppendUint64(b, off)
		}
	}
	return commitlog.Record{Type: recGroupChange, Payload: b}
}

func decodeGroupChange(p []byte) (groupChange, error) {
	if len(p) < 5 {
		return groupChange{}, errBadPayload
	}
	gc := groupChange{op: p[0], group: binary.LittleEndian.Uint32(p[1:])}
	p = p[5:]
	switch gc.op {
	case opPolicy:
		if len(p) != 20 {
			return gc, errBadPayload
		}
		gc.cfg = GroupConfig{MaxAttempts: int(binary.LittleEndian.Uint32(p)),
			BackoffBase: msDuration(int64(binary.LittleEndian.Uint64(p[4:]))), BackoffMax: msDuration(int64(binary.LittleEndian.Uint64(p[12:])))}
	case opPause, opResume:
		if len(p) != 0 {
			return gc, errBadPayload
		}
	case opSeek:
		if len(p) < 10 || len(p) != 10+8*int(binary.LittleEndian.Uint16(p[8:])) {
			return gc, errBadPayload
		}
		gc.to = int64(binary.LittleEndian.Uint64(p))
		for i := range int(binary.LittleEndian.Uint16(p[8:])) {
			gc.offsets = append(gc.offsets, binary.LittleEndian.Uint64(p[10+8*i:]))
		}
	default:
		return gc, errBadPayload
	}
	return gc, nil
}

// GroupAdmin is the consumers part's face for an operator's changes to a
// group (Engine.GroupAdmin).
type GroupAdmin struct{ c *consumers }

// GroupAdmin returns the operator's controls of the consumer groups.
func (e *Engine) GroupAdmin() GroupAdmin { return GroupAdmin{e.cons} }

// Create durably creates a consumer group of a topic with its policy; it
// starts at the first message of every queue. A topic that does not exist
// is created as a send would create it, unless the engine runs with
// NoAutoCreate: then the answer is NotFound. A group that exists answers
// AlreadyExists: change its policy with SetPolicy.
func (a GroupAdmin) Create(topic, name string, cfg GroupConfig) error {
	if err := message.ValidateTopic(topic); err != nil {
		return err
	}
	if err := message.ValidateName("group", name); err != nil {
		return err
	}
	if err := a.c.topicForGroup(topic); err != nil {
		return err
	}
	_, err := a.c.createGroup(topic, name, cfg, false, false)
	return err
}

// PolicyChange is a change of a group's policy: nil fields stay as they are.
type PolicyChange struct {
	MaxAttempts             *int
	BackoffBase, BackoffMax *time.Duration
}

// SetPolicy durably changes a group's policy. The new policy is checked
// whole (as at creation) and applies to every failure from now on (a
// change to the policy it has writes nothing): a
// message that already failed more often than a lowered MaxAttempts is
// dead-lettered at its next failure.
func (a GroupAdmin) SetPolicy(topic, name string, p PolicyChange) (GroupInfo, error) {
	gi, _, err := a.c.changeGroup(topic, name, func(g *group) (groupChange, error) {
		cfg := g.cfg
		if p.MaxAttempts != nil {
			cfg.MaxAttempts = *p.MaxAttempts
		}
		if p.BackoffBase != nil {
			cfg.BackoffBase = *p.BackoffBase
		}
		if p.BackoffMax != nil {
			cfg.BackoffMax = *p.BackoffMax
		}
		if err := cfg.validate(); err != nil {
			return groupChange{}, err
		}
		if cfg == g.cfg {
			return groupChange{}, nil // nothing to write
		}
		return groupChange{op: opPolicy, cfg: cfg}, nil
	})
	return gi, err
}

// SetPaused durably pauses (or resumes) a group's consumption: while it is
// paused its receives hand out nothing (a long poll waits, and a resume
// wakes it); leases already out run on and can be acked, nacked and
// expire. Pausing a paused group, or resuming a running one, writes
// nothing and answers the group as it is.
func (a GroupAdmin) SetPaused(topic, name string, paused bool) (GroupInfo, error) {
	gi, _, err := a.c.changeGroup(topic, name, func(g *group) (groupChange, error) {
		if g.paused == paused {
			return groupChange{}, nil
		}
		op := opResume
		if paused {
			op = opPause
		}
		return groupChange{op: op}, nil
	})
	return gi, err
}

// SeekResult is what a seek did to each queue of a group.
type SeekResult struct {
	Group GroupInfo
	// From and To are each queue's first offset not done before the seek,
	// and its new start.
	From, To []uint64
}

// Seek durably moves a group to the time to (Unix ms): in every queue its
// position becomes the first message made visible at or after to. Messages
// made visible before to count as done (skipped, as if acked); those at or
// after it are delivered again, acked or not, with their attempts counted
// from 1. Leases and backoffs under way end: their receipts answer
// not found. A to after every message skips the backlog; 0 replays what
// the queues still hold (messages whose records retention removed are
// skipped when they come up).
func (a GroupAdmin) Seek(ctx context.Context, topic, name string, to int64) (SeekResult, error) {
	if to < 0 {
		return SeekResult{}, errs.New(errs.InvalidArgument, "seek time %d is negative; it is Unix time in milliseconds", to)
	}
	gi, gc, err := a.c.changeGroup(topic, name, func(g *group) (groupChange, error) {
		gc := groupChange{op: opSeek, to: to}
		for q := range g.queues {
			off, err := firstVisibleAt(g.topic, q, to)
			if err != nil {
				return groupChange{}, err
			}
			gc.offsets = append(gc.offsets, off)
		}
		return gc, ctx.Err()
	})
	return SeekResult{Group: gi, From: gc.from, To: gc.offsets}, err
}

// firstVisibleAt is the first offset of queue q of t whose message was
// made visible at or after to: visible times only grow along a queue.
func firstVisibleAt(t *topic, q int, to int64) (uint64, error) {
	qi := t.queues[q]
	n := qi.Len()
	var rerr error
	off := sort.Search(int(n), func(i int) bool {
		en, err := qi.Read(uint64(i), 1, n)
		if err != nil || len(en) != 1 {
			rerr = errs.Wrap(errs.Unavailable, err, "read queue %d of topic %s at %d", q, t.name, i)
			return true
		}
		return en[0].Visible >= to
	})
	return uint64(off), rerr
}

// changeGroup writes the change build makes of a user's group and applies
// it, and returns the group and the change. Changes are serialised
// (createMu), so each is built from the state the one before left; build
// runs without mu and reads only fields that change under createMu (the
// policy, the paused flag). A zero change (op 0) writes nothing.
func (c *consumers) changeGroup(topic, name string, build func(g *group) (groupChange, error)) (GroupInfo, groupChange, error) {
	g := c.group(topic, name)
	if g == nil || g.internal {
		return GroupInfo{}, groupChange{}, errs.New(errs.NotFound, "group %q of topic %q does not exist", name, topic)
	}
	defer c.cat.serialiseCreation()()
	gc, err := build(g)
	if err != nil {
		return GroupInfo{}, groupChange{}, err
	}
	if gc.op != 0 {
		gc.group = g.id
		c.gate.RLock()
		defer c.gate.RUnlock()
		if err := c.life.available(); err != nil {
			return GroupInfo{}, groupChange{}, err
		}
		if _, err := c.log.Append(encodeGroupChange(gc)); err != nil {
			return GroupInfo{}, groupChange{}, c.life.storageErr(err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gc.op == opSeek {
		for _, gq := range g.queues {
			gc.from = append(gc.from, gq.acked)
		}
	}
	if gc.op != 0 {
		c.applyGroupChangeLocked(g, gc)
		c.opts.Logger.Info("group changed", "topic", topic, "group", name, "op", gc.op)
	}
	return c.groupInfoLocked(g), gc, nil
}

// applyGroupChangeLocked applies a durable group change: the one apply of
// group-change records, live and at replay.
func (c *consumers) applyGroupChangeLocked(g *group, gc groupChange) {
	switch gc.op {
	case opPolicy:
		g.cfg = gc.cfg
	case opPause:
		g.paused = true
	case opResume:
		g.paused = false
		c.life.notifyVisibleLocked() // long polls waiting on the group
	case opSeek:
		for q, off := range gc.offsets {
			if q < len(g.queues) {
				g.queues[q].resetTo(off, func(h timerHandle) { c.disp.stopTimerLocked(h) })
			}
		}
		// Moves to dead-letter topics queued for the group belong to the
		// progress the seek replaced.
		kept := c.deadLetters[:0]
		for _, j := range c.deadLetters {
			if j.g != g {
				kept = append(kept, j)
			}
		}
		c.deadLetters = kept
		c.life.notifyVisibleLocked()
	}
}
