package remoting

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// handleKeyFile holds the key of the handles: 32 random bytes, made once.
const handleKeyFile = "handle-key"

// handles seals a message's commit-log position into the 8-byte "offset"
// of a RocketMQ offset message ID, and opens it again. The seal is a
// 64-bit pseudo-random permutation (a 4-round Feistel network over AES,
// keyed by a key of the data directory), so a handle names a message only
// if the broker made it: a made-up one opens to a random position, which
// holds a message with a chance of the messages' count in 2^64 (as an
// hourglass ID's 64-bit tag). Positions alone are never honoured.
type handles struct {
	block cipher.Block
}

// openHandles loads the key in dir, or makes it durably.
func openHandles(dir string) (*handles, error) {
	key := make([]byte, 32)
	if dir == "" {
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
	} else {
		p := filepath.Join(dir, handleKeyFile)
		b, err := os.ReadFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if _, err := rand.Read(key); err != nil {
				return nil, err
			}
			if err := writeKey(dir, p, key); err != nil {
				return nil, fmt.Errorf("make the remoting handle key: %w", err)
			}
		case err != nil:
			return nil, fmt.Errorf("read the remoting handle key: %w", err)
		case len(b) != 32:
			return nil, fmt.Errorf("remoting handle key %s is %d bytes, not 32: the file is damaged", p, len(b))
		default:
			key = b
		}
	}
	blk, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return &handles{block: blk}, nil
}

// writeKey writes the key to a temporary file, syncs it, renames it into
// place and syncs the directory: a crash leaves no key or the whole key.
func writeKey(dir, p string, key []byte) error {
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(key)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// round is the Feistel round function; tweak separates the domains of
// handles (0 for positions; a topic's hash for its commit handles), so a
// handle made for one domain opens to a random value in another.
func (h *handles) round(i byte, half uint32, tweak uint64) uint32 {
	var b [16]byte
	b[0] = i
	binary.BigEndian.PutUint32(b[1:], half)
	binary.BigEndian.PutUint64(b[5:], tweak)
	h.block.Encrypt(b[:], b[:])
	return binary.BigEndian.Uint32(b[:])
}

// seal turns a position into a handle.
func (h *handles) seal(pos uint64) uint64 { return h.sealIn(0, pos) }

// open turns a handle back into the position it was sealed from.
func (h *handles) open(v uint64) uint64 { return h.openIn(0, v) }

// sealIn seals v in the domain tweak.
func (h *handles) sealIn(tweak, v uint64) uint64 {
	l, r := uint32(v>>32), uint32(v)
	for i := byte(0); i < 4; i++ {
		l, r = r, l^h.round(i, r, tweak)
	}
	return uint64(l)<<32 | uint64(r)
}

// openIn opens a handle sealed in the domain tweak.
func (h *handles) openIn(tweak, v uint64) uint64 {
	l, r := uint32(v>>32), uint32(v)
	for i := byte(4); i > 0; i-- {
		l, r = r^h.round(i-1, l, tweak), l
	}
	return uint64(l)<<32 | uint64(r)
}
