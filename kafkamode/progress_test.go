package kafkamode

import (
	"math/rand"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestProgressPlan walks one partition through out-of-order resolution and
// checks the commit point and the resolution records written.
func TestProgressPlan(t *testing.T) {
	pp := newPartProgress(0, nil)
	for o := int64(10); o < 15; o++ {
		if !pp.read(o) {
			t.Fatalf("offset %d not pending", o)
		}
	}
	if pp.read(12) {
		t.Fatal("offset 12 read twice counts as new")
	}
	// Resolve 11 and 13 first: 10 is still pending, so C stays 10 and
	// both go into the transaction's resolution record.
	pl := pp.plan([]int64{13, 11}, false)
	if pl.commit != 10 || !slices.Equal(pl.record, []int64{11, 13}) {
		t.Fatalf("plan 1: %+v", pl)
	}
	pl.apply()
	if pp.slot != 1 || !pp.resolved.contains(11) || !pp.resolved.contains(13) || pp.resolved.contains(12) {
		t.Fatalf("after plan 1: slot %d resolved %v", pp.slot, pp.resolved.rs)
	}
	// An aborted plan changes nothing: planning again gives the same.
	pl = pp.plan([]int64{10}, false)
	if pl.commit != 12 || len(pl.record) != 0 {
		t.Fatalf("plan 2: %+v", pl)
	}
	pl = pp.plan([]int64{10}, false)
	if pl.commit != 12 || len(pl.record) != 0 {
		t.Fatalf("plan 2 again: %+v", pl)
	}
	pl.apply()
	if pp.slot != 1 || pp.resolved.contains(11) || !pp.resolved.contains(13) {
		t.Fatalf("after plan 2: slot %d resolved %v", pp.slot, pp.resolved.rs)
	}
	// Resolve 12 and 14: every read offset is done, C is next (15).
	pl = pp.plan([]int64{14, 12}, false)
	if pl.commit != 15 || len(pl.record) != 0 {
		t.Fatalf("plan 3: %+v", pl)
	}
	pl.apply()
	if pp.pending.len() != 0 || len(pp.resolved.rs) != 0 || pp.committed != 15 {
		t.Fatalf("after all: pending %v resolved %v committed %d", pp.pending.values(), pp.resolved.rs, pp.committed)
	}
}

// TestProgressTakeOver: a new owner starts from the committed offset with
// an older worker's markers; marked offsets are not read as pending
// again, and the first transaction carries the markers at or above its
// commit into its resolution record and tombstones them all.
func TestProgressTakeOver(t *testing.T) {
	pp := newPartProgress(3, []int64{23, 21})
	var pending []int64
	for o := int64(20); o < 25; o++ {
		if pp.read(o) {
			pending = append(pending, o)
		}
	}
	if !slices.Equal(pending, []int64{20, 22, 24}) {
		t.Fatalf("pending %v", pending)
	}
	pl := pp.plan([]int64{20}, false)
	if pl.commit != 22 || !pl.dropLegacy || !slices.Equal(pl.record, []int64{23}) {
		t.Fatalf("plan: %+v", pl)
	}
	pl.apply()
	if len(pp.legacy) != 0 || !pp.resolved.contains(23) {
		t.Fatalf("after: legacy %v resolved %v", pp.legacy, pp.resolved.rs)
	}
	// With a snapshot in the same transaction, no resolution record.
	if pl := pp.plan([]int64{24}, true); len(pl.record) != 0 || pl.commit != 22 {
		t.Fatalf("plan with a snapshot: %+v", pl)
	}
}

// TestProgressModel resolves random subsets in random order against a
// simple model: the commit point is always the lowest unresolved offset
// read, the resolved set is exactly the resolved offsets at or above it,
// and the resolution records since the start, read back as a new owner
// reads them, name every resolved offset at or above it.
func TestProgressModel(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 200; round++ {
		pp := newPartProgress(0, nil)
		resolved := map[int64]bool{}
		var next int64
		var open []int64
		var durable rangeSet // what the committed resolution records name
		for step := 0; step < 30; step++ {
			for k := rng.Intn(4); k > 0; k-- {
				next += 1 + int64(rng.Intn(2)) // gaps: control records
				pp.read(next)
				open = append(open, next)
			}
			rng.Shuffle(len(open), func(i, j int) { open[i], open[j] = open[j], open[i] })
			k := rng.Intn(len(open) + 1)
			batch := append([]int64(nil), open[:k]...)
			open = open[k:]
			pl := pp.plan(batch, false)
			if rng.Intn(5) == 0 { // aborted
				open = append(open, batch...)
				continue
			}
			if len(pl.record) > 0 {
				_, rs, err := decodeResolution(encodeResolution(0, pl.record))
				if err != nil {
					t.Fatal(err)
				}
				durable.merge(rs)
			}
			pl.apply()
			for _, o := range batch {
				resolved[o] = true
			}
			want := pp.next
			for _, o := range open {
				want = min(want, o)
			}
			if pp.committed != want {
				t.Fatalf("round %d step %d: committed %d, want %d", round, step, pp.committed, want)
			}
			for o := range resolved {
				if pp.resolved.contains(o) != (o >= want) {
					t.Fatalf("round %d: offset %d resolved-above %v with commit %d", round, o, pp.resolved.contains(o), want)
				}
				if o >= want && !durable.contains(o) {
					t.Fatalf("round %d: offset %d resolved above the commit %d but in no resolution record", round, o, want)
				}
			}
			for _, o := range open {
				if durable.contains(o) {
					t.Fatalf("round %d: pending offset %d named by a resolution record", round, o)
				}
			}
		}
	}
}

func rec(headers ...string) *kgo.Record {
	r := &kgo.Record{Timestamp: time.UnixMilli(1_000_000)}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
	}
	return r
}

func TestParseSchedule(t *testing.T) {
	s, err := parseSchedule(rec("_deliverAt", "1234567", "_bizTopic", "orders"), "d")
	if err != nil || s.due != 1234567 || s.bizTopic != "orders" {
		t.Fatalf("deliverAt: %+v %v", s, err)
	}
	s, err = parseSchedule(rec("_delayMs", "250", "_bizTopic", "orders"), "d")
	if err != nil || s.due != 1_000_250 {
		t.Fatalf("delayMs counts from the record timestamp: %+v %v", s, err)
	}
	for _, bad := range [][]string{
		{"_bizTopic", "x"},
		{"_deliverAt", "1"},
		{"_deliverAt", "x", "_bizTopic", "x"},
		{"_deliverAt", "1", "_delayMs", "1", "_bizTopic", "x"},
		{"_deliverAt", "1", "_deliverAt", "2", "_bizTopic", "x"},
		{"_delayMs", "-1", "_bizTopic", "x"},
		{"_delayMs", "99999999999999999", "_bizTopic", "x"},
		{"_deliverAt", "-3", "_bizTopic", "x"},
		{"_delayMs", "1", "_bizTopic", ""},
		{"_delayMs", "1", "_bizTopic", "a/b"},
		{"_delayMs", "1", "_bizTopic", "d"},
	} {
		if _, err := parseSchedule(rec(bad...), "d"); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestForwardRecordStripsOnlyControlHeaders(t *testing.T) {
	r := rec("_deliverAt", "5", "_bizTopic", "b", "_mine", "1", "x", "2")
	r.Key, r.Value = []byte("k"), []byte("v")
	out := forwardRecord(r, "b", "d/0/7", 5)
	var keys []string
	for _, h := range out.Headers {
		keys = append(keys, h.Key)
	}
	if !slices.Equal(keys, []string{"_mine", "x", HeaderDueMs, HeaderSource}) || out.Topic != "b" || string(out.Key) != "k" {
		t.Fatalf("forwarded %v to %s", keys, out.Topic)
	}
}

func TestMarkerKey(t *testing.T) {
	k := markerKey("hg.delay", 7, 123456789)
	if string(k) != "hg.delay/7/123456789" {
		t.Fatalf("key %q", k)
	}
	if o, ok := parseMarkerKey(k, "hg.delay", 7); !ok || o != 123456789 {
		t.Fatalf("parse: %d %v", o, ok)
	}
	for _, other := range []struct {
		topic string
		p     int32
	}{{"hg.delay", 8}, {"hg", 7}, {"hg.delay/7", 0}} {
		if _, ok := parseMarkerKey(k, other.topic, other.p); ok {
			t.Errorf("key %q parsed for %s/%d", k, other.topic, other.p)
		}
	}
}

// TestEntryCost measures the index's memory per pending record far from
// due (no body): the entry, its slots in the due and body heaps and in the
// partition's pending list. The package doc states ~90 bytes; this fails
// if it grows past 128.
func TestEntryCost(t *testing.T) {
	const n = 200_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	pp := newPartProgress(0, nil)
	var due, noBody dueHeap
	for i := 0; i < n; i++ {
		pp.read(int64(i))
		e := &entry{pp: pp, offset: int64(i), due: int64(n - i)}
		due.push(e)
		noBody.push(e)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.0f bytes per pending record", per)
	if per > 128 {
		t.Fatalf("%.0f bytes per pending record, want at most 128", per)
	}
	runtime.KeepAlive(pp)
	runtime.KeepAlive(due)
	runtime.KeepAlive(noBody)
}

func TestParseCancel(t *testing.T) {
	r := rec("_cancel", "key")
	r.Key, r.Offset = []byte("order-1"), 10
	if s, ok, err := parseCancel(r); !ok || err != nil || !s.byKey {
		t.Fatalf("key: %+v %v %v", s, ok, err)
	}
	r = rec("_cancel", "offset:7")
	r.Offset = 10
	if s, ok, err := parseCancel(r); !ok || err != nil || s.byKey || s.offset != 7 {
		t.Fatalf("offset: %+v %v %v", s, ok, err)
	}
	if _, ok, _ := parseCancel(rec("_deliverAt", "1")); ok {
		t.Fatal("a record without _cancel is a cancel")
	}
	for _, bad := range []struct {
		v   string
		key string
	}{{"key", ""}, {"offset:10", ""}, {"offset:x", ""}, {"offset:-1", ""}, {"all", "k"}} {
		r := rec("_cancel", bad.v)
		r.Key, r.Offset = []byte(bad.key), 10
		if _, ok, err := parseCancel(r); !ok || err == nil {
			t.Errorf("_cancel=%q (key %q) accepted", bad.v, bad.key)
		}
	}
}

// TestCancelTargets: a cancel by key takes the pending entries of its
// partition with the key, read before it, not those of other partitions,
// later offsets, or already in a transaction.
func TestCancelTargets(t *testing.T) {
	w := &Worker{}
	p0, p1 := newPartProgress(0, nil), newPartProgress(1, nil)
	k, other := keyHash([]byte("order-1")), keyHash([]byte("order-2"))
	mk := func(pp *partProgress, o int64, h uint64) *entry {
		e := &entry{pp: pp, offset: o, due: 100 + o, keyHash: h}
		w.idx.due.push(e)
		return e
	}
	hit := mk(p0, 1, k)
	mk(p0, 2, other)
	mk(p1, 3, k)
	busy := mk(p0, 4, k)
	busy.inBatch = true
	mk(p0, 9, k) // after the cancel
	c := &entry{pp: p0, offset: 5, keyHash: k, ctl: &control{cancel: &cancelSpec{byKey: true}}}
	got, _ := w.idx.cancelTargets(c)
	if len(got) != 1 || got[0] != hit || !hit.cancelled || !hit.inBatch {
		t.Fatalf("targets %v", got)
	}
	c = &entry{pp: p0, offset: 6, ctl: &control{cancel: &cancelSpec{offset: 2}}}
	if got, _ := w.idx.cancelTargets(c); len(got) != 1 || got[0].offset != 2 {
		t.Fatalf("by offset: %v", got)
	}
}

// indexOne indexes r as a poll does: with the part table locked, for the
// partition's progress.
func (w *Worker) indexOne(r *kgo.Record, now, lead int64) {
	w.parts.whileLocked(func(parts lockedParts) { w.idx.indexRecord(parts.get(r.Partition), r, now, lead) })
}
