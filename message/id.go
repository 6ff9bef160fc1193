package message

import (
	"encoding/hex"
	"fmt"

	"github.com/hourglass-mq/hourglass/errs"
)

// ID identifies a message for its whole life. It is the message's position
// in its broker's commit log plus the broker's incarnation (a random number
// drawn when the data directory was created), so an ID needs no index to be
// found, sorts in send order within a broker, and an ID from another broker
// or a wiped data directory is recognised as foreign rather than aliasing a
// different message.
type ID struct {
	Incarnation uint32
	Pos         uint64
}

// String renders the ID as 24 hex digits, position first so that the text
// sorts like the ID.
func (id ID) String() string {
	return fmt.Sprintf("%016x%08x", id.Pos, id.Incarnation)
}

// ParseID parses the text form of an ID.
func ParseID(s string) (ID, error) {
	if len(s) != 24 {
		return ID{}, errs.New(errs.InvalidArgument, "message id %q is not 24 hex digits", s)
	}
	var b [12]byte
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		return ID{}, errs.New(errs.InvalidArgument, "message id %q is not 24 hex digits", s)
	}
	var id ID
	for _, c := range b[:8] {
		id.Pos = id.Pos<<8 | uint64(c)
	}
	for _, c := range b[8:] {
		id.Incarnation = id.Incarnation<<8 | uint32(c)
	}
	return id, nil
}
