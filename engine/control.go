package engine

import (
	"context"
	"errors"
	"time"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// State is where a message is in its life.
type State string

// The states of a message.
const (
	// StatePending: waiting for its due time; cancellable.
	StatePending State = "pending"
	// StateDue: its due time has passed and it is queued for dispatch
	// (a herd is being spread at the dispatch rate); no longer cancellable.
	StateDue State = "due"
	// StateVisible: in its topic queue, available to consumers.
	StateVisible State = "visible"
	// StateCancelled: cancelled before it fell due; it will never be delivered.
	StateCancelled State = "cancelled"
)

// Info describes a message for operators: where it is and when it fires.
type Info struct {
	ID         message.ID
	State      State
	Topic      string
	Queue      int
	Key        string
	Tag        string
	Due        int64 // Unix ms, after any reschedule
	Sent       int64 // Unix ms
	Visible    int64 // Unix ms it became visible, when known (0 otherwise)
	BodyBytes  int
	Properties map[string]string
	// DedupID, Deadline (Unix ms) and Window (ms) are what the send asked
	// for; zero when it did not.
	DedupID          string
	Deadline, Window int64
	// ForGroup is the one consumer group the message is for (a redrive, a
	// retry: SendRequest.ForGroup); empty for every group of the topic.
	ForGroup string
}

// readMessage returns the stored message id names, or NotFound. An ID is
// honoured only if its tag verifies against the nonce of the record at its
// position: a made-up, forged, truncated or stale ID, or one aimed at
// record-shaped bytes inside a body, names nothing. An I/O error is
// Unavailable, never "not found".
func (e *Engine) readMessage(id message.ID) (*message.Stored, error) {
	if id.Pos >= uint64(e.clog.Head()) {
		return nil, errs.New(errs.NotFound, "message %s does not exist", id)
	}
	s, _, err := e.readStored(id.Pos)
	if err != nil {
		if errors.Is(err, errGone) {
			return nil, errs.New(errs.NotFound, "message %s does not exist or was removed by retention", id)
		}
		if isNotARecord(err) {
			return nil, errs.New(errs.NotFound, "message %s does not exist", id)
		}
		return nil, errs.Wrap(errs.Unavailable, err, "message %s could not be read", id)
	}
	if e.ids.seal.Tag(id.Pos, s.Nonce) != id.Tag {
		return nil, errs.New(errs.NotFound, "message %s does not exist", id)
	}
	return s, nil
}

// isNotARecord reports whether a read error means "no message record is
// there" (bytes that do not frame a record, or a record of another type)
// rather than a failure to read.
func isNotARecord(err error) bool {
	return errors.Is(err, commitlog.ErrCorrupt) || errors.Is(err, commitlog.ErrOutOfRange) ||
		errors.Is(err, errBadPayload) || errors.Is(err, message.ErrBadRecord)
}

// messageStateLocked derives the state, the effective due time and the
// time it became visible (0 if not) of the message s at pos from the parts
// that hold them: the overlay, then the dispatcher. Under the engine's mu.
func messageStateLocked(ovl *overlayState, disp *dispatcher, pos uint64, s *message.Stored) (State, int64, int64) {
	due, timer := s.Due, fireAt(s) // a windowed message's timer is later (window.go)
	if ov := ovl.get(pos); ov != nil {
		due, timer = ov.Due, ov.Due
		switch {
		case ov.Cancelled:
			return StateCancelled, due, 0
		case ov.Fired:
			return StateVisible, due, ov.Visible
		}
	}
	return disp.stateLocked(pos, timer), due, 0
}

// Inspect tells the state of a message by ID.
func (e *Engine) Inspect(id message.ID) (Info, error) {
	s, err := e.readMessage(id)
	if err != nil {
		return Info{}, err
	}
	e.mu.Lock()
	st, due, vis := messageStateLocked(e.ovl, e.disp, id.Pos, s)
	e.mu.Unlock()
	return Info{ID: id, State: st, Topic: s.Topic, Queue: s.Queue, Key: s.Key, Tag: s.Tag,
		Due: due, Sent: s.Sent, Visible: vis, BodyBytes: len(s.Body), Properties: s.Properties,
		DedupID: s.DedupID, Deadline: s.Deadline, Window: s.Window, ForGroup: s.ForGroup}, nil
}

// LookupKey returns the ID of the latest message sent to topic with key.
func (e *Engine) LookupKey(topic, key string) (message.ID, error) {
	if key == "" {
		return message.ID{}, errs.New(errs.InvalidArgument, "key is required")
	}
	pos, ok, err := e.keys.Get(keyHash(topic, key))
	if err != nil {
		return message.ID{}, errs.Wrap(errs.Unavailable, err, "key %q of topic %q could not be looked up", key, topic)
	}
	if ok {
		// Check the record: a 64-bit hash collision must not return another key's message.
		s, _, err := e.readStored(pos)
		switch {
		case err == nil && s.Topic == topic && s.Key == key:
			return e.ids.seal.ID(pos, s.Nonce), nil
		case err != nil && !errors.Is(err, errGone) && !isNotARecord(err):
			return message.ID{}, errs.Wrap(errs.Unavailable, err, "key %q of topic %q could not be read", key, topic)
		}
	}
	return message.ID{}, errs.New(errs.NotFound, "no message with key %q in topic %q", key, topic)
}

// InspectKey tells the state of the latest message sent to topic with key.
func (e *Engine) InspectKey(topic, key string) (Info, error) {
	id, err := e.LookupKey(topic, key)
	if err != nil {
		return Info{}, err
	}
	return e.Inspect(id)
}

// Cancel durably cancels a pending message: it will never be delivered. A
// message already due or visible cannot be cancelled (FailedPrecondition,
// saying so); cancelling twice is FailedPrecondition too.
func (e *Engine) Cancel(ctx context.Context, id message.ID) error {
	_, err := e.change(ctx, id, nil, 0)
	return err
}

// Reschedule durably moves a pending message to a new delivery time. If
// ifDue is not 0 it is a compare-and-set: the change happens only if the
// current due time equals ifDue. It returns the new due time.
func (e *Engine) Reschedule(ctx context.Context, id message.ID, w message.When, ifDue int64) (int64, error) {
	return e.change(ctx, id, &w, ifDue)
}

// change cancels (w == nil) or reschedules a pending message. The message
// leaves the wheel before the record is appended, so it cannot fire while
// the change is being made durable; if the append fails it is put back.
func (e *Engine) change(ctx context.Context, id message.ID, w *message.When, ifDue int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s, err := e.readMessage(id)
	if err != nil {
		return 0, err
	}
	var newDue int64
	if w != nil {
		now, wall := e.clock.NowWall()
		if newDue, err = e.opts.Limits.DueAtHeld(*w, now, wall); err != nil {
			return 0, err
		}
		// The deadline is the message's, not the request's: a state the
		// request cannot see, so a conflict (409), as a due-time mismatch is.
		if s.Deadline != 0 && newDue > s.Deadline {
			return 0, errs.New(errs.FailedPrecondition, "the new due time %d (%s) is after the message's deadline %d (%s)",
				newDue, fmtMs(newDue), s.Deadline, fmtMs(s.Deadline))
		}
	}
	e.gate.RLock()
	defer e.gate.RUnlock()
	e.mu.Lock()
	top, due, err := e.changeableLocked(id, s, ifDue)
	if err != nil {
		e.mu.Unlock()
		return 0, err
	}
	// Where the timer goes back to if the append fails.
	back := timerRef{pos: id.Pos, due: due, topic: top.id, queue: uint16(s.Queue)}
	if !e.ovl.has(id.Pos) {
		back = messageRef(id.Pos, s, top)
	}
	h := e.disp.holdLocked(id.Pos, due, w == nil, newDue)
	e.mu.Unlock()

	rec, te := encodePos(recCancel, id.Pos, 0), trailEntry{kind: trailCancelled, pos: id.Pos, at: e.Now()}
	if w != nil {
		rec = encodePos(recReschedule, id.Pos, newDue)
		te.kind, te.arg = trailRescheduled, newDue
	}
	_, aerr := e.clog.Append(rec, encodeTrail([]trailEntry{te}))

	e.mu.Lock()
	defer e.mu.Unlock()
	if aerr != nil {
		e.disp.unholdLocked(h, back)
		return 0, e.life.storageErrLocked(aerr)
	}
	if h.timer != nil {
		e.disp.recycleTimerLocked(h.timer)
	}
	e.applyChangeLocked(id.Pos, s, top, w == nil, newDue)
	e.side.fc.changed(top.id, back.due, w == nil, newDue) // the timer's time (window.go)
	if w == nil {
		e.stats.Cancelled.Add(1)
		top.cancelled++
		return 0, nil
	}
	e.stats.Rescheduled.Add(1)
	e.life.kickLoop()
	return newDue, nil
}

// changeableLocked checks that the message s at id can be changed: its
// topic exists, it is pending, and its due time is ifDue when that is not
// 0. It returns the topic and the current due time.
func (e *Engine) changeableLocked(id message.ID, s *message.Stored, ifDue int64) (*topic, int64, error) {
	if err := e.life.unavailableLocked(); err != nil {
		return nil, 0, err
	}
	top := e.cat.topic(s.Topic)
	if top == nil {
		return nil, 0, errs.New(errs.NotFound, "message %s does not exist", id)
	}
	if ov := e.ovl.get(id.Pos); ov != nil && ov.Changing {
		// Two changes in flight could apply in another order than the
		// log's, and replay would then disagree with what was answered.
		return nil, 0, errs.New(errs.FailedPrecondition, "message %s is being changed by another call; retry once it returns", id)
	}
	st, due, vis := messageStateLocked(e.ovl, e.disp, id.Pos, s)
	switch st {
	case StateCancelled:
		return nil, 0, errs.New(errs.FailedPrecondition, "message %s is already cancelled", id)
	case StateDue, StateVisible:
		at := due
		if vis != 0 {
			at = vis
		}
		return nil, 0, errs.New(errs.FailedPrecondition, "message %s was already delivered: it fell due at %s", id, fmtMs(at))
	}
	if ifDue != 0 && ifDue != due {
		return nil, 0, errs.New(errs.FailedPrecondition, "message %s is due at %d, not %d: not rescheduled", id, due, ifDue)
	}
	return top, due, nil
}

// hold is a message taken out of the wheel while its change is written,
// with what is needed to put it back.
type hold struct {
	pos     uint64
	timer   *wheelTimer // its wheel timer, if it was in the wheel
	ov      *overlayEntry
	prev    overlayEntry // the overlay entry before, if hadPrev
	hadPrev bool
}

// applyChangeLocked applies a durable cancel (or a reschedule to due) of
// the message s at pos, of topic top: the one apply of change records, live
// (after the append) and at replay. Live, change has set the overlay entry
// already, before its append, so that the message cannot fire meanwhile;
// setting it again is a no-op.
func (e *Engine) applyChangeLocked(pos uint64, s *message.Stored, top *topic, cancel bool, due int64) {
	e.ovl.applyChangeLocked(pos, s.Due, cancel, due)
	if cancel {
		e.cons.forgetForGroupLocked(pos)
		e.segs.cancelledLocked(pos)
		e.stats.Pending.Add(-1)
		top.pending--
		return
	}
	e.disp.addTimerLocked(timerRef{pos: pos, due: due, topic: top.id, queue: uint16(s.Queue)})
}

func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

// IsNotFound reports whether err is a NotFound error.
func IsNotFound(err error) bool { return errors.Is(err, errs.ErrNotFound) }
