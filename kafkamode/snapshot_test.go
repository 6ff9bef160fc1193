package kafkamode

import (
	"encoding/binary"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSnapshotRoundTrip: a snapshot of more than one chunk is split,
// encoded, assembled from its records read in log order (a stale chunk
// of a larger earlier snapshot and a tombstone among them) and decoded to
// the same entries.
func TestSnapshotRoundTrip(t *testing.T) {
	var es []snapEntry
	for i := 0; i < snapChunkEntries+10; i++ {
		es = append(es, snapEntry{offset: int64(7 + 3*i), due: 1_700_000_000_000 + int64(i%97), ts: 1_699_999_000_000 - int64(i), keyHash: uint64(i) * 0x9e3779b97f4a7c15,
			back: int64(i%3) * int64(i)}) // a copy every third entry or so, some far back
	}
	chunks := snapshotChunks("d", 2, 42, es)
	if len(chunks) != 2 {
		t.Fatalf("%d chunks, want 2", len(chunks))
	}
	a := &snapAssembler{}
	add := func(key, value []byte) {
		c, ok := parseSnapKey(key, "d", 2)
		if !ok {
			t.Fatalf("key %q is not a snapshot key", key)
		}
		a.add(c, value, 0)
	}
	add(snapChunkKey("d", 2, 2), encodeSnapChunk(41, es[:1])) // an older snapshot's third chunk
	add(snapHeaderKey("d", 2), encodeSnapHeader(41, 5, 3))
	for _, c := range chunks {
		add(c[0], c[1])
	}
	add(snapChunkKey("d", 2, 2), nil) // the new snapshot deletes it
	add(snapHeaderKey("d", 2), encodeSnapHeader(42, 99_000, len(chunks)))
	s, err := a.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if s.id != 42 || s.read != 99_000 || s.chunks != 2 || !reflect.DeepEqual(s.entries, es) {
		t.Fatalf("got id %d read %d chunks %d, %d entries; want 42, 99000, 2, %d equal entries", s.id, s.read, s.chunks, len(s.entries), len(es))
	}
	if _, ok := parseSnapKey(markerKey("d", 2, 5), "d", 2); ok {
		t.Fatal("a marker key parsed as a snapshot key")
	}
	if _, ok := parseMarkerKey(snapHeaderKey("d", 2), "d", 2); ok {
		t.Fatal("a snapshot key parsed as a marker key")
	}
	// A header naming a chunk of another snapshot is refused.
	b := &snapAssembler{}
	b.add(-1, encodeSnapHeader(43, 10, 1), 0)
	b.add(0, encodeSnapChunk(42, es[:3]), 1)
	if _, err := b.snapshot(); err == nil {
		t.Fatal("a snapshot with a chunk of another snapshot was accepted")
	}
	if _, _, _, err := decodeSnapHeader([]byte{9, 1, 2, 3}); err == nil {
		t.Fatal("a header of an unknown version was accepted")
	}
}

// TestApplySeed: at take-over, the snapshot's entries below the committed
// offset or with a marker are resolved; reading resumes at the snapshot's
// read position, or at the committed offset when that is further.
func TestApplySeed(t *testing.T) {
	snap := &snapshot{read: 100, chunks: 1, entries: []snapEntry{{offset: 3}, {offset: 10}, {offset: 20}, {offset: 50}}}
	pp := newPartProgress(0, []int64{20, 120})
	pp.seed = snap
	es, start := pp.applySeed(10)
	if start != 100 || len(es) != 2 || es[0].offset != 10 || es[1].offset != 50 {
		t.Fatalf("start %d entries %v; want 100 and offsets 10, 50", start, es)
	}
	if !reflect.DeepEqual(pp.pending.values(), []int64{10, 50}) || pp.next != 100 || pp.open.Load() != 2 || pp.snapRead != 100 {
		t.Fatalf("pending %v next %d open %d snapRead %d", pp.pending.values(), pp.next, pp.open.Load(), pp.snapRead)
	}
	if !pp.read(100) || pp.read(120) {
		t.Fatal("offset 100 must be read as new and 120 (marked) skipped")
	}
	pl := pp.plan([]int64{10, 50}, false)
	if pl.commit != 100 {
		t.Fatalf("commit %d after resolving the snapshot's offsets, want 100 (read, pending)", pl.commit)
	}
	pp2 := newPartProgress(0, nil)
	pp2.seed = &snapshot{read: 100, entries: []snapEntry{{offset: 40}}}
	if es, start := pp2.applySeed(150); start != 150 || len(es) != 0 {
		t.Fatalf("committed past the snapshot: start %d entries %v; want 150 and none", start, es)
	}
}

// TestCopyRecord: a copy forward keeps the key, value and the user's
// headers, makes the due time absolute, drops _delayMs and _cancel, names
// the original (the first one through further copies), and parses to the
// same schedule; its forward names the original and drops the copy header.
func TestCopyRecord(t *testing.T) {
	orig := rec("_delayMs", "60000", "_bizTopic", "orders", "_cancel", "key", "trace", "abc")
	orig.Key, orig.Value = []byte("k"), []byte("v")
	s0, err := parseSchedule(orig, "d")
	if err != nil {
		t.Fatal(err)
	}
	c1 := copyRecord(orig, "d", 3, "d/3/17", s0.due)
	c1.Timestamp = orig.Timestamp.Add(30 * time.Second) // produced later
	c2 := copyRecord(c1, "d", 3, "d/3/17", s0.due)      // the worker's state names the first
	c2.Timestamp = orig.Timestamp.Add(60 * time.Second)
	for _, c := range []*kgo.Record{c1, c2} {
		s, err := parseSchedule(c, "d")
		if err != nil || s != s0 {
			t.Fatalf("copy schedules %+v (%v), want %+v", s, err, s0)
		}
		if c.Topic != "d" || c.Partition != 3 || string(c.Key) != "k" || string(c.Value) != "v" {
			t.Fatalf("copy %+v", c)
		}
		if _, isCancel, _ := parseCancel(c); isCancel {
			t.Fatal("a copy carries _cancel")
		}
		if v, _ := headerValue(c, HeaderCopiedFrom); v != "d/3/17" {
			t.Fatalf("copied-from %q, want the original d/3/17", v)
		}
	}
	f := forwardRecord(c2, "orders", "d/3/17", s0.due)
	if v, _ := headerValue(f, HeaderSource); v != "d/3/17" {
		t.Fatalf("forward source %q, want the original d/3/17", v)
	}
	if _, ok := headerValue(f, HeaderCopiedFrom); ok {
		t.Fatal("the forward kept hourglass-copied-from")
	}
	if v, _ := headerValue(f, "trace"); v != "abc" {
		t.Fatal("the forward lost the user's header")
	}
}

func headerValue(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// TestSnapshotChunkVersions: a chunk of version 1 (written before entries
// carried back) still reads, with back 0; a chunk whose back would put a
// message's first offset before 0 is refused.
func TestSnapshotChunkVersions(t *testing.T) {
	v1 := []byte{snapVersionNoBack}
	v1 = binary.AppendUvarint(v1, 9)  // id
	v1 = binary.AppendUvarint(v1, 2)  // count
	v1 = binary.AppendUvarint(v1, 5)  // offset 5
	v1 = binary.AppendVarint(v1, 100) // due
	v1 = binary.AppendVarint(v1, 50)  // timestamp
	v1 = binary.BigEndian.AppendUint64(v1, 0xfeed)
	v1 = binary.AppendUvarint(v1, 3) // offset 8
	v1 = binary.AppendVarint(v1, 200)
	v1 = binary.AppendVarint(v1, 60)
	v1 = binary.BigEndian.AppendUint64(v1, 0xbeef)
	id, es, err := decodeSnapChunk(v1)
	want := []snapEntry{{offset: 5, due: 100, ts: 50, keyHash: 0xfeed}, {offset: 8, due: 200, ts: 60, keyHash: 0xbeef}}
	if err != nil || id != 9 || !reflect.DeepEqual(es, want) {
		t.Fatalf("version 1 chunk: id %d entries %+v err %v; want 9 and %+v", id, es, err, want)
	}
	if _, _, err := decodeSnapChunk(encodeSnapChunk(1, []snapEntry{{offset: 4, back: 5}})); err == nil {
		t.Fatal("an entry 5 back from offset 4 was accepted")
	}
	if _, es, err := decodeSnapChunk(encodeSnapChunk(1, []snapEntry{{offset: 4, back: 4}})); err != nil || es[0].back != 4 {
		t.Fatalf("an entry first sent at offset 0: %+v %v", es, err)
	}
}
