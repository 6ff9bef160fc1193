package message

import (
	"encoding/binary"
	"errors"
	"sort"
	"unsafe"
)

// Record payload layout of a message (all integers little endian). These
// bytes are part of the on-disk format: never change the meaning of an
// existing version; add a new version instead.
//
//	version  u8   (2)
//	queue    u16  queue of the topic the message was assigned to
//	due      i64  Unix ms when it becomes visible (as accepted)
//	sent     i64  Unix ms when the broker accepted it
//	nonce    u64  unique per message; the message's ID is sealed over it
//	topic    u16 len + bytes
//	key      u16 len + bytes
//	tag      u16 len + bytes
//	group    u16 len + bytes
//	nprops   u16, then per property: name u16 len + bytes, value u32 len + bytes (sorted by name)
//	body     u32 len + bytes
//
// Version 3 is version 2 followed by the scheduling extension, after the
// body. Encode writes it only for a message that uses one of its fields, so
// an ordinary message still costs (and reads) exactly as version 2:
//
//	dedup id      u16 len + bytes  the producer's idempotency key, "" for none
//	dedup hash    u64  hash of what the send asked for (see Stored.DedupHash)
//	dedup window  i64  ms the dedup entry lives after Sent; -1: until delivered
//	deadline      i64  Unix ms after which it is dead-lettered as expired; 0: none
//	window        i64  ms of tolerance: deliver at any time in [due, due+window]
//
// Version 4 is version 3 (the extension always written, zero fields
// included) followed by the consumer group the message is for. Encode
// writes it only for a message with a ForGroup, which only the broker sets
// (a redrive, a consumer's retry), so no other message changes:
//
//	for group     u16 len + bytes  the one consumer group that receives it; never empty
//
// Version 1 (no nonce) was written by data directories of format 1, which
// this version refuses to open.
const (
	codecVersion  = 2
	codecVersionX = 3 // version 2 plus the scheduling extension
	codecVersionG = 4 // version 3 plus the consumer group it is for
)

// Stored is a message as it lies in the log: the message plus what the
// broker decided when it accepted it.
type Stored struct {
	Message
	Queue int
	Due   int64
	Sent  int64
	// Nonce is drawn by the broker, unique per message: the message's ID
	// is sealed over it (see ID).
	Nonce uint64
	// DedupHash identifies what a send with a DedupID asked for (body,
	// delivery options, key, tag, group, properties), so a second send
	// with the same DedupID can be told apart as a retry or a conflict.
	DedupHash uint64
	// DedupWindow is how long, in ms after Sent, the DedupID holds
	// (DedupUntilDelivered: until the message becomes visible). It is the
	// window the send was accepted under, kept in the record so that a
	// later configuration change does not alter it.
	DedupWindow int64
	// Deadline is the Unix ms after which the message is not delivered but
	// dead-lettered with reason expired; 0 for none.
	Deadline int64
	// Window is the tolerance in ms: the message may become visible at any
	// time in [Due, Due+Window].
	Window int64
	// ForGroup, when not empty, names the one consumer group of the topic
	// that receives the message; the topic's other groups never see it (a
	// redriven dead letter, a consumer's retry: RocketMQ's %RETRY%group).
	// The broker sets it, never a client's message.
	ForGroup string
}

// DedupUntilDelivered is the DedupWindow of a dedup entry that holds
// until its message becomes visible.
const DedupUntilDelivered = -1

// extended reports whether s needs codec version 3.
func (s *Stored) extended() bool {
	return s.DedupID != "" || s.DedupHash != 0 || s.DedupWindow != 0 || s.Deadline != 0 || s.Window != 0
}

// ErrBadRecord is returned by Decode for a payload that is not a message.
var ErrBadRecord = errors.New("message: malformed message record")

// version is the codec version that Encode writes for s.
func (s *Stored) version() uint8 {
	switch {
	case s.ForGroup != "":
		return codecVersionG
	case s.extended():
		return codecVersionX
	}
	return codecVersion
}

// Encode appends the record payload of s to dst.
func Encode(dst []byte, s *Stored) []byte {
	v := s.version()
	dst = append(dst, v)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(s.Queue))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(s.Due))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(s.Sent))
	dst = binary.LittleEndian.AppendUint64(dst, s.Nonce)
	for _, f := range []string{s.Topic, s.Key, s.Tag, s.Group} {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(f)))
		dst = append(dst, f...)
	}
	names := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		names = append(names, k)
	}
	sort.Strings(names)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(names)))
	for _, k := range names {
		v := s.Properties[k]
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(k)))
		dst = append(dst, k...)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(v)))
		dst = append(dst, v...)
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s.Body)))
	dst = append(dst, s.Body...)
	if v >= codecVersionX {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(s.DedupID)))
		dst = append(dst, s.DedupID...)
		dst = binary.LittleEndian.AppendUint64(dst, s.DedupHash)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(s.DedupWindow))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(s.Deadline))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(s.Window))
	}
	if v == codecVersionG {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(s.ForGroup)))
		dst = append(dst, s.ForGroup...)
	}
	return dst
}

// Decode parses a record payload written by Encode. The result does not
// alias b.
func Decode(b []byte) (*Stored, error) {
	s := &Stored{}
	if err := decodeInto(b, s, nil); err != nil {
		return nil, err
	}
	return s, nil
}

// decodeInto is Decode into s, copying strings and the body into a (or
// into allocations of their own if a is nil).
func decodeInto(b []byte, s *Stored, a *Arena) error {
	d := decoder{b: b, arena: a}
	v := d.u8()
	if v < codecVersion || v > codecVersionG {
		return ErrBadRecord
	}
	s.Queue = int(d.u16())
	s.Due = int64(d.u64())
	s.Sent = int64(d.u64())
	s.Nonce = d.u64()
	s.Topic = d.str16()
	s.Key = d.str16()
	s.Tag = d.str16()
	s.Group = d.str16()
	if n := int(d.u16()); n > 0 {
		s.Properties = make(map[string]string, n)
		for i := 0; i < n && !d.bad; i++ {
			k := d.str16()
			s.Properties[k] = d.str(d.bytes(int(d.u32())))
		}
	}
	s.Body = d.copy(d.bytes(int(d.u32())))
	if v >= codecVersionX {
		s.DedupID = d.str16()
		s.DedupHash = d.u64()
		s.DedupWindow = int64(d.u64())
		s.Deadline = int64(d.u64())
		s.Window = int64(d.u64())
	}
	if v == codecVersionG {
		s.ForGroup = d.str16()
	}
	if v != s.version() {
		// Encode writes version 3 only for a message that uses the
		// extension, and 4 only with a group: one payload, one encoding.
		return ErrBadRecord
	}
	if d.bad || len(d.b) != 0 {
		return ErrBadRecord
	}
	return nil
}

// decoder reads fields and remembers whether it ran past the end, so the
// caller checks once.
type decoder struct {
	b     []byte
	bad   bool
	arena *Arena // nil: every string and the body get their own allocation
}

func (d *decoder) bytes(n int) []byte {
	if d.bad || n < 0 || n > len(d.b) {
		d.bad = true
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8() uint8 {
	if v := d.bytes(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if v := d.bytes(2); v != nil {
		return binary.LittleEndian.Uint16(v)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if v := d.bytes(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if v := d.bytes(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (d *decoder) str16() string { return d.str(d.bytes(int(d.u16()))) }

// str is a copy of v as a string.
func (d *decoder) str(v []byte) string {
	if d.arena == nil || len(v) == 0 {
		return string(v)
	}
	c := d.arena.copy(v)
	return unsafe.String(unsafe.SliceData(c), len(c))
}

// copy is a copy of v, nil if v is empty.
func (d *decoder) copy(v []byte) []byte {
	if d.arena == nil || len(v) == 0 {
		return append([]byte(nil), v...)
	}
	return d.arena.copy(v)
}
