package engine

import (
	"encoding/binary"

	"github.com/hourglass-mq/hourglass/commitlog"
)

// The trail record (type 11) holds what happened to messages at a time,
// where no other record says when: the records that change state (cancel,
// reschedule, attempt, ack) carry no time, and nacks and lease expiries
// wrote nothing at all. It is written in the same append as the record
// whose change it times (so a crash keeps both or neither), except for
// nacks and lease expiries, which change nothing durable and are written
// by the loop soon after (trail.go says what a crash loses). Replay passes
// over it: it is history, never state. Layout (little endian):
//
//	version u8 = 1 | n u32 | n x entry
//	entry (trailEntrySize = 33 bytes):
//	  kind u8 | pos u64 | group u32 | attempt u32 | at i64 | arg i64
//
// pos is the message's identity position (its ID's), group a group id
// (0 for none), at the Unix ms of the event, and arg what the kind says:
//
//	kind  event                 group   attempt  arg
//	1     cancelled             0       0        0
//	2     rescheduled           0       0        the new due time
//	3     delivered             group   N        the lease's end
//	4     acked                 group   N        0
//	5     nacked                group   N        when it comes back (0: dead-lettered next)
//	6     lease expired         group   N        when it comes back (0: dead-lettered next)
//	7     dead-lettered         group   N        bytes back from this record to the copy's (0: no copy)
//	      (kind 7 max attempts, 8 expired deadline, 9 given up by its consumer)
//	10    redriven to group     group   0        0 (pos is the dead-letter copy's)
//
// A version other than 1 or an unknown kind is refused as damage, as an
// unknown record type is: a newer broker wrote it.

// trailVersion is the layout version of trail records this broker writes.
const trailVersion = 1

const trailEntrySize = 1 + 8 + 4 + 4 + 8 + 8

// trailKind is what one trail entry records.
type trailKind uint8

const (
	trailCancelled trailKind = iota + 1
	trailRescheduled
	trailDelivered
	trailAcked
	trailNacked
	trailLeaseExpired
	trailDeadMaxAttempts
	trailDeadExpired
	trailDeadGivenUp
	trailRedriven
	trailKinds // one past the last kind
)

// trailEntry is one event of a message's history.
type trailEntry struct {
	kind    trailKind
	pos     uint64
	group   uint32
	attempt uint32
	at      int64
	arg     int64
}

func encodeTrail(es []trailEntry) commitlog.Record {
	b := make([]byte, 0, 5+len(es)*trailEntrySize)
	b = append(b, trailVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(es)))
	for _, e := range es {
		b = append(b, byte(e.kind))
		b = binary.LittleEndian.AppendUint64(b, e.pos)
		b = binary.LittleEndian.AppendUint32(b, e.group)
		b = binary.LittleEndian.AppendUint32(b, e.attempt)
		b = binary.LittleEndian.AppendUint64(b, uint64(e.at))
		b = binary.LittleEndian.AppendUint64(b, uint64(e.arg))
	}
	return commitlog.Record{Type: recTrail, Payload: b}
}

func decodeTrail(p []byte) ([]trailEntry, error) {
	if len(p) < 5 || p[0] != trailVersion {
		return nil, errBadPayload
	}
	n := int(binary.LittleEndian.Uint32(p[1:]))
	p = p[5:]
	if len(p) != n*trailEntrySize {
		return nil, errBadPayload
	}
	es := make([]trailEntry, n)
	for i := range es {
		b := p[i*trailEntrySize:]
		es[i] = trailEntry{
			kind:    trailKind(b[0]),
			pos:     binary.LittleEndian.Uint64(b[1:]),
			group:   binary.LittleEndian.Uint32(b[9:]),
			attempt: binary.LittleEndian.Uint32(b[13:]),
			at:      int64(binary.LittleEndian.Uint64(b[17:])),
			arg:     int64(binary.LittleEndian.Uint64(b[25:])),
		}
		if es[i].kind == 0 || es[i].kind >= trailKinds {
			return nil, errBadPayload
		}
	}
	return es, nil
}

// trailRecords appends the trail record of es to recs, if es is not empty.
func trailRecords(recs []commitlog.Record, es []trailEntry) []commitlog.Record {
	if len(es) == 0 {
		return recs
	}
	return append(recs, encodeTrail(es))
}

// frameBytes is the room rec takes in the log: its frame header and payload.
func frameBytes(rec commitlog.Record) int64 {
	return int64(commitlog.FrameHeaderSize + len(rec.Payload))
}
