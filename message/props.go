package message

import (
	"slices"

	"github.com/hourglass-mq/hourglass/errs"
)

// DefaultMaxProperties is the default of Limits.MaxProperties: RocketMQ's
// limit on a message's user properties, so that a RocketMQ client's
// message is held to the limit it knows.
const DefaultMaxProperties = 128

// MaxPropertiesCeiling bounds Limits.MaxProperties: a record counts its
// properties in 16 bits (65,535), and beyond the sender's there are
// MaxSystemProperties of an adapter's and a few the engine adds to its
// own copies (a dead letter's, a redrive's).
const MaxPropertiesCeiling = 60_000

// MaxSystemProperties bounds the properties a protocol adapter adds to a
// message for its own bookkeeping (engine.SendRequest.SystemProperties).
// RocketMQ has about 30 such (its MessageConst's and the adapters'
// hidden ones).
const MaxSystemProperties = 32

// checkProperties checks the count and bytes of m's properties: the
// sender's (all but system) against MaxProperties and, with key, tag and
// group, MaxHeaderBytes; the adapter's (system) against
// MaxSystemProperties and MaxHeaderBytes of their own. Each name in system
// must be one of m's properties, once.
func (l Limits) checkProperties(m *Message, system []string) error {
	if len(system) > MaxSystemProperties {
		return errs.New(errs.TooLarge, "the protocol adapter added %d properties of its own; the limit is %d", len(system), MaxSystemProperties)
	}
	sysBytes := 0
	for i, k := range system {
		v, ok := m.Properties[k]
		if !ok || slices.Contains(system[:i], k) {
			// The adapter's bug, not the sender's: refused, never
			// counted in a way no one can explain.
			return errs.New(errs.Internal, "the protocol adapter's property %q is missing or named twice", k)
		}
		sysBytes += len(k) + len(v)
	}
	if n := len(m.Properties) - len(system); n > l.MaxProperties {
		return errs.New(errs.TooLarge, "message has %d properties; the limit (max-properties) is %d", n, l.MaxProperties)
	}
	header := len(m.Key) + len(m.Tag) + len(m.Group)
	for k, v := range m.Properties {
		header += len(k) + len(v)
	}
	header -= sysBytes
	if header > l.MaxHeaderBytes {
		return errs.New(errs.TooLarge, "key, tag, group and properties take %d bytes; the limit is %d", header, l.MaxHeaderBytes)
	}
	if sysBytes > l.MaxHeaderBytes {
		return errs.New(errs.TooLarge, "the properties the protocol adapter carries for the message (%s) take %d bytes; the limit is %d",
			system, sysBytes, l.MaxHeaderBytes)
	}
	return nil
}
