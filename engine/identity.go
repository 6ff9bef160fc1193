package engine

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path"

	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// identityFile names the data directory's identity: its format version and
// the secret that seals message IDs. It is written once, atomically, when
// the directory is created, and never changes.
//
//	offset size field
//	0      4    magic   "HGID"
//	4      2    format  u16 data-directory format (DataFormat)
//	6      2    reserved, 0
//	8      16   key     AES-128 key that seals message IDs (message.Sealer)
//	24     4    crc32c  (Castagnoli) of bytes 0..23
const identityFile = "IDENTITY"

const identitySize = 28

// DataFormat is the data-directory format this version writes and reads.
// Format 1 (an INCARNATION file, unsealed 24-digit IDs) is refused: its IDs
// could be forged and could alias after a power loss.
const DataFormat = 2

// ErrOldFormat is returned by Open for a data directory written by an older
// hourglass whose format this version does not read.
var ErrOldFormat = errors.New("engine: data directory of an unsupported format")

// identity is what the identity file holds.
type identity struct {
	format uint16
	key    [message.SealKeySize]byte
}

// dirTag is a short fingerprint of the directory, recorded in the
// checkpoint so that a checkpoint copied from another directory is refused.
func (id *identity) dirTag() uint32 { return crc32.Checksum(id.key[:], crcTable) }

func encodeIdentity(id *identity) []byte {
	b := make([]byte, identitySize)
	copy(b, "HGID")
	binary.LittleEndian.PutUint16(b[4:], id.format)
	copy(b[8:], id.key[:])
	binary.LittleEndian.PutUint32(b[24:], crc32.Checksum(b[:24], crcTable))
	return b
}

func decodeIdentity(b []byte) (*identity, error) {
	if len(b) != identitySize || string(b[:4]) != "HGID" {
		return nil, fmt.Errorf("%s is not an hourglass identity file", identityFile)
	}
	if crc32.Checksum(b[:24], crcTable) != binary.LittleEndian.Uint32(b[24:]) {
		return nil, fmt.Errorf("%s fails its checksum: the directory's identity is damaged", identityFile)
	}
	id := &identity{format: binary.LittleEndian.Uint16(b[4:])}
	copy(id.key[:], b[8:24])
	return id, nil
}

// loadIdentity reads the data directory's identity, creating one for a new,
// empty directory. A directory written by another format is refused with a
// message that says what to do.
func loadIdentity(fs vfs.FS, dir string) (*identity, error) {
	b, err := readAll(fs, path.Join(dir, identityFile))
	switch {
	case err == nil:
		id, err := decodeIdentity(b)
		if err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
		if id.format != DataFormat {
			return nil, fmt.Errorf("%w: %s is format %d, this hourglass reads format %d only: run the hourglass version that wrote it",
				ErrOldFormat, dir, id.format, DataFormat)
		}
		return id, nil
	case !vfs.IsNotExist(err):
		return nil, fmt.Errorf("engine: read %s: %w", identityFile, err)
	}
	// No identity: a new directory, unless an older version wrote it.
	if f, err := fs.Open(path.Join(dir, "INCARNATION")); err == nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s was written by hourglass format 1, whose message IDs can be forged; "+
			"this version reads format %d only: let the old version deliver what is pending, then start on an empty directory",
			ErrOldFormat, dir, DataFormat)
	}
	if names, err := fs.List(path.Join(dir, "log")); err == nil && len(names) > 0 {
		return nil, fmt.Errorf("engine: %s has a commit log but no %s file: refusing to guess its format", dir, identityFile)
	}
	id := &identity{format: DataFormat}
	if _, err := rand.Read(id.key[:]); err != nil {
		return nil, err
	}
	if err := writeFileAtomic(fs, dir, identityFile, encodeIdentity(id)); err != nil {
		return nil, err
	}
	return id, nil
}
