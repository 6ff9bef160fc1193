package engine

import (
	"context"
	"encoding/binary"
	"errors"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/message"
)

// A message's trail is read from the commit log, never made up from its
// current state: its own record (sent, due), the fire records (fell due,
// made visible) and the trail records (trailrec.go: every other event,
// with its time). Trace finds them by scanning the log from the message's
// position to the head: no index is kept, so the trail costs nothing in
// memory and only its trail entries on disk, and a look-up reads the log
// written since the message (docs/architecture.md gives the figures).
// What retention removed is gone, and the trail says so (Trail.From).

// Event kinds of a trail, as the API spells them.
const (
	EventSent         = "sent"
	EventRescheduled  = "rescheduled"
	EventCancelled    = "cancelled"
	EventFellDue      = "fell_due"
	EventVisible      = "visible"
	EventDelivered    = "delivered"
	EventAcked        = "acked"
	EventNacked       = "nacked"
	EventLeaseExpired = "lease_expired"
	EventDeadLettered = "dead_lettered"
	EventRedriven     = "redriven"
)

// EventKinds lists every TrailEvent.Kind, in the order a life meets them.
func EventKinds() []string {
	return []string{EventSent, EventRescheduled, EventCancelled, EventFellDue, EventVisible, EventDelivered,
		EventAcked, EventNacked, EventLeaseExpired, EventDeadLettered, EventRedriven}
}

// TrailEvent is one event of a message's history, as the log records it.
type TrailEvent struct {
	// At is when it happened, Unix ms.
	At int64
	// Kind is one of the Event... constants.
	Kind string
	// Message is the ID of the message the event is of: the traced one, or
	// its dead-letter copy (whose events follow the dead-lettering).
	Message message.ID
	// Group is the consumer group of a delivery, ack, nack, lease expiry,
	// dead-lettering or redrive; empty otherwise.
	Group string
	// Attempt is the delivery's number, for the group's events.
	Attempt int
	// Due is the due time a send or a reschedule set; Until the end of a
	// delivery's lease, or when a nacked or expired message comes back
	// (0 when it is dead-lettered instead). Unix ms, 0 when not meant.
	Due, Until int64
	// Reason is a dead-lettering's: "max-attempts", "expired", "given-up".
	Reason string
	// DeadLetter is the ID of the dead-letter copy, for dead_lettered when
	// the copy was made (not when retention had removed the message).
	DeadLetter *message.ID
}

// Trail is a message's history.
type Trail struct {
	ID    message.ID
	Topic string
	// Events in the order the log holds them, which is the order they
	// happened in.
	Events []TrailEvent
	// From is the log position the scan started at: the message's own, or
	// the log's start when retention removed the segments after it (then
	// Partial is true and events written there are gone).
	From    uint64
	Partial bool
	// Scanned is the log bytes the look-up read.
	Scanned int64
}

// trailScan is one look-up under way.
type trailScan struct {
	e        *Engine
	tr       *Trail
	interest map[uint64]message.ID // identity position -> the ID its events are of
	moved    map[uint64]uint64     // a moved copy's position -> its identity
	named    []int                 // indexes of events whose Group holds an id to name
	ids      []uint32              // the ids, beside named
	copies   []int                 // indexes of dead_lettered events whose copy to seal
}

// Trace returns the history of the message id names. A made-up, forged or
// stale ID gives NotFound, as Inspect does, and says nothing of anything
// else. It reads the log from the message's position to the head.
func (e *Engine) Trace(ctx context.Context, id message.ID) (Trail, error) {
	s, err := e.readMessage(id)
	if err != nil {
		return Trail{}, err
	}
	tr := &Trail{ID: id, Topic: s.Topic}
	tr.Events = append(tr.Events, TrailEvent{At: s.Sent, Kind: EventSent, Message: id, Due: s.Due})
	ts := &trailScan{e: e, tr: tr, interest: map[uint64]message.ID{id.Pos: id}, moved: map[uint64]uint64{}}
	from := max(id.Pos, uint64(e.clog.Start()))
	tr.From, tr.Partial = from, from > id.Pos
	if !tr.Partial {
		// Past the message's own record: its events all come after it.
		_, next, err := e.clog.Read(commitlog.Pos(id.Pos))
		if err != nil {
			return Trail{}, trailReadErr(e, err)
		}
		from = uint64(next)
	}
	n := 0
	err = e.clog.Scan(commitlog.Pos(from), func(pos commitlog.Pos, rec commitlog.Record) error {
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		tr.Scanned += frameBytes(rec)
		return ts.record(uint64(pos), rec)
	})
	if err != nil {
		return Trail{}, trailReadErr(e, err)
	}
	ts.finish()
	return *tr, nil
}

// trailReadErr is the error of a trail's look-up that failed to read the log.
func trailReadErr(e *Engine, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return e.life.storageErr(err)
}

// record takes the events of one record.
func (ts *trailScan) record(pos uint64, rec commitlog.Record) error {
	switch rec.Type {
	case recMoved:
		if len(rec.Payload) >= 8 {
			if orig := binary.LittleEndian.Uint64(rec.Payload); ts.has(orig) {
				ts.moved[pos] = orig
			}
		}
	case recFire:
		visible, es, err := decodeFire(rec.Payload)
		if err != nil {
			return nil // check reports damage; a trail shows what it can read
		}
		for _, fe := range es {
			if id, ok := ts.of(fe.pos); ok {
				ts.tr.Events = append(ts.tr.Events,
					TrailEvent{At: fe.due, Kind: EventFellDue, Message: id},
					TrailEvent{At: visible, Kind: EventVisible, Message: id})
			}
		}
	case recTrail:
		es, err := decodeTrail(rec.Payload)
		if err != nil {
			return nil
		}
		for _, te := range es {
			if id, ok := ts.of(te.pos); ok {
				ts.event(pos, id, te)
			}
		}
	}
	return nil
}

func (ts *trailScan) has(pos uint64) bool { _, ok := ts.interest[pos]; return ok }

// of returns the ID whose events an entry's position names, if traced.
func (ts *trailScan) of(pos uint64) (message.ID, bool) {
	if orig, ok := ts.moved[pos]; ok {
		pos = orig
	}
	id, ok := ts.interest[pos]
	return id, ok
}

// event adds the event of one trail entry of the record at pos.
func (ts *trailScan) event(pos uint64, id message.ID, te trailEntry) {
	ev := TrailEvent{At: te.at, Message: id, Attempt: int(te.attempt)}
	switch te.kind {
	case trailCancelled:
		ev.Kind = EventCancelled
	case trailRescheduled:
		ev.Kind, ev.Due = EventRescheduled, te.arg
	case trailDelivered:
		ev.Kind, ev.Until = EventDelivered, te.arg
	case trailAcked:
		ev.Kind = EventAcked
	case trailNacked:
		ev.Kind, ev.Until = EventNacked, te.arg
	case trailLeaseExpired:
		ev.Kind, ev.Until = EventLeaseExpired, te.arg
	case trailDeadMaxAttempts, trailDeadExpired, trailDeadGivenUp:
		ev.Kind = EventDeadLettered
		ev.Reason = map[trailKind]string{trailDeadMaxAttempts: ReasonMaxAttempts, trailDeadExpired: ReasonExpired, trailDeadGivenUp: ReasonGivenUp}[te.kind]
		if te.arg > 0 && uint64(te.arg) <= pos {
			// The copy's events follow: trace it too, by its position
			// until finish seals its ID.
			cp := pos - uint64(te.arg)
			ts.interest[cp] = message.ID{Pos: cp}
			ts.copies = append(ts.copies, len(ts.tr.Events))
			ev.DeadLetter = &message.ID{Pos: cp}
		}
	case trailRedriven:
		ev.Kind = EventRedriven
	}
	if te.group != 0 {
		ts.named = append(ts.named, len(ts.tr.Events))
		ts.ids = append(ts.ids, te.group)
	}
	ts.tr.Events = append(ts.tr.Events, ev)
}

// finish names the groups and seals the IDs of dead-letter copies.
func (ts *trailScan) finish() {
	e := ts.e
	sealed := map[uint64]message.ID{}
	for _, i := range ts.copies {
		cp := ts.tr.Events[i].DeadLetter.Pos
		if s, _, err := e.readStored(cp); err == nil {
			id := e.ids.seal.ID(cp, s.Nonce)
			sealed[cp] = id
			ts.tr.Events[i].DeadLetter = &id
		} else {
			ts.tr.Events[i].DeadLetter = nil
		}
	}
	for i := range ts.tr.Events {
		if id, ok := sealed[ts.tr.Events[i].Message.Pos]; ok {
			ts.tr.Events[i].Message = id
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, i := range ts.named {
		if g := e.cons.byIDLocked(ts.ids[k]); g != nil {
			ts.tr.Events[i].Group = g.name
		}
	}
}
