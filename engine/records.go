package engine

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/hourglass-mq/hourglass/commitlog"
)

// The commit-log records of the engine: the one home of every durable
// record format. Types and layouts are part of the on-disk format: never
// renumber a type or change a layout; add a type instead. All integers are
// little endian; "pos" is a commit-log position (a message's identity).
//
//	type  name        payload
//	1     message     message.Encode (message/codec.go): version, queue, due, sent, nonce, topic, key, tag, group, properties, body
//	                  (version 3 and 4: then dedup ID, request hash, dedup window, deadline, tolerance window;
//	                  version 4: then the one consumer group the message is for)
//	2     cancel      pos u64
//	3     reschedule  pos u64 | due i64
//	4     fire        visible i64 | n u32 | n x (pos u64 | due i64 | topic u32 | queue u16 | size u32)
//	5     topic       id u32 | queues u16 | flags u8 (1 = FIFO) | name bytes
//	6     group       id u32 | topic u32 | max attempts u32 | backoff base ms i64 | backoff max ms i64 | name bytes
//	7     ack         group u32 | n u32 | n x (queue u16 | offset u64)
//	8     attempt     group u32 | n u32 | n x (queue u16 | offset u64 | attempt u32)
//	9     moved       identity pos u64 | message payload as in type 1 (compaction forward)
//	10    set-aside   group u32 | n u32 | n x (queue u16 | offset u64 | pos u64): damaged messages a group passed over (damage.go)
//	11    trail       version u8 | n u32 | n x (kind u8 | pos u64 | group u32 | attempt u32 | at i64 | arg i64): events with their times (trailrec.go)
//	12    group change op u8 | group u32 | op payload: policy, pause, resume, seek (groupadmin.go)
//	254   skip        commitlog.TypeSkip: bytes quarantined by repair; never a record
//
// Recovery refuses a record of an unknown type (written by a newer
// version) rather than skip state it does not understand.
const (
	recMessage    commitlog.Type = 1
	recCancel     commitlog.Type = 2
	recReschedule commitlog.Type = 3
	recFire       commitlog.Type = 4
	recTopic      commitlog.Type = 5
	recGroup      commitlog.Type = 6
	recAck        commitlog.Type = 7
	recAttempt    commitlog.Type = 8
	recMoved      commitlog.Type = 9
	recSetAside   commitlog.Type = 10
	// recTrail times events of messages (trailrec.go).
	recTrail commitlog.Type = 11
	// recGroupChange is an operator's change to a group (groupadmin.go).
	recGroupChange commitlog.Type = 12
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
	// windowed is not in the record: it marks, in memory, a message with a
	// tolerance window (window.go).
	windowed bool
}

const fireEntrySize = 8 + 8 + 4 + 2 + 4

// maxDispatchBatch bounds Options.DispatchBatch, so that a fire record
// (fireEntrySize a message) stays far below the commit log's format limit.
const maxDispatchBatch = 1 << 20

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

func encodeGroup(id, topicID uint32, cfg GroupConfig, name string) commitlog.Record {
	b := binary.LittleEndian.AppendUint32(nil, id)
	b = binary.LittleEndian.AppendUint32(b, topicID)
	b = binary.LittleEndian.AppendUint32(b, uint32(cfg.MaxAttempts))
	b = binary.LittleEndian.AppendUint64(b, uint64(cfg.BackoffBase.Milliseconds()))
	b = binary.LittleEndian.AppendUint64(b, uint64(cfg.BackoffMax.Milliseconds()))
	return commitlog.Record{Type: recGroup, Payload: append(b, name...)}
}

func decodeGroup(p []byte) (id, topicID uint32, cfg GroupConfig, name string, err error) {
	if len(p) < 28 {
		return 0, 0, cfg, "", errBadPayload
	}
	cfg.MaxAttempts = int(binary.LittleEndian.Uint32(p[8:]))
	cfg.BackoffBase = time.Duration(binary.LittleEndian.Uint64(p[12:])) * time.Millisecond
	cfg.BackoffMax = time.Duration(binary.LittleEndian.Uint64(p[20:])) * time.Millisecond
	return binary.LittleEndian.Uint32(p), binary.LittleEndian.Uint32(p[4:]), cfg, string(p[28:]), nil
}

// progressItem names one message of a group: queue and offset, and for
// attempt records the attempt number.
type progressItem struct {
	queue   uint16
	offset  uint64
	attempt uint32
	// Not in the record: a delivery's message position and lease end, for
	// its trail entry.
	pos   uint64
	until int64
}

func encodeProgress(typ commitlog.Type, gid uint32, items []progressItem) commitlog.Record {
	b := binary.LittleEndian.AppendUint32(nil, gid)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(items)))
	for _, it := range items {
		b = binary.LittleEndian.AppendUint16(b, it.queue)
		b = binary.LittleEndian.AppendUint64(b, it.offset)
		if typ == recAttempt {
			b = binary.LittleEndian.AppendUint32(b, it.attempt)
		}
	}
	return commitlog.Record{Type: typ, Payload: b}
}

func decodeProgress(typ commitlog.Type, p []byte) (uint32, []progressItem, error) {
	if len(p) < 8 {
		return 0, nil, errBadPayload
	}
	gid, n := binary.LittleEndian.Uint32(p), int(binary.LittleEndian.Uint32(p[4:]))
	size := 10
	if typ == recAttempt {
		size = 14
	}
	p = p[8:]
	if len(p) != n*size {
		return 0, nil, errBadPayload
	}
	items := make([]progressItem, n)
	for i := range items {
		b := p[i*size:]
		items[i] = progressItem{queue: binary.LittleEndian.Uint16(b), offset: binary.LittleEndian.Uint64(b[2:])}
		if typ == recAttempt {
			items[i].attempt = binary.LittleEndian.Uint32(b[10:])
		}
	}
	return gid, items, nil
}

// setAsideItem is one damaged message a group passed over: its queue and
// offset in the group, and its log position.
type setAsideItem struct {
	queue  uint16
	offset uint64
	pos    uint64
}

const setAsideItemSize = 2 + 8 + 8

func encodeSetAside(gid uint32, bad []damagedHandout) commitlog.Record {
	b := make([]byte, 0, 8+len(bad)*setAsideItemSize)
	b = binary.LittleEndian.AppendUint32(b, gid)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(bad)))
	for _, d := range bad {
		b = binary.LittleEndian.AppendUint16(b, d.queue)
		b = binary.LittleEndian.AppendUint64(b, d.offset)
		b = binary.LittleEndian.AppendUint64(b, d.pos)
	}
	return commitlog.Record{Type: recSetAside, Payload: b}
}

func decodeSetAside(p []byte) (uint32, []setAsideItem, error) {
	if len(p) < 8 {
		return 0, nil, errBadPayload
	}
	gid, n := binary.LittleEndian.Uint32(p), int(binary.LittleEndian.Uint32(p[4:]))
	p = p[8:]
	if len(p) != n*setAsideItemSize {
		return 0, nil, errBadPayload
	}
	items := make([]setAsideItem, n)
	for i := range items {
		b := p[i*setAsideItemSize:]
		items[i] = setAsideItem{queue: binary.LittleEndian.Uint16(b), offset: binary.LittleEndian.Uint64(b[2:]), pos: binary.LittleEndian.Uint64(b[10:])}
	}
	return gid, items, nil
}
