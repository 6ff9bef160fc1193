package engine

import (
	"encoding/binary"
	"fmt"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/message"
)

// replayLocked applies one record after the checkpoint. Caller holds no
// locks (recovery is single-threaded), the name says what it touches.
func (r *recovery) replayLocked(pos uint64, rec commitlog.Record, minDue *int64) error {
	switch rec.Type {
	case recTopic:
		id, queues, flags, name, err := decodeTopic(rec.Payload)
		if err != nil {
			return err
		}
		if r.cat.byIDLocked(id) == nil {
			if _, err := r.cat.applyTopicLocked(id, queues, flags, name, nil); err != nil {
				return err
			}
		}
	case recMessage:
		return r.replayMessageLocked(pos, rec.Payload, minDue)
	case recCancel, recReschedule:
		return r.replayChangeLocked(pos, rec, minDue)
	case recFire:
		visible, es, err := decodeFire(rec.Payload)
		if err != nil {
			return err
		}
		for _, fe := range es {
			if !r.ovl.has(fe.pos) {
				r.disp.markFiredSince(fe.pos, fe.due)
			}
		}
		r.apply.fire(visible, es, false)
		r.disp.noteReplayed(visible)
	case recMoved:
		if len(rec.Payload) < 8 {
			return errBadPayload
		}
		applyMovedLocked(r.segs, r.ovl, binary.LittleEndian.Uint64(rec.Payload), pos)
	case recGroup:
		id, tid, cfg, name, err := decodeGroup(rec.Payload)
		if err != nil {
			return err
		}
		t := r.cat.byIDLocked(tid)
		if t == nil {
			return fmt.Errorf("group at %d names unknown topic %d", pos, tid)
		}
		if r.cons.byIDLocked(id) == nil {
			r.cons.installLocked(id, t, cfg, name)
		}
	case recAck, recAttempt:
		return r.replayProgressLocked(pos, rec)
	case recSetAside:
		return r.replaySetAsideLocked(pos, rec)
	case recGroupChange:
		gc, err := decodeGroupChange(rec.Payload)
		if err != nil {
			return err
		}
		g := r.cons.byIDLocked(gc.group)
		if g == nil {
			return fmt.Errorf("group change at %d names unknown group %d", pos, gc.group)
		}
		r.cons.applyGroupChangeLocked(g, gc)
	case recTrail:
		// History, not state (trailrec.go): only its form is checked.
		_, err := decodeTrail(rec.Payload)
		return err
	default:
		// Unknown types are written by a newer version; refuse rather than
		// silently drop state.
		return fmt.Errorf("record at %d has unknown type %d", pos, rec.Type)
	}
	return nil
}

func (r *recovery) replayMessageLocked(pos uint64, payload []byte, minDue *int64) error {
	s, err := message.Decode(payload)
	if err != nil {
		return fmt.Errorf("message at %d: %w", pos, err)
	}
	t := r.cat.topic(s.Topic)
	if t == nil {
		return fmt.Errorf("message at %d names unknown topic %q", pos, s.Topic)
	}
	r.apply.message(pos, s, t)
	*minDue = min(*minDue, s.Due)
	r.disp.noteReplayed(s.Sent)
	return nil
}

func (r *recovery) replayChangeLocked(pos uint64, rec commitlog.Record, minDue *int64) error {
	p, due, err := decodePos(rec.Payload)
	if err != nil {
		return err
	}
	s, _, err := readStoredFrom(r.mu, r.segs, r.log, p)
	if _, ok := commitlog.DamagedAt(err); ok {
		// The message's record was damaged and repair quarantined it (a
		// skip frame): the message is lost, and so is what its topic and
		// timer were. Nothing is left to change; refusing would keep the
		// broker down for ever.
		r.opts.Logger.Warn("a cancel or reschedule names a message whose record is damaged: not applied", "change_pos", pos, "message_pos", p, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("change at %d of %d: %w", pos, p, err)
	}
	t := r.cat.topic(s.Topic)
	if t == nil {
		return fmt.Errorf("change at %d of %d names unknown topic %q", pos, p, s.Topic)
	}
	if rec.Type == recReschedule {
		*minDue = min(*minDue, due)
	}
	// The forecast counted the message at its timer's time: a windowed
	// message's fire time until a change sets an exact one (window.go).
	old := fireAt(s)
	if ov := r.ovl.get(p); ov != nil {
		old = ov.Due
	}
	r.apply.change(p, s, t, rec.Type == recCancel, due)
	r.side.fc.changed(t.id, old, rec.Type == recCancel, due)
	return nil
}

// replayProgressLocked applies an ack or attempt record. Attempts only
// ever go up, and nothing below a queue's acked offset changes.
func (r *recovery) replayProgressLocked(pos uint64, rec commitlog.Record) error {
	gid, items, err := decodeProgress(rec.Type, rec.Payload)
	if err != nil {
		return err
	}
	g := r.cons.byIDLocked(gid)
	if g == nil {
		return fmt.Errorf("progress at %d names unknown group %d", pos, gid)
	}
	for _, it := range items {
		if int(it.queue) >= len(g.queues) {
			return fmt.Errorf("progress at %d names queue %d of %d", pos, it.queue, len(g.queues))
		}
		gq := g.queues[it.queue]
		if rec.Type == recAck {
			gq.markDone(it.offset)
		} else if !gq.isDone(it.offset) && it.attempt > gq.attemptsOf(it.offset) {
			gq.setAttempts(it.offset, it.attempt)
		}
	}
	return nil
}
