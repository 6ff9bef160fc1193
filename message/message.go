// Package message defines what a producer sends: the message, when it is
// to be delivered, the limits every input is checked against, and the
// binary encoding of a message inside a commit-log record.
package message

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/errs"
)

// Message is what a producer sends. Only Topic is required.
type Message struct {
	// Topic names the destination; see Limits.ValidateTopic for the rules.
	Topic string
	// Key is an optional business key ("order-123"): a message can be
	// inspected, cancelled or rescheduled by it.
	Key string
	// Tag is an optional short label consumers may filter on.
	Tag string
	// Group is the optional FIFO message group: messages of one group in a
	// FIFO topic are handed out one at a time, in send order.
	Group string
	// Properties are optional user string pairs.
	Properties map[string]string
	// Body is the payload, opaque to the broker.
	Body []byte
	// DedupID is an optional idempotency key: while the topic's dedup
	// window holds, a second send with the same DedupID to the same topic
	// stores nothing and returns the first message's ID and due time.
	DedupID string
}

// When says when a message becomes visible. At most one field may be set;
// the zero value means now.
type When struct {
	// Delay is relative to the broker's clock when the send is accepted.
	Delay time.Duration
	// At is an absolute Unix time in milliseconds. A time in the past means now.
	At int64
	// Level is a 1-based index into the configured delay-level table.
	Level int
	// Deadline is an optional absolute Unix ms: a message not delivered by
	// then is dead-lettered with reason expired instead. At most one of
	// Deadline and TTL.
	Deadline int64
	// TTL is the deadline relative to the broker's clock at acceptance.
	TTL time.Duration
	// Window is an optional tolerance: the message may become visible at
	// any time in [due, due+Window], which lets the dispatcher spread a herd.
	Window time.Duration
}

// IsZero reports whether w means "now".
func (w When) IsZero() bool { return w.Delay == 0 && w.At == 0 && w.Level == 0 }

// DefaultDelayLevels is RocketMQ 4.x's default table: level 1 is 1s, level 18 is 2h.
var DefaultDelayLevels = []time.Duration{
	1 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	1 * time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute,
	5 * time.Minute, 6 * time.Minute, 7 * time.Minute, 8 * time.Minute,
	9 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute,
	1 * time.Hour, 2 * time.Hour,
}

// Limits bound every input. The zero value of a field means the default.
type Limits struct {
	// MaxBodyBytes bounds a body; default 4 MiB.
	MaxBodyBytes int
	// MaxDelay bounds how far in the future a message may be due; default 400 days.
	MaxDelay time.Duration
	// DelayLevels is the table Level indexes; default DefaultDelayLevels.
	DelayLevels []time.Duration
	// MaxProperties bounds the number of a sender's properties; default
	// DefaultMaxProperties (RocketMQ's), at most MaxPropertiesCeiling.
	// The properties a protocol adapter adds for its own bookkeeping do
	// not count (ValidateSystem).
	MaxProperties int
	// MaxHeaderBytes bounds key, tag, group and a sender's properties
	// together; default 32 KiB. An adapter's own properties have a budget
	// of the same size of their own.
	MaxHeaderBytes int
}

// Defaults returns l with every zero field set to its default.
func (l Limits) Defaults() Limits {
	if l.MaxBodyBytes == 0 {
		l.MaxBodyBytes = 4 << 20
	}
	if l.MaxDelay == 0 {
		l.MaxDelay = 400 * 24 * time.Hour
	}
	if len(l.DelayLevels) == 0 {
		l.DelayLevels = DefaultDelayLevels
	}
	if l.MaxProperties == 0 {
		l.MaxProperties = DefaultMaxProperties
	}
	if l.MaxHeaderBytes == 0 {
		l.MaxHeaderBytes = 32 << 10
	}
	return l
}

// MaxTopicLen is the longest topic name accepted.
const MaxTopicLen = 200

// ValidateTopic checks a topic name: 1 to 200 characters of letters, digits,
// '-', '_', '.' and '%' (the set RocketMQ allows, so names carry over),
// except "." and "..", which name directories, not topics (a client can
// send them percent-encoded, past HTTP path cleaning).
func ValidateTopic(name string) error { return ValidateName("topic", name) }

// ValidateName checks a topic or consumer-group name by the rules of
// ValidateTopic; kind ("topic", "group") names the field in the error.
func ValidateName(kind, name string) error {
	if name == "" {
		return errs.New(errs.InvalidArgument, "%s is required", kind)
	}
	if !utf8.ValidString(name) {
		return errs.New(errs.InvalidArgument, "%s %q is not valid UTF-8", kind, name)
	}
	if len(name) > MaxTopicLen {
		return errs.New(errs.InvalidArgument, "%s %.20q... is %d bytes long; the limit is %d", kind, name, len(name), MaxTopicLen)
	}
	if name == "." || name == ".." {
		return errs.New(errs.InvalidArgument, "%s %q is reserved; a name must not be \".\" or \"..\"", kind, name)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.%", r)
		if !ok {
			return errs.New(errs.InvalidArgument, "%s %q has the character %q; allowed are letters, digits, '-', '_', '.', '%%'", kind, name, r)
		}
	}
	return nil
}

// Validate checks m against l (l must have had Defaults applied). Every
// string field must be valid UTF-8: the Go library refuses what the HTTP
// layer refuses, so no path stores text that reads back altered. Every
// property counts as the sender's: it is ValidateSystem with none of an
// adapter's.
func (l Limits) Validate(m *Message) error {
	return l.ValidateSystem(m, nil)
}

// ValidateSystem is Validate for a message of which the properties named
// in system are a protocol adapter's own bookkeeping (RocketMQ's born
// timestamp and host, its keys): they count against their own budget
// (at most MaxSystemProperties, MaxHeaderBytes bytes), not the sender's,
// and an error counts only what the sender sent.
func (l Limits) ValidateSystem(m *Message, system []string) error {
	if err := ValidateTopic(m.Topic); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"key", m.Key}, {"tag", m.Tag}, {"group", m.Group}} {
		if !utf8.ValidString(f.v) {
			return errs.New(errs.InvalidArgument, "%s %q is not valid UTF-8", f.name, f.v)
		}
	}
	for k, v := range m.Properties {
		if !utf8.ValidString(k) {
			return errs.New(errs.InvalidArgument, "property name %q is not valid UTF-8", k)
		}
		if !utf8.ValidString(v) {
			return errs.New(errs.InvalidArgument, "value of property %q is not valid UTF-8", k)
		}
		if k == "" {
			return errs.New(errs.InvalidArgument, "property name must not be empty")
		}
	}
	if len(m.Body) > l.MaxBodyBytes {
		return errs.New(errs.TooLarge, "body is %d bytes; the limit is %d bytes", len(m.Body), l.MaxBodyBytes)
	}
	if err := l.checkProperties(m, system); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"key", m.Key}, {"tag", m.Tag}, {"group", m.Group}} {
		if len(f.v) > 0xffff {
			return errs.New(errs.TooLarge, "%s is %d bytes; the limit is 65535", f.name, len(f.v))
		}
	}
	return nil
}

// DueAt resolves w against now (Unix ms) into an absolute due time in Unix
// ms. A time in the past becomes now; beyond now+MaxDelay is an error that
// names the limit, never a silent clamp. It is DueAtHeld with the wall
// clock at now (a broker clock that does not hold).
func (l Limits) DueAt(w When, now int64) (int64, error) {
	return l.DueAtHeld(w, now, now)
}

// DueAtHeld is DueAt for a broker clock that may hold: now is the broker
// time and wall the wall clock of the same reading (clock.Broker.NowWall),
// behind now while the broker clock holds after the wall clock stepped
// back (or a restart found it behind).
//
// An absolute time At in (wall, now] is then ahead by the wall clock and
// past by the broker's. It is due at now+1: the first millisecond the
// broker clock reaches only when it moves again, which is when the wall
// clock has passed now, and so passed At. Due at now (as any past time),
// it was visible at once, early by the wall clock by up to the step; due
// at At, it would be the same, the broker clock being past it. So it is
// never early by either clock, and late by the wall clock by at most the
// time the broker clock holds. The mapping keeps order: every At in the
// interval is due before any At after now. A time at or before wall is
// past by both clocks: due now. Delays and levels count from now, as
// always: never early by either clock either.
func (l Limits) DueAtHeld(w When, now, wall int64) (int64, error) {
	due, err := l.dueAt(w, now)
	if err == nil && w.Level == 0 && w.Delay == 0 && w.At > wall && w.At <= now {
		due = now + 1
	}
	return due, err
}

// dueAt is DueAt.
func (l Limits) dueAt(w When, now int64) (int64, error) {
	set := 0
	for _, b := range []bool{w.Delay != 0, w.At != 0, w.Level != 0} {
		if b {
			set++
		}
	}
	if set > 1 {
		return 0, errs.New(errs.InvalidArgument, "give at most one of delay, at and level")
	}
	var due int64
	switch {
	case w.Level != 0:
		if w.Level < 1 || w.Level > len(l.DelayLevels) {
			return 0, errs.New(errs.InvalidArgument, "delay level %d does not exist; levels are 1 to %d", w.Level, len(l.DelayLevels))
		}
		due = now + clock.CeilMillis(l.DelayLevels[w.Level-1])
	case w.Delay < 0:
		return 0, errs.New(errs.InvalidArgument, "delay %v is negative", w.Delay)
	case w.Delay > 0:
		if w.Delay > l.MaxDelay {
			return 0, errs.New(errs.InvalidArgument, "delay %v is beyond the maximum delay of %v", w.Delay, l.MaxDelay)
		}
		// Rounded up: a sub-millisecond remainder must not make the
		// message due before the delay has passed.
		due = now + clock.CeilMillis(w.Delay)
	case w.At < 0:
		return 0, errs.New(errs.InvalidArgument, "at %d is negative; it is Unix time in milliseconds", w.At)
	case w.At > 0:
		due = w.At
		if latest := now + l.MaxDelay.Milliseconds(); due > latest {
			// No duration is computed from due: due-now can overflow
			// time.Duration and print as negative.
			return 0, errs.New(errs.InvalidArgument, "at %d is beyond the maximum delay of %v; the latest accepted now is %d (%s)",
				w.At, l.MaxDelay, latest, time.UnixMilli(latest).UTC().Format(time.RFC3339Nano))
		}
	}
	if due < now {
		due = now
	}
	return due, nil
}

// MaxDedupIDBytes bounds a dedup ID.
const MaxDedupIDBytes = 256

// ValidateDedupID checks a dedup ID: valid UTF-8 of at most
// MaxDedupIDBytes; "" means none.
func ValidateDedupID(id string) error {
	if !utf8.ValidString(id) {
		return errs.New(errs.InvalidArgument, "dedup_id %q is not valid UTF-8", id)
	}
	if len(id) > MaxDedupIDBytes {
		return errs.New(errs.InvalidArgument, "dedup_id is %d bytes; the limit is %d", len(id), MaxDedupIDBytes)
	}
	return nil
}

// Expiry resolves the deadline and tolerance window of w for a message due
// at due (from DueAt) and accepted at now, all in Unix ms. It returns the
// absolute deadline (0: none) and the window in ms (0: none). A deadline
// before the due time, beyond the maximum delay or given twice, and a
// negative window or one beyond the maximum delay, are errors that say so.
func (l Limits) Expiry(w When, due, now int64) (deadline, window int64, err error) {
	switch {
	case w.Deadline != 0 && w.TTL != 0:
		return 0, 0, errs.New(errs.InvalidArgument, "give at most one of deadline and ttl")
	case w.Deadline < 0:
		return 0, 0, errs.New(errs.InvalidArgument, "deadline %d is negative; it is Unix time in milliseconds", w.Deadline)
	case w.TTL < 0:
		return 0, 0, errs.New(errs.InvalidArgument, "ttl %v is negative", w.TTL)
	case w.TTL > l.MaxDelay:
		return 0, 0, errs.New(errs.InvalidArgument, "ttl %v is beyond the maximum delay of %v", w.TTL, l.MaxDelay)
	case w.Window < 0:
		return 0, 0, errs.New(errs.InvalidArgument, "window %v is negative", w.Window)
	case w.Window > l.MaxDelay:
		return 0, 0, errs.New(errs.InvalidArgument, "window %v is beyond the maximum delay of %v", w.Window, l.MaxDelay)
	}
	deadline = w.Deadline
	if w.TTL > 0 {
		deadline = now + clock.CeilMillis(w.TTL)
	}
	if deadline != 0 {
		if latest := now + l.MaxDelay.Milliseconds(); deadline > latest {
			return 0, 0, errs.New(errs.InvalidArgument, "deadline %d is beyond the maximum delay of %v; the latest accepted now is %d", deadline, l.MaxDelay, latest)
		}
		if deadline < due {
			return 0, 0, errs.New(errs.InvalidArgument, "deadline %d (%s) is before the due time %d (%s); it could never be met",
				deadline, time.UnixMilli(deadline).UTC().Format(time.RFC3339Nano), due, time.UnixMilli(due).UTC().Format(time.RFC3339Nano))
		}
	}
	return deadline, clock.CeilMillis(w.Window), nil
}
