// Package keyindex maps a business key to the latest message that carries
// it: hash(topic, key) -> commit-log position of that message. It backs
// cancel and inspect by key.
//
// The map lives in memory; the file is its redo log, a flat sequence of
// fixed-size entries (little endian), no header:
//
//	offset size field
//	0      8    hash  u64 hash of (topic, key); the engine's choice
//	8      8    pos   u64 commit-log position (the message's ID)
//	16     4    zero  u32 reserved, written as 0
//	20     4    check u32 CRC-32C (Castagnoli) of bytes 0..19, with the
//	                      register started at checkSeed, not at zero
//
// The seed makes an all-zero entry (a file extended but never written, as
// a power loss can leave) fail its check; an entry whose reserved field is
// not zero fails too. The layout is part of the on-disk format.
//
// Meaning. For each hash the entry with the greatest position wins, wherever
// it stands in the file. (Put writes only entries that win at the time, so
// a hash's entries stand in increasing order; Open does not rely on it.) Positions grow in log order, so the latest message
// wins whatever order concurrent senders call Put in, live and at replay,
// and reading the file gives the same map as the live one: a key's answer
// does not change across a restart with no write in between. A key whose
// winner lies below the log's start (retention removed it; phys maps a
// message's ID to where its record now is, after compaction moved it) is
// dropped, live by DropBefore and at Open by minPos, the same way.
//
// Trust. The file is a cache derived from the commit log. The engine's
// checkpoint records Len after a Sync; Open reads and checks every entry up
// to that length, fails with ErrCorrupt naming the file and offset on a bad
// one or on a file missing or shorter than recorded, and cuts whatever lies
// beyond it (bytes never vouched for, possibly torn). Recovery then re-puts
// the keys of the records after the checkpoint from the log. On ErrCorrupt
// the engine may Reset and re-put every key from a scan of the whole log.
//
// Sync failure is final. After a failed fsync, Linux may mark the unwritten
// pages clean, so a later fsync succeeds without writing them: a length
// recorded after it would vouch for bytes that are not on disk. A failed
// Sync therefore makes every later Sync fail with ErrSyncFailed, and the
// engine fail-stops; the next recovery cuts the file to the last recorded
// length and re-derives the rest from the log. Only Reset, which empties
// the file, clears the state.
//
// Concurrency. An Index is safe for concurrent use. Put and Get never wait
// for file I/O: Flush writes outside the mutex they take, so the engine may
// call them under the lock its senders hold and flush from elsewhere.
package keyindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"sync"

	"github.com/hourglass-mq/hourglass/vfs"
)

// EntrySize is the size of one entry on disk.
const EntrySize = 24

// ErrCorrupt means the file disagrees with what was written and synced
// into it: an entry fails its check, the file is missing or shorter than
// the checkpoint recorded, or the recorded length is not a whole number of
// entries. Errors wrap it with the file and offset.
var ErrCorrupt = errors.New("keyindex: corrupt key index")

// ErrSyncFailed is wrapped by every Sync after one failed; see the package
// doc.
var ErrSyncFailed = errors.New("keyindex: an earlier sync failed; the file can no longer be vouched for")

// checkSeed starts the CRC register, so that the check of twenty zero bytes
// is not zero (TestZeroEntryFails).
const checkSeed = 0x6b657973 // "keys"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendEntry appends the encoding of (h, pos) to b.
func appendEntry(b []byte, h, pos uint64) []byte {
	var e [EntrySize]byte
	binary.LittleEndian.PutUint64(e[0:], h)
	binary.LittleEndian.PutUint64(e[8:], pos)
	binary.LittleEndian.PutUint32(e[20:], crc32.Update(checkSeed, castagnoli, e[:20]))
	return append(b, e[:]...)
}

// parseEntry decodes one entry and reports whether it passes its check.
func parseEntry(e []byte) (h, pos uint64, ok bool) {
	if binary.LittleEndian.Uint32(e[16:]) != 0 ||
		binary.LittleEndian.Uint32(e[20:]) != crc32.Update(checkSeed, castagnoli, e[:20]) {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint64(e[0:]), binary.LittleEndian.Uint64(e[8:]), true
}

// corrupt returns an ErrCorrupt naming the file and offset.
func corrupt(name string, off int64, format string, args ...any) error {
	return fmt.Errorf("%w: %s at offset %d: %s", ErrCorrupt, name, off, fmt.Sprintf(format, args...))
}

// Index is the key index of one broker. See the package doc.
type Index struct {
	name string
	f    vfs.File
	phys func(uint64) uint64

	// flushMu serializes Flush and Reset, the methods that write the file.
	// Lock order: flushMu before mu; mu is never held across file I/O.
	flushMu sync.Mutex

	mu struct {
		sync.Mutex
		// m maps a hash to the greatest position Put or the file gave it.
		m map[uint64]uint64
		// peak is the largest len(m) since m was made; DropBefore makes a
		// smaller map when m has shrunk to under half of it, because Go
		// maps keep their memory when entries are deleted.
		peak int
		// buf holds the encoded entries no Flush has taken yet, in Put
		// order; writing counts those a Flush is writing now.
		buf     []byte
		writing int
		// spare is the buffer the last successful Flush wrote, kept for
		// the next one so that buffers alternate instead of being
		// allocated and grown again (when at most maxSpare bytes).
		spare []byte
		// n is the length of the file in bytes: every entry below it was
		// written by a Flush that returned nil.
		n int64
		// failed is set by the first failed Sync and returned by every
		// later one.
		failed error
	}
}

// readChunk is how many bytes Open reads at a time: a whole number of
// entries.
const readChunk = EntrySize * 43690

// Open opens or creates the index file name and loads it. keep is the
// length the checkpoint recorded (0 without a checkpoint): every entry
// below it is checked, and whatever lies beyond it is cut. A key whose
// winning position p has phys(p) < minPos is left out (retention removed
// its message). phys may be nil, meaning that positions do not move; it is
// called only from Open and DropBefore, on the caller's goroutine and under
// the Index's mutex, so it must not call back into the Index.
func Open(fs vfs.FS, name string, keep int64, minPos uint64, phys func(uint64) uint64) (*Index, error) {
	if phys == nil {
		phys = func(p uint64) uint64 { return p }
	}
	if keep < 0 || keep%EntrySize != 0 {
		return nil, corrupt(name, 0, "the checkpoint recorded %d bytes, not a whole number of %d-byte entries", keep, EntrySize)
	}
	f, err := openFile(fs, name, keep)
	if err != nil {
		return nil, err
	}
	x := &Index{name: name, f: f, phys: phys}
	m, err := load(f, name, keep)
	if err == nil {
		err = cut(f, keep)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	for h, p := range m {
		if phys(p) < minPos {
			delete(m, h)
		}
	}
	x.mu.m, x.mu.peak, x.mu.n = m, len(m), keep
	return x, nil
}

// openFile opens name, or creates it (durably) when no checkpoint vouched
// for any of it.
func openFile(fs vfs.FS, name string, keep int64) (vfs.File, error) {
	f, err := fs.Open(name)
	if err == nil || !vfs.IsNotExist(err) {
		return f, err
	}
	if keep > 0 {
		return nil, corrupt(name, 0, "file is missing, the checkpoint recorded %d bytes", keep)
	}
	if f, err = fs.Create(name); err != nil {
		return nil, err
	}
	if err := fs.SyncDir(path.Dir(name)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// load reads and checks the first keep bytes of f and returns, for each
// hash, the greatest position among its entries.
func load(f vfs.File, name string, keep int64) (map[uint64]uint64, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size < keep {
		return nil, corrupt(name, size, "file ends here, the checkpoint recorded %d bytes", keep)
	}
	// Presized: growing a map of millions of keys entry by entry costs
	// seconds of a restart.
	m := make(map[uint64]uint64, keep/EntrySize)
	buf := make([]byte, min(keep, readChunk))
	for off := int64(0); off < keep; {
		p := buf[:min(int64(len(buf)), keep-off)]
		n, err := f.ReadAt(p, off)
		if n < len(p) {
			if err == io.EOF {
				return nil, corrupt(name, off+int64(n), "file ends here, the checkpoint recorded %d bytes", keep)
			}
			return nil, err
		}
		for i := 0; i < len(p); i += EntrySize {
			h, pos, ok := parseEntry(p[i : i+EntrySize])
			if !ok {
				return nil, corrupt(name, off+int64(i), "entry fails its check")
			}
			if cur, seen := m[h]; !seen || pos > cur {
				m[h] = pos
			}
		}
		off += int64(len(p))
	}
	return m, nil
}

// cut truncates f to keep if it is longer. The cut is made durable by the
// next Sync; until then a recovery cuts again to the same length.
func cut(f vfs.File, keep int64) error {
	size, err := f.Size()
	if err != nil || size <= keep {
		return err
	}
	return f.Truncate(keep)
}

// Put records that the message at pos carries the key hashed to h. It
// takes effect, in the map and in the buffer of entries to write, only if
// pos is greater than the position h has: the latest message wins, in
// whatever order concurrent callers arrive. The entry is on disk after
// Flush and durable after Sync.
func (x *Index) Put(h, pos uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if cur, ok := x.mu.m[h]; ok && cur >= pos {
		return
	}
	x.mu.m[h] = pos
	x.mu.peak = max(x.mu.peak, len(x.mu.m))
	x.mu.buf = appendEntry(x.mu.buf, h, pos)
}

// Get returns the position of the latest message with the key hashed to h.
func (x *Index) Get(h uint64) (uint64, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	p, ok := x.mu.m[h]
	return p, ok
}

// Keys returns the number of keys in the map.
func (x *Index) Keys() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.mu.m)
}

// Flush writes the buffered entries at the end of the file, without
// holding the mutex Put and Get take. If the write fails, the entries stay
// buffered, ahead of any Put meanwhile, for the next Flush, and Len does
// not count them.
func (x *Index) Flush() error {
	x.flushMu.Lock()
	defer x.flushMu.Unlock()
	x.mu.Lock()
	data, off := x.mu.buf, x.mu.n
	x.mu.buf, x.mu.spare, x.mu.writing = x.mu.spare, nil, len(data)/EntrySize
	x.mu.Unlock()
	if len(data) == 0 {
		return nil
	}
	_, err := x.f.WriteAt(data, off)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.mu.writing = 0
	if err != nil {
		x.mu.buf = append(data, x.mu.buf...)
		return err
	}
	x.mu.n += int64(len(data))
	if cap(data) <= maxSpare {
		x.mu.spare = data[:0]
	}
	return nil
}

// maxSpare is the largest buffer Flush keeps for reuse; a larger one (after
// a burst of Puts with no Flush) goes back to the garbage collector.
const maxSpare = 1 << 20

// Unwritten returns the number of entries Put buffered that no Flush has
// written yet.
func (x *Index) Unwritten() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.mu.buf)/EntrySize + x.mu.writing
}

// Len returns the length of the file in bytes: every entry below it was
// written by a Flush. After a Sync that began after that Flush returned, it
// is the length a checkpoint may record.
func (x *Index) Len() int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.mu.n
}

// Sync makes durable every entry written by a Flush that returned before
// it began. A failed Sync is final: it and every later one return an error
// wrapping ErrSyncFailed and the cause (see the package doc).
func (x *Index) Sync() error {
	x.mu.Lock()
	failed := x.mu.failed
	x.mu.Unlock()
	if failed != nil {
		return failed
	}
	err := x.f.Sync()
	if err == nil {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.mu.failed == nil {
		x.mu.failed = fmt.Errorf("%w: %s: %w", ErrSyncFailed, x.name, err)
	}
	return x.mu.failed
}

// DropBefore removes the keys whose message lies below minPhys in the log,
// by phys of its position (retention removed it), and returns how many it
// removed.
func (x *Index) DropBefore(minPhys uint64) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for h, p := range x.mu.m {
		if x.phys(p) < minPhys {
			delete(x.mu.m, h)
			n++
		}
	}
	if len(x.mu.m) < x.mu.peak/2 {
		m := make(map[uint64]uint64, len(x.mu.m))
		for h, p := range x.mu.m {
			m[h] = p
		}
		x.mu.m, x.mu.peak = m, len(m)
	}
	return n
}

// Reset empties the file and the map and forgets buffered entries, so that
// the engine can rebuild the index by re-putting every key from a scan of
// the log. (After Open failed with ErrCorrupt, Open with keep 0 gives the
// same empty index: it checks nothing and cuts everything.) It clears a failed Sync's state:
// the pages whose write failed are gone with the truncation. The cut is
// durable after the next Sync. No Put may run concurrently with Reset.
func (x *Index) Reset() error {
	x.flushMu.Lock()
	defer x.flushMu.Unlock()
	if err := x.f.Truncate(0); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.mu.m, x.mu.peak = map[uint64]uint64{}, 0
	x.mu.buf, x.mu.spare, x.mu.n, x.mu.failed = nil, nil, 0, nil
	return nil
}

// Close closes the file. Buffered entries are not written: Flush first.
func (x *Index) Close() error { return x.f.Close() }
