package schedule

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"sort"
	"sync"

	"github.com/hourglass-mq/hourglass/vfs"
)

// The journal's constants are part of its on-disk format (drawn in the
// package doc) and must not change.
const (
	journalName = "journal"
	journalTmp  = "journal.tmp"
	headerSize  = 16
	frameHeader = 8
	// maxFrame bounds one frame: a schedule's body (at most the broker's
	// body limit, 256 MiB) plus its headers, or a progress batch.
	maxFrame = 300 << 20

	recState    = 1 // a schedule's whole state: created, paused, resumed, compacted
	recProgress = 2 // fire progress of several schedules
	recDelete   = 3 // a schedule is gone

	formatVersion = 1
)

var (
	magic = [8]byte{'H', 'G', 'S', 'C', 'H', 'E', 'D', 0}
	crcT  = crc32.MakeTable(crc32.Castagnoli)
)

// crcSeed makes an all-zero frame fail its checksum.
const crcSeed = 0x5c4ed01e

func checksum(b []byte) uint32 { return crc32.Update(crcSeed, crcT, b) }

// ErrCorrupt is returned by OpenStore when the journal holds damage before
// its last valid record: something acknowledged would be lost by cutting
// there, so the store refuses to open rather than guess.
var ErrCorrupt = errors.New("schedule: journal is damaged")

// ErrStopped is returned by every write after one failed: a failed fsync
// may have dropped the data it covered, so the store does not write past
// the hole (the broker's fault model: fail-stop).
var ErrStopped = errors.New("schedule: journal stopped after a failed write")

// Progress is the fire progress of one schedule (see Schedule).
type Progress struct {
	ID       string
	Through  int64
	LastFire int64
	LastID   string
}

// Store is the schedules' journal in its directory. Its methods are safe
// for concurrent use; each write is durable (fsynced) when it returns.
type Store struct {
	fs  vfs.FS
	dir string

	mu        sync.Mutex
	f         vfs.File
	size      int64
	compacted int64 // size after the last compaction
	err       error // sticky: the first failed write
}

// OpenStore opens (or creates) the journal in dir, reads every schedule,
// cuts a torn tail, and compacts the file to one state record per
// schedule before it returns. If the compacted file cannot be written, the
// store is returned stopped (Err says why), with every schedule read.
func OpenStore(fsys vfs.FS, dir string) (*Store, map[string]*Schedule, error) {
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, nil, err
	}
	all := map[string]*Schedule{}
	if f, err := fsys.Open(path.Join(dir, journalName)); err == nil {
		err = readJournal(f, all)
		f.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("schedule journal %s: %w", path.Join(dir, journalName), err)
		}
	} else if !errors.Is(err, vfs.ErrNotExist) {
		return nil, nil, err
	}
	s := &Store{fs: fsys, dir: dir}
	if err := s.compact(all); err != nil {
		if s.f != nil || s.err != nil {
			return nil, nil, err // renamed in, then its directory's sync failed
		}
		// The new journal could not be written (a full disk, say): the
		// old one is intact and read. Start with the store stopped, so
		// the broker serves everything else and the schedules stay as
		// they are, rather than refuse to start until space is freed; a
		// restart with room compacts it then.
		_ = fsys.Remove(path.Join(dir, journalTmp))
		s.err = fmt.Errorf("%w: %w", ErrStopped, err)
	}
	s.compacted = s.size
	return s, all, nil
}

// NeedsCompaction reports whether the journal has grown well past its
// last compacted size: progress records of frequent schedules add up
// (100,000 schedules a minute write about 4 MB a minute).
func (s *Store) NeedsCompaction() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size > 2*s.compacted+64<<20
}

// Compact rewrites the journal as one state record per schedule of all,
// which must be the store's whole current state, and swaps it in
// atomically.
func (s *Store) Compact(all map[string]*Schedule) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	old := s.f
	if err := s.compact(all); err != nil {
		if s.f != old && old != nil {
			// Replaced, then the directory's sync failed: the store has
			// stopped (compact), and the old file is no journal.
			old.Close()
		}
		// Else the old journal is still complete; keep appending to it.
		return err
	}
	s.compacted = s.size
	if old != nil {
		old.Close()
	}
	return nil
}

// readJournal applies every valid record of f to all.
func readJournal(f vfs.File, all map[string]*Schedule) error {
	size, err := f.Size()
	if err != nil {
		return err
	}
	data := make([]byte, size)
	if n, err := f.ReadAt(data, 0); n < len(data) && err != nil && err != io.EOF {
		return err
	}
	if size < headerSize {
		return nil // torn while being created: nothing was acknowledged in it
	}
	if [8]byte(data[:8]) != magic || checksum(data[:12]) != binary.LittleEndian.Uint32(data[12:16]) {
		return fmt.Errorf("%w: bad header", ErrCorrupt)
	}
	if v := binary.LittleEndian.Uint16(data[8:10]); v != formatVersion {
		return fmt.Errorf("%w: format version %d, this version reads %d", ErrCorrupt, v, formatVersion)
	}
	for off := headerSize; off < len(data); {
		typ, payload, next, ok := frameAt(data, off)
		if !ok {
			if validFrameAfter(data, off+1) {
				return fmt.Errorf("%w: bad record at offset %d followed by valid records", ErrCorrupt, off)
			}
			return nil // a torn last write, never acknowledged: cut
		}
		if err := apply(all, typ, payload); err != nil {
			return fmt.Errorf("%w: record at offset %d: %v", ErrCorrupt, off, err)
		}
		off = next
	}
	return nil
}

// frameAt decodes the frame at off.
func frameAt(data []byte, off int) (typ byte, payload []byte, next int, ok bool) {
	if len(data)-off < frameHeader {
		return 0, nil, 0, false
	}
	n := int(binary.LittleEndian.Uint32(data[off:]))
	if n < 1 || n > maxFrame || n > len(data)-off-frameHeader {
		return 0, nil, 0, false
	}
	body := data[off+frameHeader : off+frameHeader+n]
	if checksum(body) != binary.LittleEndian.Uint32(data[off+4:]) {
		return 0, nil, 0, false
	}
	return body[0], body[1:], off + frameHeader + n, true
}

// validFrameAfter reports whether a valid frame starts anywhere at or
// after from. It runs only on a damaged or torn tail; most offsets fail
// the length check without a checksum.
func validFrameAfter(data []byte, from int) bool {
	for off := from; off+frameHeader < len(data); off++ {
		if typ, _, _, ok := frameAt(data, off); ok && typ >= recState && typ <= recDelete {
			return true
		}
	}
	return false
}

func apply(all map[string]*Schedule, typ byte, p []byte) error {
	d := decoder{b: p}
	switch typ {
	case recState:
		sc := d.schedule()
		if d.err != nil {
			return d.err
		}
		all[sc.ID] = sc
	case recProgress:
		for n := d.u32(); n > 0 && d.err == nil; n-- {
			pr := d.progress()
			if sc := all[pr.ID]; sc != nil && d.err == nil {
				sc.Through, sc.LastFire, sc.LastID = pr.Through, pr.LastFire, pr.LastID
			}
		}
	case recDelete:
		id := d.str()
		if d.err == nil {
			delete(all, id)
		}
	default:
		return fmt.Errorf("unknown record type %d", typ)
	}
	return d.err
}

// Err returns the failure that stopped the store, or nil.
func (s *Store) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// compact writes the live schedules to a new journal and replaces the old
// one atomically, then opens it for appends.
func (s *Store) compact(all map[string]*Schedule) error {
	ids := make([]string, 0, len(all))
	for id := range all {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	buf := make([]byte, headerSize, headerSize+len(ids)*256)
	copy(buf, magic[:])
	binary.LittleEndian.PutUint16(buf[8:], formatVersion)
	binary.LittleEndian.PutUint32(buf[12:], checksum(buf[:12]))
	for _, id := range ids {
		buf = appendFrame(buf, recState, encodeSchedule(all[id]))
	}
	tmp := path.Join(s.dir, journalTmp)
	f, err := s.fs.Create(tmp)
	if err != nil {
		return err
	}
	if _, err = f.WriteAt(buf, 0); err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("compact the schedule journal: %w", err)
	}
	if err := s.fs.Rename(tmp, path.Join(s.dir, journalName)); err != nil {
		f.Close()
		return err
	}
	// From the rename on, the new file is the journal: writing on to the
	// old one (unlinked now) would acknowledge changes the next open never
	// sees.
	s.f, s.size = f, int64(len(buf))
	if err := s.fs.SyncDir(s.dir); err != nil {
		// Whether the rename is durable is unknown: stop, as after any
		// failed fsync.
		s.err = fmt.Errorf("%w: %v", ErrStopped, err)
		return s.err
	}
	return nil
}

func appendFrame(buf []byte, typ byte, payload []byte) []byte {
	var h [frameHeader]byte
	binary.LittleEndian.PutUint32(h[:], uint32(1+len(payload)))
	start := len(buf)
	buf = append(buf, h[:]...)
	buf = append(buf, typ)
	buf = append(buf, payload...)
	binary.LittleEndian.PutUint32(buf[start+4:], checksum(buf[start+frameHeader:]))
	return buf
}

// write appends one frame and fsyncs it.
func (s *Store) write(typ byte, payload []byte) error {
	frame := appendFrame(nil, typ, payload)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if s.f == nil {
		return ErrStopped
	}
	_, err := s.f.WriteAt(frame, s.size)
	if err == nil {
		err = s.f.Sync()
	}
	if err != nil {
		s.err = fmt.Errorf("%w: %v", ErrStopped, err)
		return s.err
	}
	s.size += int64(len(frame))
	return nil
}

// Put durably records a schedule's whole state.
func (s *Store) Put(sc *Schedule) error { return s.write(recState, encodeSchedule(sc)) }

// Progress durably records the fire progress of several schedules in one
// write.
func (s *Store) Progress(ps []Progress) error {
	if len(ps) == 0 {
		return nil
	}
	var e encoder
	e.u32(uint32(len(ps)))
	for _, p := range ps {
		e.str(p.ID)
		e.i64(p.Through)
		e.i64(p.LastFire)
		e.str(p.LastID)
	}
	return s.write(recProgress, e.b)
}

// Delete durably records that a schedule is gone.
func (s *Store) Delete(id string) error {
	var e encoder
	e.str(id)
	return s.write(recDelete, e.b)
}

// Size returns the journal's length in bytes.
func (s *Store) Size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size
}

// Close closes the journal file.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// encodeSchedule is the payload of a state record (package doc).
func encodeSchedule(sc *Schedule) []byte {
	var e encoder
	e.str(sc.ID)
	e.str(sc.Topic)
	e.str(sc.Key)
	e.str(sc.Tag)
	e.str(sc.Cron)
	e.str(sc.TZ)
	e.str(string(sc.CatchUp))
	e.i64(sc.Created)
	var flags byte
	if sc.Paused {
		flags |= 1
	}
	e.b = append(e.b, flags)
	e.i64(sc.Through)
	e.i64(sc.LastFire)
	e.str(sc.LastID)
	keys := make([]string, 0, len(sc.Properties))
	for k := range sc.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e.u32(uint32(len(keys)))
	for _, k := range keys {
		e.str(k)
		e.str(sc.Properties[k])
	}
	e.str(string(sc.Body))
	return e.b
}

type encoder struct{ b []byte }

func (e *encoder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *encoder) i64(v int64)  { e.b = binary.LittleEndian.AppendUint64(e.b, uint64(v)) }
func (e *encoder) str(s string) { e.u32(uint32(len(s))); e.b = append(e.b, s...) }

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = errors.New("record ends early")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) i64() int64 {
	if v := d.take(8); v != nil {
		return int64(binary.LittleEndian.Uint64(v))
	}
	return 0
}

func (d *decoder) str() string { return string(d.take(int(d.u32()))) }

func (d *decoder) progress() Progress {
	return Progress{ID: d.str(), Through: d.i64(), LastFire: d.i64(), LastID: d.str()}
}

func (d *decoder) schedule() *Schedule {
	sc := &Schedule{ID: d.str(), Topic: d.str(), Key: d.str(), Tag: d.str(), Cron: d.str(), TZ: d.str(), CatchUp: CatchUp(d.str())}
	sc.Created = d.i64()
	if f := d.take(1); f != nil {
		sc.Paused = f[0]&1 != 0
	}
	sc.Through, sc.LastFire, sc.LastID = d.i64(), d.i64(), d.str()
	if n := d.u32(); n > 0 {
		sc.Properties = map[string]string{}
		for ; n > 0 && d.err == nil; n-- {
			k := d.str()
			sc.Properties[k] = d.str()
		}
	}
	if body := d.str(); body != "" {
		sc.Body = []byte(body)
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errors.New("record has trailing bytes")
	}
	return sc
}
