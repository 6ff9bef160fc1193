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
//	28     4    check    u32 low 32 bits of a mix of the fields, to drop torn entries
//
// The file is a cache derived from the commit log's fire records: the
// engine's checkpoint stores the length up to which it is synced, and
// recovery truncates to that length and re-appends what the log says.
package queueindex

import (
	"encoding/binary"
	"fmt"

	"github.com/hourglass-mq/hourglass/vfs"
)

// EntrySize is the size of one entry on disk.
const EntrySize = 32

// Entry is one visible message.
type Entry struct {
	Pos     uint64
	Due     int64
	Visible int64
	Size    uint32
}

func (e Entry) check() uint32 {
	h := e.Pos*0x9e3779b97f4a7c15 ^ uint64(e.Due)*0xc2b2ae3d27d4eb4f ^ uint64(e.Visible)*0x165667b19e3779f9 ^ uint64(e.Size)
	return uint32(h ^ h>>32)
}

// Index is one queue's index file. Offsets count entries from 0. It is safe
// for one appender and concurrent readers.
type Index struct {
	f vfs.File
	// n is the number of entries; written only by the appender under the
	// engine's lock, read by readers under the same lock.
	n uint64
	// unwritten holds, in order, the entries of Appends whose write failed
	// (a full disk). They are written before anything appended later, so
	// the file keeps the order of the Appends; readers do not see them
	// until then.
	unwritten []Entry
}

// Open opens or creates the index file name and positions the end at the
// last whole, valid entry. If keep >= 0 the file is first cut to keep
// entries (recovery: the length the checkpoint recorded).
func Open(fs vfs.FS, name string, keep int64) (*Index, error) {
	f, err := fs.Open(name)
	if vfs.IsNotExist(err) {
		f, err = fs.Create(name)
	}
	if err != nil {
		return nil, err
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, err
	}
	n := size / EntrySize
	if keep >= 0 && keep < n {
		n = keep
	}
	if keep > n {
		f.Close()
		return nil, fmt.Errorf("queueindex: %s has %d entries but the checkpoint recorded %d", name, n, keep)
	}
	if n*EntrySize != size {
		if err := f.Truncate(n * EntrySize); err != nil {
			f.Close()
			return nil, err
		}
	}
	return &Index{f: f, n: uint64(n)}, nil
}

// Len returns the number of entries.
func (x *Index) Len() uint64 { return x.n }

// Append writes entries at the end, after any an earlier failed Append
// left unwritten, and returns the offset of the first of es. They are
// durable after Sync. If the write fails, es are kept with the unwritten
// entries for the next Append or Retry, and Len does not count them yet.
func (x *Index) Append(es []Entry) (uint64, error) {
	if len(x.unwritten) > 0 {
		es = append(x.unwritten[:len(x.unwritten):len(x.unwritten)], es...)
	}
	buf := make([]byte, len(es)*EntrySize)
	for i, e := range es {
		b := buf[i*EntrySize:]
		binary.LittleEndian.PutUint64(b[0:], e.Pos)
		binary.LittleEndian.PutUint64(b[8:], uint64(e.Due))
		binary.LittleEndian.PutUint64(b[16:], uint64(e.Visible))
		binary.LittleEndian.PutUint32(b[24:], e.Size)
		binary.LittleEndian.PutUint32(b[28:], e.check())
	}
	first := x.n + uint64(len(x.unwritten))
	if _, err := x.f.WriteAt(buf, int64(x.n)*EntrySize); err != nil {
		x.unwritten = es
		return 0, err
	}
	x.n += uint64(len(es))
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

// Read returns up to max entries from offset from (fewer at the end).
func (x *Index) Read(from uint64, max int, n uint64) ([]Entry, error) {
	if from >= n || max <= 0 {
		return nil, nil
	}
	cnt := n - from
	if cnt > uint64(max) {
		cnt = uint64(max)
	}
	buf := make([]byte, cnt*EntrySize)
	if _, err := x.f.ReadAt(buf, int64(from)*EntrySize); err != nil {
		return nil, err
	}
	out := make([]Entry, cnt)
	for i := range out {
		b := buf[i*EntrySize:]
		e := Entry{
			Pos:     binary.LittleEndian.Uint64(b[0:]),
			Due:     int64(binary.LittleEndian.Uint64(b[8:])),
			Visible: int64(binary.LittleEndian.Uint64(b[16:])),
			Size:    binary.LittleEndian.Uint32(b[24:]),
		}
		if binary.LittleEndian.Uint32(b[28:]) != e.check() {
			return nil, fmt.Errorf("queueindex: entry %d fails its check", from+uint64(i))
		}
		out[i] = e
	}
	return out, nil
}

// Sync makes the entries durable.
func (x *Index) Sync() error { return x.f.Sync() }

// Close closes the file.
func (x *Index) Close() error { return x.f.Close() }
