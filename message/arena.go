package message

// Arena decodes a batch of message records into a few large blocks of
// memory instead of an allocation per message, string and body: a
// consumer's batch of a thousand messages otherwise cost several thousand
// small allocations and the garbage collection after them.
//
// The messages it returns are ordinary values, but they share memory:
// a Stored comes from a slab of arenaStored of them, and its strings and
// body from a block of arenaBlock bytes, so keeping any one of them keeps
// its slab or block alive. Strings point into a block that is never
// written again once they are made; a body is capped at its length, so an
// append to it copies instead of writing over its neighbour. Use an Arena
// for messages that are handed out together and dropped together, not for
// ones kept for long. An Arena is not safe for concurrent use; its zero
// value is ready.
type Arena struct {
	block  []byte
	stored []Stored
	// left is how many more messages Reserve announced (0: unknown), and
	// cur the payload length of the one being decoded: together they size
	// the next slab and block.
	left, cur int
}

const (
	arenaBlock  = 64 << 10
	arenaStored = 64
	// maxReserved bounds the slab a Reserve sizes: a message kept after
	// its batch keeps its slab alive, so a slab stays a fraction of a
	// large batch (a receive hands out up to 1,000).
	maxReserved = 256
)

// Reserve tells a that about n more messages are to be decoded, so that
// it allocates for those rather than a full slab and block: a consumer's
// batch of 32 small messages then costs a few KiB instead of 64 KiB of
// block and a slab of 64. It is a hint; decoding more or fewer is fine.
func (a *Arena) Reserve(n int) { a.left = max(n, 0) }

// Decode is the package's Decode, with the result's memory taken from a.
func (a *Arena) Decode(b []byte) (*Stored, error) {
	if len(a.stored) == 0 {
		n := arenaStored
		if a.left > 0 {
			n = min(a.left, maxReserved)
		}
		a.stored = make([]Stored, n)
	}
	a.cur = len(b)
	s := &a.stored[0]
	if err := decodeInto(b, s, a); err != nil {
		*s = Stored{}
		return nil, err
	}
	a.stored = a.stored[1:]
	if a.left > 0 {
		a.left--
	}
	return s, nil
}

// copy returns a copy of v (not empty) in a's current block; a value
// larger than a quarter block gets an allocation of its own, so that a
// block is never mostly wasted. A new block holds what the messages still
// reserved would need if each were as long as this one's payload (the
// copies of a message are at most its payload), at most arenaBlock.
func (a *Arena) copy(v []byte) []byte {
	if len(v) > arenaBlock/4 {
		return append([]byte(nil), v...)
	}
	if len(a.block) < len(v) {
		size := arenaBlock
		if a.left > 0 {
			size = min(arenaBlock, max(len(v), a.left*a.cur))
		}
		a.block = make([]byte, size)
	}
	c := a.block[:len(v):len(v)]
	copy(c, v)
	a.block = a.block[len(v):]
	return c
}
