package kafkamode

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A snapshot is the pending index of one delay partition, written to the
// state topic in a transaction with the group offset commit, so a worker
// that takes the partition over reads the delay partition only from the
// snapshot's read position on (see the package doc for the format).

// snapVersion is the first byte of every snapshot value this version
// writes. Version 2 added each entry's back (a chunk of version 1 reads
// with back 0: written before copies carried it).
const snapVersion = 2

// snapVersionNoBack is the version before entries carried back.
const snapVersionNoBack = 1

// snapChunkEntries bounds the entries of one chunk record: at most ~36
// bytes each, a chunk stays under 600 KB, below Kafka's default 1 MiB
// record limit.
const snapChunkEntries = 16384

// snapEntry is one pending delay record in a snapshot.
type snapEntry struct {
	offset  int64
	due     int64 // Unix ms
	ts      int64 // the record's timestamp, Unix ms (for copy-forward)
	keyHash uint64
	back    int64 // entry.back: offset minus the offset its message was first sent at
}

// snapshot is one decoded snapshot of a delay partition: every record at
// an offset below read that was pending when the snapshot's transaction
// committed, ascending by offset.
type snapshot struct {
	id      uint64
	read    int64 // one past the highest offset read
	start   int64 // state offset of its first record (chunk 0)
	chunks  int
	entries []snapEntry
}

// snapHeaderKey and snapChunkKey are the state-topic keys of a delay
// partition's snapshot: "<delay topic>/<p>/snapshot" and
// "<delay topic>/<p>/snapshot/<i>". A marker key ends in digits, so the
// two never collide.
func snapHeaderKey(delayTopic string, p int32) []byte {
	return []byte(delayTopic + "/" + strconv.Itoa(int(p)) + "/snapshot")
}

func snapChunkKey(delayTopic string, p int32, i int) []byte {
	return []byte(delayTopic + "/" + strconv.Itoa(int(p)) + "/snapshot/" + strconv.Itoa(i))
}

// parseSnapKey says whether a state key (of partition p) is the snapshot
// header (chunk -1) or a chunk (its index).
func parseSnapKey(key []byte, delayTopic string, p int32) (chunk int, ok bool) {
	h := string(snapHeaderKey(delayTopic, p))
	k := string(key)
	if k == h {
		return -1, true
	}
	if len(k) <= len(h)+1 || k[:len(h)] != h || k[len(h)] != '/' {
		return 0, false
	}
	i, err := strconv.Atoi(k[len(h)+1:])
	if err != nil || i < 0 {
		return 0, false
	}
	return i, true
}

func encodeSnapHeader(id uint64, read int64, chunks int) []byte {
	b := []byte{snapVersion}
	b = binary.AppendUvarint(b, id)
	b = binary.AppendUvarint(b, uint64(read))
	return binary.AppendUvarint(b, uint64(chunks))
}

var errSnapCorrupt = errors.New("corrupt snapshot record")

// snapReader reads the varints of a snapshot value; the first error sticks.
type snapReader struct {
	b       []byte
	err     error
	version byte
}

// next decodes one varint with f (binary.Uvarint or binary.Varint).
func next[T uint64 | int64](r *snapReader, f func([]byte) (T, int)) T {
	if r.err != nil {
		return 0
	}
	v, n := f(r.b)
	if n <= 0 {
		r.err = errSnapCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *snapReader) uvarint() uint64 { return next(r, binary.Uvarint) }
func (r *snapReader) varint() int64   { return next(r, binary.Varint) }

func (r *snapReader) uint64() uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.err = errSnapCorrupt
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func newSnapReader(b []byte) *snapReader {
	if len(b) == 0 || b[0] != snapVersion && b[0] != snapVersionNoBack {
		return &snapReader{err: fmt.Errorf("snapshot record of unknown version (want %d or %d)", snapVersionNoBack, snapVersion)}
	}
	return &snapReader{b: b[1:], version: b[0]}
}

func decodeSnapHeader(b []byte) (id uint64, read int64, chunks int, err error) {
	r := newSnapReader(b)
	id, read, chunks = r.uvarint(), int64(r.uvarint()), int(r.uvarint())
	if r.err == nil && (read < 0 || chunks < 0 || len(r.b) != 0) {
		r.err = errSnapCorrupt
	}
	return id, read, chunks, r.err
}

// encodeSnapChunk encodes entries (ascending by offset): offsets as deltas.
func encodeSnapChunk(id uint64, es []snapEntry) []byte {
	b := []byte{snapVersion}
	b = binary.AppendUvarint(b, id)
	b = binary.AppendUvarint(b, uint64(len(es)))
	var prev int64
	for _, e := range es {
		b = binary.AppendUvarint(b, uint64(e.offset-prev))
		prev = e.offset
		b = binary.AppendVarint(b, e.due)
		b = binary.AppendVarint(b, e.ts)
		b = binary.BigEndian.AppendUint64(b, e.keyHash)
		b = binary.AppendUvarint(b, uint64(e.back))
	}
	return b
}

func decodeSnapChunk(b []byte) (id uint64, es []snapEntry, err error) {
	r := newSnapReader(b)
	id = r.uvarint()
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		return 0, nil, errSnapCorrupt
	}
	es = make([]snapEntry, 0, n)
	var prev int64
	for range n {
		e := snapEntry{offset: prev + int64(r.uvarint()), due: r.varint(), ts: r.varint(), keyHash: r.uint64()}
		if r.version != snapVersionNoBack {
			e.back = int64(r.uvarint())
		}
		if e.back < 0 || e.back > e.offset {
			r.err = errSnapCorrupt
		}
		prev = e.offset
		es = append(es, e)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = errSnapCorrupt
	}
	return id, es, r.err
}

// snapAssembler collects one state partition's snapshot records as they
// are read in log order: the latest header and the latest value of each
// chunk key (a tombstone deletes it).
type snapAssembler struct {
	header []byte
	chunks map[int][]byte
	// start is the state offset of the latest value of chunk 0.
	start int64
}

func (a *snapAssembler) add(chunk int, value []byte, offset int64) {
	if chunk < 0 {
		a.header = value
		return
	}
	if a.chunks == nil {
		a.chunks = make(map[int][]byte)
	}
	if value == nil {
		delete(a.chunks, chunk)
	} else {
		a.chunks[chunk] = value
	}
	if chunk == 0 {
		a.start = offset
	}
}

// epoch is the latest header's snapshot id, 0 without a readable one.
func (a *snapAssembler) epoch() uint64 {
	id, _, _, err := decodeSnapHeader(a.header)
	if err != nil {
		return 0
	}
	return id
}

// snapshot returns the assembled snapshot, nil when there is none; an
// error when the header names chunks that are missing or of another
// snapshot (cannot happen with transactions: a snapshot's records commit
// together) or a record does not decode.
func (a *snapAssembler) snapshot() (*snapshot, error) {
	if a.header == nil {
		return nil, nil
	}
	id, read, n, err := decodeSnapHeader(a.header)
	if err != nil {
		return nil, err
	}
	s := &snapshot{id: id, read: read, chunks: n, start: a.start}
	for i := range n {
		v, ok := a.chunks[i]
		if !ok {
			return nil, fmt.Errorf("snapshot %d: chunk %d of %d is missing", id, i, n)
		}
		cid, es, err := decodeSnapChunk(v)
		if err != nil {
			return nil, fmt.Errorf("snapshot %d chunk %d: %w", id, i, err)
		}
		if cid != id {
			return nil, fmt.Errorf("snapshot %d: chunk %d belongs to snapshot %d", id, i, cid)
		}
		s.entries = append(s.entries, es...)
	}
	if !slices.IsSortedFunc(s.entries, func(a, b snapEntry) int { return int(a.offset - b.offset) }) {
		return nil, fmt.Errorf("snapshot %d: entries out of order", id)
	}
	return s, nil
}

// snapshotChunks splits entries into chunk records of the partition p.
func snapshotChunks(delayTopic string, p int32, id uint64, es []snapEntry) [][2][]byte {
	var out [][2][]byte
	for i := 0; i == 0 || i*snapChunkEntries < len(es); i++ {
		part := es[i*snapChunkEntries : min(len(es), (i+1)*snapChunkEntries)]
		out = append(out, [2][]byte{snapChunkKey(delayTopic, p, i), encodeSnapChunk(id, part)})
	}
	return out
}

// snapWrite is a snapshot about to be written in a transaction.
type snapWrite struct {
	pp      *partProgress
	id      uint64
	read    int64
	chunks  int
	records []*kgo.Record
}

// buildSnapshots builds the snapshot records of the partitions in parts as
// they will be once the transaction that resolves resolved commits: every
// pending offset below the read position that the transaction does not
// resolve, with its due time, timestamp and key hash, whether its entry is
// in RAM or spilled to disk. A partition with a pending offset whose only
// entry is a control entry (a cancel or a dead letter, resolved within a
// transaction or two) is left for the next interval, and so is one whose
// spill files cannot be read (the session then ends: see failSpill). It
// scans the whole index and reads the partitions' spill files, O(pending),
// once per interval.
func (w *Worker) buildSnapshots(parts []*partProgress, resolved map[*partProgress][]int64) []*snapWrite {
	if len(parts) == 0 {
		return nil
	}
	known := make(map[*partProgress][]snapEntry, len(parts))
	for _, pp := range parts {
		known[pp] = nil
	}
	w.idx.collectLive(known)
	var out []*snapWrite
	id := uint64(time.Now().UnixNano())
parts:
	for _, pp := range parts {
		if len(pp.copies.open) > 0 {
			continue // a reschedule's scheduled half would pass for a plain message (deferral.go)
		}
		have, err := w.idx.withSpilled(known[pp], pp)
		if err != nil {
			w.idx.failSpill(err)
			continue
		}
		slices.SortFunc(have, func(a, b snapEntry) int { return cmp.Compare(a.offset, b.offset) })
		done := make(map[int64]struct{}, len(resolved[pp]))
		for _, o := range resolved[pp] {
			done[o] = struct{}{}
		}
		// es reuses have's array: it takes have[i] into es[j] with j <= i.
		es := have[:0]
		i, complete := 0, true
		pp.pending.each(func(o int64) bool {
			if pp.resolved.contains(o) {
				return true
			}
			if _, ok := done[o]; ok {
				return true
			}
			for i < len(have) && have[i].offset < o {
				i++
			}
			if i == len(have) || have[i].offset != o {
				complete = false
				return false
			}
			es = append(es, have[i])
			return true
		})
		if !complete {
			continue parts
		}
		sw := &snapWrite{pp: pp, id: id, read: pp.next}
		chunks := snapshotChunks(w.cfg.DelayTopic, pp.partition, id, es)
		sw.chunks = len(chunks)
		for _, c := range chunks {
			sw.records = append(sw.records, &kgo.Record{Topic: w.cfg.StateTopic, Partition: pp.partition, Key: c[0], Value: c[1]})
		}
		for i := sw.chunks; i < pp.snapChunks; i++ { // chunks of a larger earlier snapshot
			sw.records = append(sw.records, &kgo.Record{Topic: w.cfg.StateTopic, Partition: pp.partition, Key: snapChunkKey(w.cfg.DelayTopic, pp.partition, i)})
		}
		sw.records = append(sw.records, &kgo.Record{Topic: w.cfg.StateTopic, Partition: pp.partition,
			Key: snapHeaderKey(w.cfg.DelayTopic, pp.partition), Value: encodeSnapHeader(id, sw.read, sw.chunks)})
		if pp.copies.copies != nil {
			// A new owner reads the state partition from the snapshot
			// on (commitMeta): the partition's copy records must be
			// there too, even if no copy was made since.
			sw.records = append(sw.records, &kgo.Record{Topic: w.cfg.StateTopic, Partition: pp.partition,
				Key: copiesKey(w.cfg.DelayTopic, pp.partition), Value: encodeCopies(pp.copies.copies)})
		}
		out = append(out, sw)
	}
	return out
}
