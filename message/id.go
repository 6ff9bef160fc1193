package message

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/hourglass-mq/hourglass/errs"
)

// ID identifies a message for its whole life. Pos is the position of the
// message's record in its broker's commit log, so an ID needs no index to be
// found and sorts in send order within a broker. Tag is a MAC, keyed by a
// secret of the data directory, over Pos and a nonce stored in the record:
//
//   - a client cannot make up an ID, nor aim one at bytes it controls (a
//     record-shaped body): without the key it cannot produce the tag;
//   - an ID names exactly one message, ever: if a power loss drops a record
//     and its position is reused, the new record has another nonce, so the
//     old ID does not verify against it;
//   - an ID of another data directory does not verify (another key).
//
// The text form is 32 hex digits: Pos then Tag.
type ID struct {
	Pos uint64
	Tag uint64
}

// IDLen is the length of an ID's text form.
const IDLen = 32

// String renders the ID as 32 hex digits, position first so that the text
// sorts like the ID.
func (id ID) String() string {
	var b [IDLen]byte
	return string(id.Append(b[:0]))
}

// Append appends the ID's text form (String) to b: the form a response
// writes for each message it names, without a string of its own.
func (id ID) Append(b []byte) []byte {
	var raw [16]byte
	binary.BigEndian.PutUint64(raw[:8], id.Pos)
	binary.BigEndian.PutUint64(raw[8:], id.Tag)
	return hex.AppendEncode(b, raw[:])
}

// ParseID parses the text form of an ID. It checks the form only; whether
// the ID names a message is for the broker to say.
func ParseID(s string) (ID, error) {
	var b [16]byte
	if len(s) != IDLen {
		return ID{}, errs.New(errs.InvalidArgument, "message id %q is not %d hex digits", s, IDLen)
	}
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		return ID{}, errs.New(errs.InvalidArgument, "message id %q is not %d hex digits", s, IDLen)
	}
	return ID{Pos: binary.BigEndian.Uint64(b[:8]), Tag: binary.BigEndian.Uint64(b[8:])}, nil
}

// SealKeySize is the size of a Sealer's key.
const SealKeySize = 16

// Sealer computes the tags of IDs and receipts: a 64-bit MAC of two 64-bit
// words. It encrypts the 16-byte block (a, b) with AES-128 and keeps the
// first 8 bytes: AES is a pseudorandom permutation of one block, so for
// distinct inputs the tags are unpredictable without the key, and one block
// costs tens of nanoseconds with the CPU's AES instructions (a send must not
// pay for an HMAC). It is safe for concurrent use.
type Sealer struct {
	block  cipher.Block
	blocks sync.Pool // of *[16]byte, Tag's scratch blocks
}

// NewSealer returns a Sealer for a SealKeySize-byte key.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != SealKeySize {
		return nil, fmt.Errorf("message: seal key is %d bytes, want %d", len(key), SealKeySize)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	s := &Sealer{block: b}
	s.blocks.New = func() any { return new([16]byte) }
	return s, nil
}

// Tag returns the MAC of (a, b).
//
// The call through the cipher.Block interface makes a buffer it is given
// escape to the heap, so the block comes from a pool and is encrypted in
// place (cipher.Block allows dst and src to be the same): no allocation,
// where a stack input and output were two a tag. Tags are made three times
// a message on the consumer path (its ID and its receipt when received, the
// receipt again when acked).
func (s *Sealer) Tag(a, b uint64) uint64 {
	blk := s.blocks.Get().(*[16]byte)
	binary.LittleEndian.PutUint64(blk[:8], a)
	binary.LittleEndian.PutUint64(blk[8:], b)
	s.block.Encrypt(blk[:], blk[:])
	t := binary.LittleEndian.Uint64(blk[:8])
	s.blocks.Put(blk)
	return t
}

// ID returns the ID of the message at pos whose record carries nonce.
func (s *Sealer) ID(pos, nonce uint64) ID { return ID{Pos: pos, Tag: s.Tag(pos, nonce)} }
