package engine

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/hourglass-mq/hourglass/vfs"
)

// The overlay journal persists the overlay (messages rescheduled, cancelled,
// or fired after a reschedule) incrementally, so that the checkpoint's cost
// does not grow with history: a checkpoint writes only the entries changed
// since the previous one, outside the engine's locks, and records the
// length of each journal file, never the overlay itself.
//
// There is one file per commit-log segment, "overlay/<segment base>.ov",
// holding the entries of the messages whose current copy lies in that
// segment; retention deletes it with the segment, so the journal's size is
// bounded by what is retained, and nothing is ever rewritten. A move
// (compaction forward) journals the moved message's entry again in its new
// segment. Entries are appended in the order the overlay changed; at
// recovery a later entry of a position replaces an earlier one.
//
// Entry layout (little endian), part of the on-disk format:
//
//	offset size field
//	0      8    pos      u64 identity (original position) of the message
//	8      8    due      i64 effective due time, Unix ms
//	16     8    visible  i64 when it became visible, if fired
//	24     1    flags    u8  1 cancelled, 2 fired
//	25     3    reserved, 0
//	28     4    check    u32 CRC32C of bytes 0..27 xor ovCheckSeed
//
// The journal is a cache of the log's cancel, reschedule and fire records,
// like the other indexes: the checkpoint vouches for each file up to its
// recorded length, and recovery re-derives what came after from the log.
const (
	ovEntrySize  = 32
	ovCancelled  = 1
	ovFired      = 2
	ovCheckSeed  = 0x0e7a1a75
	overlayDir   = "overlay"
	overlayFiles = ".ov"
)

func encodeOverlayEntry(b []byte, pos uint64, ov *overlayEntry) {
	binary.LittleEndian.PutUint64(b, pos)
	binary.LittleEndian.PutUint64(b[8:], uint64(ov.Due))
	binary.LittleEndian.PutUint64(b[16:], uint64(ov.Visible))
	var f uint8
	if ov.Cancelled {
		f |= ovCancelled
	}
	if ov.Fired {
		f |= ovFired
	}
	b[24], b[25], b[26], b[27] = f, 0, 0, 0
	binary.LittleEndian.PutUint32(b[28:], crc32.Checksum(b[:28], crcTable)^ovCheckSeed)
}

func decodeOverlayEntry(b []byte) (uint64, overlayEntry, bool) {
	if crc32.Checksum(b[:28], crcTable)^ovCheckSeed != binary.LittleEndian.Uint32(b[28:]) || b[24]&^(ovCancelled|ovFired) != 0 {
		return 0, overlayEntry{}, false
	}
	return binary.LittleEndian.Uint64(b), overlayEntry{
		Due:       int64(binary.LittleEndian.Uint64(b[8:])),
		Visible:   int64(binary.LittleEndian.Uint64(b[16:])),
		Cancelled: b[24]&ovCancelled != 0,
		Fired:     b[24]&ovFired != 0,
	}, true
}

// overlayJournal is the set of journal files. Its methods run under the
// engine's mu, except ovJob.run.
type overlayJournal struct {
	fs  vfs.FS
	dir string
	// sizes is each file's length including buffered entries.
	sizes map[uint64]int64
	// buf holds entries not yet handed to a job, by segment.
	buf map[uint64][]byte
}

func newOverlayJournal(fs vfs.FS, dataDir string) (*overlayJournal, error) {
	j := &overlayJournal{fs: fs, dir: path.Join(dataDir, overlayDir), sizes: map[uint64]int64{}, buf: map[uint64][]byte{}}
	return j, fs.MkdirAll(j.dir)
}

func (j *overlayJournal) name(seg uint64) string {
	return path.Join(j.dir, strconv.FormatUint(seg, 10)+overlayFiles)
}

// add journals the current state of the overlay entry of pos, whose copy
// lies in segment seg.
func (j *overlayJournal) add(seg, pos uint64, ov *overlayEntry) {
	var b [ovEntrySize]byte
	encodeOverlayEntry(b[:], pos, ov)
	j.buf[seg] = append(j.buf[seg], b[:]...)
	j.sizes[seg] += ovEntrySize
}

// ovWrite is one file's part of a job.
type ovWrite struct {
	name string
	off  int64
	data []byte
}

// ovJob writes and syncs what was buffered when it was prepared.
type ovJob struct {
	fs     vfs.FS
	dir    string
	writes []ovWrite
}

// prepare hands every buffered entry to a job and returns the lengths the
// files will have once it ran.
func (j *overlayJournal) prepare() (*ovJob, map[uint64]int64) {
	job := &ovJob{fs: j.fs, dir: j.dir}
	for seg, data := range j.buf {
		job.writes = append(job.writes, ovWrite{name: j.name(seg), off: j.sizes[seg] - int64(len(data)), data: data})
	}
	j.buf = map[uint64][]byte{}
	sizes := make(map[uint64]int64, len(j.sizes))
	for k, v := range j.sizes {
		sizes[k] = v
	}
	return job, sizes
}

// run writes the job's entries and syncs the files and the directory. A
// failure leaves the journal unusable: a failed fsync may have dropped the
// pages it covered, so the engine stops (see Engine.fail).
func (job *ovJob) run() error {
	for _, w := range job.writes {
		if err := writeSynced(job.fs, w.name, w.off, w.data, false); err != nil {
			return err
		}
	}
	if len(job.writes) > 0 {
		return job.fs.SyncDir(job.dir)
	}
	return nil
}

// remove deletes the file of a segment retention deleted.
func (j *overlayJournal) remove(seg uint64) error {
	delete(j.sizes, seg)
	delete(j.buf, seg)
	err := j.fs.Remove(j.name(seg))
	if vfs.IsNotExist(err) {
		return nil
	}
	return err
}

// load reads every file the checkpoint vouched for, up to its recorded
// length, checking each entry, and calls apply in journal order. A file
// that is missing, shorter than recorded or holds a bad entry is an error:
// the journal cannot be rebuilt from a log whose older segments may be
// gone, so recovery refuses rather than forget a cancel. Bytes beyond the
// recorded length, and files the checkpoint does not name, are cut.
//
// Files of segments below logStart are skipped and removed: retention
// deletes a segment's journal after the checkpoint that still lists it.
func (j *overlayJournal) load(keep map[uint64]int64, logStart uint64, apply func(pos uint64, ov overlayEntry)) error {
	names, err := j.fs.List(j.dir)
	if err != nil {
		return err
	}
	present := map[uint64]bool{}
	for _, n := range names {
		seg, err := strconv.ParseUint(strings.TrimSuffix(n, overlayFiles), 10, 64)
		if err != nil || !strings.HasSuffix(n, overlayFiles) {
			continue
		}
		if _, ok := keep[seg]; !ok || seg < logStart {
			if err := j.fs.Remove(path.Join(j.dir, n)); err != nil {
				return err
			}
			continue
		}
		present[seg] = true
	}
	segs := make([]uint64, 0, len(keep))
	for seg := range keep {
		if seg >= logStart {
			segs = append(segs, seg)
		}
	}
	sort.Slice(segs, func(a, b int) bool { return segs[a] < segs[b] })
	for _, seg := range segs {
		size := keep[seg]
		name := j.name(seg)
		if size%ovEntrySize != 0 {
			return fmt.Errorf("overlay journal %s: the checkpoint recorded %d bytes, not a whole number of entries", name, size)
		}
		if !present[seg] {
			if size == 0 {
				continue
			}
			return fmt.Errorf("overlay journal %s is missing; the checkpoint recorded %d bytes", name, size)
		}
		b, err := readAll(j.fs, name)
		if err != nil {
			return fmt.Errorf("overlay journal %s: %w", name, err)
		}
		if int64(len(b)) < size {
			return fmt.Errorf("overlay journal %s is %d bytes; the checkpoint recorded %d", name, len(b), size)
		}
		for off := int64(0); off < size; off += ovEntrySize {
			pos, ov, ok := decodeOverlayEntry(b[off : off+ovEntrySize])
			if !ok {
				return fmt.Errorf("overlay journal %s: entry at offset %d fails its checksum", name, off)
			}
			apply(pos, ov)
		}
		if int64(len(b)) > size {
			f, err := j.fs.Open(name)
			if err != nil {
				return err
			}
			err = f.Truncate(size)
			f.Close()
			if err != nil {
				return err
			}
		}
		j.sizes[seg] = size
	}
	return nil
}
