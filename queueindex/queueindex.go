// Package queueindex holds the visible messages of one topic queue as a
// file of fixed-size entries that point at the messages' records in the
// commit log: a message becomes visible by appending 32 bytes here, never by
// copying its body (RocketMQ's ConsumeQueue idea).
//
// Entry layout (little endian), part of the on-disk format:
//
//	offset size field
//	0      8    pos      u64 commit-log position of the message record
//	8      8    due      i64 Unix ms the message was due
//	16     8    visible  i64 Unix ms it became visible
//	24     4    size     u32 reserved for the record payload size; 0 today (the timer
//	                         that fires a message does not carry it)
//	28     4    crc      u32 CRC32C (Castagnoli) of bytes 0..27, XOR 0x51494458 ("QIDX")
//
// The XOR makes a zero-filled entry (a hole, a page that never reached the
// disk) fail its check whatever the CRC of zeros is; CRC32C catches every
// flipped bit and every burst up to 32 bits. This layout replaced one whose
// last field was a 32-bit mix of the fields, which an all-zero entry passed:
// index files written before it fail their checks and must be rebuilt from
// the commit log.
//
// The file is a cache derived from the commit log's fire records: the
// engine's checkpoint stores the length up to which it is synced, and
// recovery truncates to that length and re-appends what the log says.
//
// # Failures
//
// Read errors are returned, never taken for "no entries": a short file
// gives an error wrapping io.ErrUnexpectedEOF, a bad entry ErrCorrupt.
//
// A failed Sync is sticky (ErrSyncFailed). After a failed fsync Linux marks
// the pages it could not write clean, so a second Sync would succeed
// without writing them; the Index therefore never reports success again,
// and Durable stays at the last length a successful Sync covered. What the
// engine must do: never record a length beyond Durable in a checkpoint (in
// particular, write no checkpoint after a failed Sync), and stop. Recovery
// in a new process then opens the file with the last checkpoint's length,
// which cuts the entries whose durability is unknown (the truncate also
// drops their pages from the page cache), and re-derives them from the
// log's fire records.
package queueindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"sync"
	"sync/atomic"

	"github.com/hourglass-mq/hourglass/vfs"
)

// EntrySize is the size of one entry on disk.
const EntrySize = 32

// entryCRCXor is XORed into every entry's CRC32C (see the package doc).
const entryCRCXor = 0x51494458

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors of an Index. Errors with a cause wrap both the sentinel and the
// cause.
var (
	// ErrCorrupt means an entry failed its checksum.
	ErrCorrupt = errors.New("queueindex: corrupt entry")
	// ErrSyncFailed is returned by a failed Sync and, from then on, by
	// every Sync of the Index: the entries not yet durable may have been
	// dropped by the kernel, and a retried fsync would not write them.
	ErrSyncFailed = errors.New("queueindex: fsync failed; entries not yet durable may be lost, so no later sync is trusted")
)

// Entry is one visible message.
type Entry struct {
	Pos     uint64
	Due     int64
	Visible int64
	Size    uint32
}

// encode writes e into b[:EntrySize].
func (e Entry) encode(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], e.Pos)
	binary.LittleEndian.PutUint64(b[8:], uint64(e.Due))
	binary.LittleEndian.PutUint64(b[16:], uint64(e.Visible))
	binary.LittleEndian.PutUint32(b[24:], e.Size)
	binary.LittleEndian.PutUint32(b[28:], entryCRC(b))
}

// entryCRC is the check of the entry in b[:EntrySize].
func entryCRC(b []byte) uint32 {
	return crc32.Checksum(b[:28], castagnoli) ^ entryCRCXor
}

// decodeEntry parses b[:EntrySize] and reports whether its check holds.
func decodeEntry(b []byte) (Entry, bool) {
	e := Entry{
		Pos:     binary.LittleEndian.Uint64(b[0:]),
		Due:     int64(binary.LittleEndian.Uint64(b[8:])),
		Visible: int64(binary.LittleEndian.Uint64(b[16:])),
		Size:    binary.LittleEndian.Uint32(b[24:]),
	}
	return e, binary.LittleEndian.Uint32(b[28:]) == entryCRC(b)
}

// Index is one queue's index file. Offsets count entries from 0. It is safe
// for one appender and concurrent readers, and Sync may run concurrently
// with both.
type Index struct {
	f    vfs.File
	fs   vfs.FS
	name string
	// n is the number of entries written; stored by the appender after
	// the write, so every entry below a loaded n is in the file.
	n atomic.Uint64
	// unwritten holds, in order, the entries of Appends whose write failed
	// (a full disk). They are written before anything appended later, so
	// the file keeps the order of the Appends; readers do not see them
	// until then. Owned by the appender.
	unwritten []Entry

	syncMu sync.Mutex // serializes Sync; guards the fields below
	// dirPending is set while the file's directory entry, made by Open,
	// is not known durable; Sync makes it durable.
	dirPending bool
	// failed is the sticky error of a failed Sync.
	failed error
	// durable is the number of entries known durable (read by Durable
	// without syncMu).
	durable atomic.Uint64
	// kicked is the file offset up to which StartWriteback started the
	// write-out.
	kicked uint64
}

// Open opens or creates the index file name and positions the end at the
// last whole entry. If keep >= 0 the file is first cut to keep entries
// (recovery: the length the checkpoint recorded, which the caller vouches
// is durable); a file with fewer than keep entries is an error. A file
// Open creates gets its directory entry made durable by the first Sync.
// Entries are checked when they are read (Read, Verify), not here.
func Open(fs vfs.FS, name string, keep int64) (*Index, error) {
	created := false
	f, err := fs.Open(name)
	if vfs.IsNotExist(err) {
		f, err = fs.Create(name)
		created = true
	}
	if err != nil {
		return nil, fmt.Errorf("queueindex: open %s: %w", name, err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("queueindex: size of %s: %w", name, err)
	}
	n := size / EntrySize
	if keep > n {
		f.Close()
		return nil, fmt.Errorf("queueindex: %s has %d entries but the checkpoint recorded %d", name, n, keep)
	}
	if keep >= 0 {
		n = keep
	}
	if n*EntrySize != size {
		// Cutting also drops the cut pages from the page cache, so entries
		// a failed sync may have lost cannot be read back after a restart.
		if err := f.Truncate(n * EntrySize); err != nil {
			f.Close()
			return nil, fmt.Errorf("queueindex: cut %s to %d entries: %w", name, n, err)
		}
	}
	x := &Index{f: f, fs: fs, name: name, dirPending: created}
	x.n.Store(uint64(n))
	if keep >= 0 {
		x.durable.Store(uint64(keep))
	}
	return x, nil
}

// Len returns the number of entries.
func (x *Index) Len() uint64 { return x.n.Load() }

// Durable returns the number of entries known durable: those the last
// successful Sync covered, or at Open the keep the caller vouched for. It
// never grows after a failed Sync.
func (x *Index) Durable() uint64 { return x.durable.Load() }

// Err returns the sticky error of a failed Sync, or nil.
func (x *Index) Err() error {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	return x.failed
}

// Append writes entries at the end, after any an earlier failed Append
// left unwritten, and returns the offset of the first of es. They are
// durable after Sync. If the write fails, es are kept with the unwritten
// entries for the next Append or Retry, and Len does not count them yet.
// Append still works after a failed Sync (the entries serve this process's
// readers), but they will never be reported durable.
func (x *Index) Append(es []Entry) (uint64, error) {
	if len(x.unwritten) > 0 {
		es = append(x.unwritten[:len(x.unwritten):len(x.unwritten)], es...)
	}
	buf := make([]byte, len(es)*EntrySize)
	for i, e := range es {
		e.encode(buf[i*EntrySize:])
	}
	n := x.n.Load()
	first := n + uint64(len(x.unwritten))
	if _, err := x.f.WriteAt(buf, int64(n)*EntrySize); err != nil {
		x.unwritten = es
		return 0, fmt.Errorf("queueindex: write %s: %w", x.name, err)
	}
	x.n.Store(n + uint64(len(es)))
	x.unwritten = nil
	return first, nil
}

// Unwritten returns the number of entries that failed Appends left to be
// written.
func (x *Index) Unwritten() int { return len(x.unwritten) }

// Retry writes the entries failed Appends left unwritten, if any.
func (x *Index) Retry() error {
	if len(x.unwritten) == 0 {
		return nil
	}
	_, err := x.Append(nil)
	return err
}

// Read returns up to max entries from offset from (fewer at the end of n,
// none at or past it). An I/O error, a file shorter than n entries
// (io.ErrUnexpectedEOF) and an entry that fails its check (ErrCorrupt) are
// errors, never an empty result.
func (x *Index) Read(from uint64, max int, n uint64) ([]Entry, error) {
	if from >= n || max <= 0 {
		return nil, nil
	}
	cnt := n - from
	if cnt > uint64(max) {
		cnt = uint64(max)
	}
	buf := make([]byte, cnt*EntrySize)
	got, err := x.f.ReadAt(buf, int64(from)*EntrySize)
	if got == len(buf) && errors.Is(err, io.EOF) {
		err = nil // a full read that ends at the end of the file
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("queueindex: read %s entries [%d, %d): %w", x.name, from, from+cnt, err)
	}
	out := make([]Entry, cnt)
	for i := range out {
		e, ok := decodeEntry(buf[i*EntrySize:])
		if !ok {
			return nil, fmt.Errorf("%w: %s entry %d fails its checksum", ErrCorrupt, x.name, from+uint64(i))
		}
		out[i] = e
	}
	return out, nil
}

// Verify reads and checks every entry, for a recovery that must not trust
// the file blindly; it returns the first error Read would.
func (x *Index) Verify() error {
	const chunk = 4096
	n := x.Len()
	for from := uint64(0); from < n; from += chunk {
		if _, err := x.Read(from, chunk, n); err != nil {
			return err
		}
	}
	return nil
}

// Sync makes the entries written so far durable, and the file's directory
// entry if Open created it. A failure is sticky: this and every later Sync
// return an error wrapping ErrSyncFailed and the first cause, and Durable
// stays where it was (see the package doc for what the caller must do).
func (x *Index) Sync() error {
	x.syncMu.Lock()
	defer x.syncMu.Unlock()
	if x.failed != nil {
		return x.failed
	}
	n := x.n.Load() // every entry below n is in the file
	if err := x.f.Sync(); err != nil {
		x.failed = fmt.Errorf("%w: %s: %w", ErrSyncFailed, x.name, err)
		return x.failed
	}
	if x.dirPending {
		if err := x.fs.SyncDir(path.Dir(x.name)); err != nil {
			x.failed = fmt.Errorf("%w: directory of %s: %w", ErrSyncFailed, x.name, err)
			return x.failed
		}
		x.dirPending = false
	}
	x.durable.Store(n)
	return nil
}

// Close closes the file.
func (x *Index) Close() error { return x.f.Close() }
