package engine

import (
	"encoding/binary"
	"errors"

	"github.com/hourglass-mq/hourglass/commitlog"
)

// Commit-log record types of the engine. The values are part of the on-disk
// format: never renumber them.
const (
	recMessage    commitlog.Type = 1 // payload: message.Encode
	recCancel     commitlog.Type = 2 // payload: pos u64
	recReschedule commitlog.Type = 3 // payload: pos u64, due i64
	recFire       commitlog.Type = 4 // payload: visible i64, n u32, n x fireEntry
	recTopic      commitlog.Type = 5 // payload: id u32, queues u16, flags u8, name
)

// Timer kinds stored in the timer index.
const (
	kindMessage uint8 = 1
)

// topicFIFO marks a topic whose messages are handed out in order per group.
const topicFIFO uint8 = 1

var errBadPayload = errors.New("engine: malformed record payload")

func encodePos(typ commitlog.Type, pos uint64, due int64) commitlog.Record {
	b := binary.LittleEndian.AppendUint64(nil, pos)
	if typ == recReschedule {
		b = binary.LittleEndian.AppendUint64(b, uint64(due))
	}
	return commitlog.Record{Type: typ, Payload: b}
}

func decodePos(p []byte) (pos uint64, due int64, err error) {
	switch len(p) {
	case 8:
		return binary.LittleEndian.Uint64(p), 0, nil
	case 16:
		return binary.LittleEndian.Uint64(p), int64(binary.LittleEndian.Uint64(p[8:])), nil
	}
	return 0, 0, errBadPayload
}

// fireEntry is one message made visible by a fire record.
type fireEntry struct {
	pos   uint64
	due   int64
	topic uint32
	queue uint16
	size  uint32
}

const fireEntrySize = 8 + 8 + 4 + 2 + 4

func encodeFire(visible int64, es []fireEntry) commitlog.Record {
	b := make([]byte, 0, 12+len(es)*fireEntrySize)
	b = binary.LittleEndian.AppendUint64(b, uint64(visible))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(es)))
	for _, e := range es {
		b = binary.LittleEndian.AppendUint64(b, e.pos)
		b = binary.LittleEndian.AppendUint64(b, uint64(e.due))
		b = binary.LittleEndian.AppendUint32(b, e.topic)
		b = binary.LittleEndian.AppendUint16(b, e.queue)
		b = binary.LittleEndian.AppendUint32(b, e.size)
	}
	return commitlog.Record{Type: recFire, Payload: b}
}

func decodeFire(p []byte) (int64, []fireEntry, error) {
	if len(p) < 12 {
		return 0, nil, errBadPayload
	}
	visible := int64(binary.LittleEndian.Uint64(p))
	n := int(binary.LittleEndian.Uint32(p[8:]))
	p = p[12:]
	if len(p) != n*fireEntrySize {
		return 0, nil, errBadPayload
	}
	es := make([]fireEntry, n)
	for i := range es {
		b := p[i*fireEntrySize:]
		es[i] = fireEntry{
			pos:   binary.LittleEndian.Uint64(b),
			due:   int64(binary.LittleEndian.Uint64(b[8:])),
			topic: binary.LittleEndian.Uint32(b[16:]),
			queue: binary.LittleEndian.Uint16(b[20:]),
			size:  binary.LittleEndian.Uint32(b[22:]),
		}
	}
	return visible, es, nil
}

func encodeTopic(id uint32, queues int, flags uint8, name string) commitlog.Record {
	b := binary.LittleEndian.AppendUint32(nil, id)
	b = binary.LittleEndian.AppendUint16(b, uint16(queues))
	b = append(b, flags)
	b = append(b, name...)
	return commitlog.Record{Type: recTopic, Payload: b}
}

func decodeTopic(p []byte) (id uint32, queues int, flags uint8, name string, err error) {
	if len(p) < 8 {
		return 0, 0, 0, "", errBadPayload
	}
	return binary.LittleEndian.Uint32(p), int(binary.LittleEndian.Uint16(p[4:])), p[6], string(p[7:]), nil
}
