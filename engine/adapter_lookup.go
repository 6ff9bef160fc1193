package engine

import (
	"errors"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// LookupDedup returns the ID of the latest message sent to topic with the
// dedup ID id, while the record is kept (its dedup window may have ended):
// a protocol adapter's lookup by the client's own message ID (RocketMQ's
// unique-key query). The record must name the topic and the ID, so a hash
// collision finds nothing.
func (e *Engine) LookupDedup(topic, id string) (message.ID, error) {
	if id == "" {
		return message.ID{}, errs.New(errs.InvalidArgument, "dedup_id is required")
	}
	pos, ok, err := e.keys.Get(dedupHash(topic, id))
	if err != nil {
		return message.ID{}, errs.Wrap(errs.Unavailable, err, "dedup_id %q of topic %q could not be looked up", id, topic)
	}
	if ok {
		s, _, err := e.readStored(pos)
		switch {
		case err == nil && s.Topic == topic && s.DedupID == id:
			return e.ids.seal.ID(pos, s.Nonce), nil
		case err != nil && !errors.Is(err, errGone) && !isNotARecord(err):
			return message.ID{}, errs.Wrap(errs.Unavailable, err, "dedup_id %q of topic %q could not be read", id, topic)
		}
	}
	return message.ID{}, errs.New(errs.NotFound, "no message with dedup_id %q in topic %q", id, topic)
}

// MessageAt returns the ID of the message whose record starts at pos. A
// position alone is not an ID (anyone can count positions): this is for a
// protocol adapter that has verified a handle of its own naming pos (one
// it sealed with a key of its own when it handed the handle out), never
// for a position a client gives.
func (e *Engine) MessageAt(pos uint64) (message.ID, error) {
	if pos >= uint64(e.clog.Head()) {
		return message.ID{}, errs.New(errs.NotFound, "no message at position %d", pos)
	}
	s, _, err := e.readStored(pos)
	switch {
	case err == nil:
		return e.ids.seal.ID(pos, s.Nonce), nil
	case errors.Is(err, errGone) || isNotARecord(err):
		return message.ID{}, errs.New(errs.NotFound, "no message at position %d", pos)
	}
	return message.ID{}, errs.Wrap(errs.Unavailable, err, "read the message at position %d", pos)
}
