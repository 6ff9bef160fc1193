package engine

import (
	"cmp"
	"context"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// Redrive moves up to max messages from a group's dead-letter topic back
// to the group, as new messages of its topic visible now, for that group
// only (SendRequest.ForGroup): the topic's other groups, which finished
// with the messages, never receive them again. It returns how many moved.
//
// Each copy is written in one commit-log append with the ack of its dead
// letter by the redrive's reader (the engine's own group of the
// dead-letter topic, hidden from users: EngineGroups), so a crash leaves
// either both or neither; only a power loss that tears that unacknowledged
// append between its records could leave a copy whose dead letter is
// redriven again, once more to the same group.
func (e *Engine) Redrive(ctx context.Context, topic, group string, max int) (int, error) {
	if max < 1 || max > MaxReceive {
		return 0, errs.New(errs.InvalidArgument, "max %d is not in [1, %d]", max, MaxReceive)
	}
	g := e.cons.group(topic, group) // no lock: see consumers.groups
	if g == nil || g.internal {
		return 0, errs.New(errs.NotFound, "group %q of topic %q does not exist", group, topic)
	}
	if e.cat.topic(g.dlq) == nil { // no lock: see catalog.byName
		return 0, nil
	}
	// The redrive's reader is the engine's own group: made here, so that
	// the receive below finds it, past MaxGroups if need be.
	if _, err := e.cons.createGroup(g.dlq, redriveGroup, GroupConfig{}, true, true); err != nil {
		return 0, err
	}
	// At most a batch: the redrive sends what it reads as one.
	got, err := e.cons.receiveAs(ctx, ReceiveRequest{Topic: g.dlq, Group: redriveGroup, Max: min(max, e.opts.MaxBatch), Invisible: time.Minute}, true)
	if err != nil || len(got) == 0 {
		return 0, err
	}
	reqs := make([]SendRequest, len(got))
	receipts := make([]string, len(got))
	for i, r := range got {
		reqs[i] = redriveRequest(r.Message.Message, topic, group, r.ID)
		receipts[i] = r.Receipt
	}
	return NewDeadLetters(e).redriveSend(ctx, g, reqs, receipts)
}

// redriveRequest is the send that brings a dead letter (ID id, message m)
// back to group of topic, for that group only.
func redriveRequest(m message.Message, topic, group string, id message.ID) SendRequest {
	m.Topic = topic
	props := make(map[string]string, len(m.Properties)+1)
	for k, v := range m.Properties {
		props[k] = v
	}
	props["hourglass-redriven-from"] = id.String()
	m.Properties = props
	return SendRequest{Message: m, ForGroup: group}
}

// redriveSend sends reqs, dead letters of g that its redrive reader holds
// under receipts, back to g, and acks them, and returns how many moved:
// in one append, or one at a time when the batch was refused for one of
// them (redriveEach). On any other error the leases are given back, so
// the next redrive reads them at once instead of after their lease. The
// redrive is the engine's work, not the groups': it sends through the
// engine (validate, append, apply) and asks the consumers for the leases.
func (d *DeadLetters) redriveSend(ctx context.Context, g *group, reqs []SendRequest, receipts []string) (int, error) {
	if err := d.redriveBatch(ctx, g, reqs, receipts); err != nil {
		if !errs.PerMessage(err) {
			d.eng.Release(g.dlq, redriveGroup, receipts)
			return 0, err
		}
		return d.redriveEach(ctx, g, reqs, receipts)
	}
	return len(reqs), nil
}

// redriveBatch sends reqs and acks their dead letters (receipts of the
// redrive's reader) in one append. On an error nothing is written and the
// leases are as they were.
func (d *DeadLetters) redriveBatch(ctx context.Context, g *group, reqs []SendRequest, receipts []string) error {
	e := d.eng
	e.mu.Lock()
	if err := e.life.unavailableLocked(); err != nil {
		e.mu.Unlock()
		return err
	}
	a, err := e.cons.stopAckedLocked(g.dlq, redriveGroup, receipts)
	e.mu.Unlock()
	if err != nil {
		return err
	}
	a.redriveTo = g // the trail says where the dead letters went
	if _, err := e.sendBatch(ctx, reqs, true, a); err != nil {
		e.mu.Lock()
		a.restoreLocked(e.disp)
		e.mu.Unlock()
		return err
	}
	return nil
}

// redriveEach redrives messages one at a time, after the batch was refused
// for one of them: the others move, and a dead letter that today's limits
// refuse (a body over a lowered limit) stays in the dead-letter topic, its
// lease given back with its attempts unchanged, instead of failing every
// batch that holds it. It returns how many moved, and the first refusal
// when none did.
func (d *DeadLetters) redriveEach(ctx context.Context, g *group, reqs []SendRequest, receipts []string) (int, error) {
	moved := 0
	var first error
	for i := range reqs {
		if err := d.redriveBatch(ctx, g, reqs[i:i+1], receipts[i:i+1]); err != nil {
			d.eng.Release(g.dlq, redriveGroup, receipts[i:i+1])
			first = cmp.Or(first, err)
			continue
		}
		moved++
	}
	if moved == 0 {
		return 0, first
	}
	if moved < len(reqs) {
		d.eng.opts.Logger.Warn("redrive left dead letters that the limits refuse", "topic", g.topic.name, "group", g.name, "left", len(reqs)-moved, "err", first)
	}
	return moved, nil
}
