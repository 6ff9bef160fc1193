package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sort"
	"time"
)

// checkpointFile is the name of the checkpoint in the data directory. It
// is replaced atomically (temp file, fsync, rename, fsync the directory).
//
// Layout (little endian), part of the on-disk format:
//
//	"HGCK" | version u8 (4) | body | crc32c u32 (Castagnoli, of everything before it)
//
//	body:
//	  dir tag      u32   fingerprint of the directory's IDENTITY
//	  log pos      u64   replay starts here
//	  frontier     i64   every timer registered before log pos and due at or before it is visible
//	  written      i64   broker time of the checkpoint, Unix ms (the clock's high-water mark)
//	  key state    u32 len + bytes   the key index's own description of its durable part
//	  topics       u32 n, then per topic:
//	                 id u32, flags u8, name u16 len + bytes, pending i64,
//	                 queues u16, then per queue: synced entries i64
//	  groups       u32 n, then per group:
//	                 id u32, topic id u32, name u16 len + bytes,
//	                 max attempts u32, backoff base ms i64, backoff max ms i64,
//	                 flags u8 (1 = paused; version 4 on),
//	                 queues u16, then per queue:
//	                   acked u64, done u32 n + n x u64, attempts u32 n + n x (offset u64, attempt u32)
//	  reloc        u32 n + n x (identity u64, current position u64)
//	  timer state  u32 len + bytes   the timer index's own description of its durable runs (timerstore)
//	  overlay      u32 n + n x (segment base u64, synced bytes i64)
//	  seg pending  u32 n + n x (segment base u64, pending i64)
//	  seg last     u32 n + n x (segment base u64, newest visible time i64)
//
// Maps are written sorted by key, so equal states encode to equal bytes.
// No gob and no exported API type: a change of a Go struct cannot change
// the format by accident. Version 1 (gob) belonged to data-directory
// format 1, which is refused at open. Versions 2 and 3 are read (3 is 4
// without the groups' flags: no group was paused before 4).
const checkpointFile = "CHECKPOINT"

const checkpointVersion = 4

// checkpointState is what recovery starts from. See the package doc for
// the invariants.
type checkpointState struct {
	Incarnation uint32
	LogPos      uint64 // replay starts here
	Frontier    int64  // every timer registered before LogPos and due at or before it is visible
	Written     int64  // Unix ms
	KeyState    []byte // keyindex's description of its synced part
	Topics      []checkpointTopic
	Groups      []checkpointGroup
	// Reloc maps moved messages (by identity) to their current copy.
	Reloc map[uint64]uint64
	// TimerState is timerstore's description of its durable runs.
	TimerState []byte
	// timersLegacy is set when a version 2 checkpoint recorded timer
	// bucket files of the layout before runs: recovery rebuilds the timer
	// index from the log. Never written.
	timersLegacy bool
	// OverlayFiles is the synced length of each overlay journal file, by
	// segment base (see overlay.go).
	OverlayFiles map[uint64]int64
	SegPending   map[uint64]int64
	SegLast      map[uint64]int64
}

type checkpointTopic struct {
	ID      uint32
	Name    string
	Flags   uint8
	Entries []int64 // synced entries per queue index
	Pending int64
}

type checkpointGroup struct {
	ID, Topic uint32
	Name      string
	Config    GroupConfig
	Paused    bool
	Queues    []checkpointGroupQueue
}

// groupPaused is the flag of a paused group in a version 4 checkpoint.
const groupPaused uint8 = 1

type checkpointGroupQueue struct {
	Acked    uint64
	Done     []uint64
	Attempts map[uint64]uint32
}

// ckptWriter appends little-endian fields.
type ckptWriter struct{ b []byte }

func (w *ckptWriter) u8(v uint8)   { w.b = append(w.b, v) }
func (w *ckptWriter) u16(v uint16) { w.b = binary.LittleEndian.AppendUint16(w.b, v) }
func (w *ckptWriter) u32(v uint32) { w.b = binary.LittleEndian.AppendUint32(w.b, v) }
func (w *ckptWriter) u64(v uint64) { w.b = binary.LittleEndian.AppendUint64(w.b, v) }
func (w *ckptWriter) i64(v int64)  { w.u64(uint64(v)) }
func (w *ckptWriter) str(s string) { w.u16(uint16(len(s))); w.b = append(w.b, s...) }
func (w *ckptWriter) blob(b []byte) {
	w.u32(uint32(len(b)))
	w.b = append(w.b, b...)
}

// pairs writes a map as n, then (key, value) pairs sorted by key.
func pairs[K ~uint64 | ~int64, V ~uint64 | ~int64](w *ckptWriter, m map[K]V) {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	w.u32(uint32(len(keys)))
	for _, k := range keys {
		w.u64(uint64(k))
		w.u64(uint64(m[k]))
	}
}

func encodeCheckpoint(st *checkpointState) ([]byte, error) {
	w := &ckptWriter{b: append(make([]byte, 0, 4096), "HGCK"...)}
	w.u8(checkpointVersion)
	w.u32(st.Incarnation)
	w.u64(st.LogPos)
	w.i64(st.Frontier)
	w.i64(st.Written)
	w.blob(st.KeyState)
	w.u32(uint32(len(st.Topics)))
	for _, t := range st.Topics {
		w.u32(t.ID)
		w.u8(t.Flags)
		w.str(t.Name)
		w.i64(t.Pending)
		w.u16(uint16(len(t.Entries)))
		for _, n := range t.Entries {
			w.i64(n)
		}
	}
	w.u32(uint32(len(st.Groups)))
	for _, g := range st.Groups {
		w.u32(g.ID)
		w.u32(g.Topic)
		w.str(g.Name)
		w.u32(uint32(g.Config.MaxAttempts))
		w.i64(g.Config.BackoffBase.Milliseconds())
		w.i64(g.Config.BackoffMax.Milliseconds())
		var flags uint8
		if g.Paused {
			flags |= groupPaused
		}
		w.u8(flags)
		w.u16(uint16(len(g.Queues)))
		for _, q := range g.Queues {
			w.u64(q.Acked)
			done := append([]uint64(nil), q.Done...)
			sort.Slice(done, func(i, j int) bool { return done[i] < done[j] })
			w.u32(uint32(len(done)))
			for _, off := range done {
				w.u64(off)
			}
			offs := make([]uint64, 0, len(q.Attempts))
			for off := range q.Attempts {
				offs = append(offs, off)
			}
			sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
			w.u32(uint32(len(offs)))
			for _, off := range offs {
				w.u64(off)
				w.u32(q.Attempts[off])
			}
		}
	}
	pairs(w, st.Reloc)
	w.blob(st.TimerState)
	pairs(w, st.OverlayFiles)
	pairs(w, st.SegPending)
	pairs(w, st.SegLast)
	return binary.LittleEndian.AppendUint32(w.b, crc32.Checksum(w.b, crcTable)), nil
}

// ckptReader reads fields and remembers whether it ran past the end, so
// that a damaged body is one error, never a panic.
type ckptReader struct {
	b   []byte
	bad bool
}

func (r *ckptReader) take(n int) []byte {
	if r.bad || n < 0 || n > len(r.b) {
		r.bad = true
		return make([]byte, max(n, 8))
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
func (r *ckptReader) u8() uint8    { return r.take(1)[0] }
func (r *ckptReader) u16() uint16  { return binary.LittleEndian.Uint16(r.take(2)) }
func (r *ckptReader) u32() uint32  { return binary.LittleEndian.Uint32(r.take(4)) }
func (r *ckptReader) u64() uint64  { return binary.LittleEndian.Uint64(r.take(8)) }
func (r *ckptReader) i64() int64   { return int64(r.u64()) }
func (r *ckptReader) str() string  { return string(r.take(int(r.u16()))) }
func (r *ckptReader) blob() []byte { return append([]byte(nil), r.take(int(r.u32()))...) }

// count reads a count of items of at least size bytes each, refusing one
// the remaining bytes cannot hold (a damaged count must not allocate GBs).
func (r *ckptReader) count(size int) int {
	n := int(r.u32())
	if r.bad || n > len(r.b)/size {
		r.bad = true
		return 0
	}
	return n
}

func readPairs[K ~uint64 | ~int64, V ~uint64 | ~int64](r *ckptReader) map[K]V {
	n := r.count(16)
	m := make(map[K]V, n)
	for i := 0; i < n; i++ {
		k := K(r.u64())
		m[k] = V(r.u64())
	}
	return m
}

func decodeCheckpoint(b []byte) (*checkpointState, error) {
	if len(b) < 9 || string(b[:4]) != "HGCK" {
		return nil, errors.New("not a checkpoint file")
	}
	version := b[4]
	if version < 2 || version > checkpointVersion {
		return nil, fmt.Errorf("checkpoint version %d; this hourglass reads versions 2 to %d", version, checkpointVersion)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, crcTable) != sum {
		return nil, errors.New("checkpoint checksum mismatch")
	}
	r := &ckptReader{b: body[5:]}
	st := &checkpointState{Incarnation: r.u32(), LogPos: r.u64(), Frontier: r.i64(), Written: r.i64(), KeyState: r.blob()}
	for i, n := 0, r.count(15); i < n; i++ {
		t := checkpointTopic{ID: r.u32(), Flags: r.u8(), Name: r.str(), Pending: r.i64()}
		for j, nq := 0, int(r.u16()); j < nq && !r.bad; j++ {
			t.Entries = append(t.Entries, r.i64())
		}
		st.Topics = append(st.Topics, t)
	}
	for i, n := 0, r.count(30); i < n; i++ {
		g := checkpointGroup{ID: r.u32(), Topic: r.u32(), Name: r.str()}
		g.Config.MaxAttempts = int(r.u32())
		g.Config.BackoffBase = msDuration(r.i64())
		g.Config.BackoffMax = msDuration(r.i64())
		if version >= 4 {
			flags := r.u8()
			if flags&^groupPaused != 0 {
				r.bad = true // a flag a newer broker wrote
			}
			g.Paused = flags&groupPaused != 0
		}
		for j, nq := 0, int(r.u16()); j < nq && !r.bad; j++ {
			q := checkpointGroupQueue{Acked: r.u64(), Attempts: map[uint64]uint32{}}
			for k, nd := 0, r.count(8); k < nd; k++ {
				q.Done = append(q.Done, r.u64())
			}
			for k, na := 0, r.count(12); k < na; k++ {
				off := r.u64()
				q.Attempts[off] = r.u32()
			}
			g.Queues = append(g.Queues, q)
		}
		st.Groups = append(st.Groups, g)
	}
	st.Reloc = readPairs[uint64, uint64](r)
	if version == 2 {
		st.timersLegacy = len(readPairs[int64, int64](r)) > 0
	} else {
		st.TimerState = r.blob()
	}
	st.OverlayFiles = readPairs[uint64, int64](r)
	st.SegPending = readPairs[uint64, int64](r)
	st.SegLast = readPairs[uint64, int64](r)
	if r.bad || len(r.b) != 0 {
		return nil, errors.New("checkpoint body is malformed")
	}
	return st, nil
}

// msDuration converts milliseconds, clamped to what a Duration holds.
func msDuration(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) || ms < 0 {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}
