package kafkamode

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRangeSet checks the resolved set against a map of offsets under
// random adds and drops, and that consecutive offsets cost one range.
func TestRangeSet(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	var s rangeSet
	model := map[int64]bool{}
	var low int64
	for step := 0; step < 2000; step++ {
		var add []int64
		for k := rng.Intn(6); k > 0; k-- {
			add = append(add, low+rng.Int63n(200))
		}
		slices.Sort(add)
		s.addAll(add)
		for _, o := range add {
			model[o] = true
		}
		if rng.Intn(10) == 0 {
			low += rng.Int63n(40)
			s.dropBelow(low)
			for o := range model {
				if o < low {
					delete(model, o)
				}
			}
		}
		for o := low - 5; o < low+205; o++ {
			if s.contains(o) != model[o] {
				t.Fatalf("step %d: contains(%d) = %v, model %v (ranges %v)", step, o, s.contains(o), model[o], s.rs)
			}
		}
		if s.count() != int64(len(model)) {
			t.Fatalf("step %d: count %d, model %d", step, s.count(), len(model))
		}
		for i := 1; i < len(s.rs); i++ {
			if s.rs[i-1].end >= s.rs[i].start {
				t.Fatalf("ranges %v overlap or touch", s.rs)
			}
		}
	}
	var behind rangeSet
	for o := int64(1); o <= 1_000_000; o += 10_000 {
		os := make([]int64, 0, 10_000)
		for x := o; x < o+10_000; x++ {
			os = append(os, x)
		}
		behind.addAll(os)
	}
	if len(behind.rs) != 1 || behind.count() != 1_000_000 {
		t.Fatalf("a million consecutive offsets: %d ranges, %d offsets; want 1 and 1,000,000", len(behind.rs), behind.count())
	}
}

// TestResolutionRecord round-trips a resolution record and refuses
// damaged ones.
func TestResolutionRecord(t *testing.T) {
	os := []int64{5, 6, 7, 9, 100, 101, 1 << 40}
	v := encodeResolution(42, os)
	epoch, rs, err := decodeResolution(v)
	if err != nil || epoch != 42 {
		t.Fatalf("epoch %d err %v", epoch, err)
	}
	want := []offRange{{5, 8}, {9, 10}, {100, 102}, {1 << 40, 1<<40 + 1}}
	if !slices.Equal(rs, want) {
		t.Fatalf("ranges %v, want %v", rs, want)
	}
	for i := 0; i < len(v); i++ {
		if _, _, err := decodeResolution(v[:i]); err == nil {
			t.Fatalf("a record cut to %d of %d bytes decoded", i, len(v))
		}
	}
	if _, _, err := decodeResolution(append(slices.Clone(v), 0)); err == nil {
		t.Fatal("a record with a trailing byte decoded")
	}
	bad := slices.Clone(v)
	bad[0] = 9
	if _, _, err := decodeResolution(bad); err == nil {
		t.Fatal("a record of an unknown version decoded")
	}
	if slot, ok := parseResolutionKey(resolutionKey("d", 3, 17), "d", 3); !ok || slot != 17 {
		t.Fatalf("slot %d ok %v", slot, ok)
	}
	if _, ok := parseMarkerKey(resolutionKey("d", 3, 17), "d", 3); ok {
		t.Fatal("a resolution key parsed as a marker key")
	}
	if _, ok := parseResolutionKey(markerKey("d", 3, 17), "d", 3); ok {
		t.Fatal("a marker key parsed as a resolution key")
	}
}

// TestCommitMeta: the state offset a commit names round-trips, and
// metadata of another kind (an older worker's member ID) reads as none.
func TestCommitMeta(t *testing.T) {
	for _, at := range []int64{-1, 0, 123456789} {
		if got, ok := parseCommitMeta(commitMeta(at, "m-1 2")); !ok || got != at {
			t.Fatalf("%d: got %d %v", at, got, ok)
		}
	}
	for _, m := range []string{"", "member-1", "hourglass/1 state=x", "hourglass/1 state=-2"} {
		if _, ok := parseCommitMeta(m); ok {
			t.Fatalf("%q parsed", m)
		}
	}
}

// TestStateReadEpochs: a take-over uses the resolution records of the
// latest snapshot's epoch only (older ones are covered by the snapshot),
// carries the legacy markers, and continues the epoch's slots.
func TestStateReadEpochs(t *testing.T) {
	cfg := Config{DelayTopic: "d"}
	st := newStateRead(cfg, nil)
	at := int64(0)
	add := func(key, value []byte) {
		st.add(&kgo.Record{Partition: 0, Key: key, Value: value, Offset: at})
		at++
	}
	add(markerKey("d", 0, 3), markerValue)
	add(resolutionKey("d", 0, 0), encodeResolution(0, []int64{10, 11}))
	add(snapChunkKey("d", 0, 0), encodeSnapChunk(7, []snapEntry{{offset: 2}, {offset: 20}}))
	add(snapHeaderKey("d", 0), encodeSnapHeader(7, 30, 1))
	add(resolutionKey("d", 0, 0), encodeResolution(7, []int64{20}))
	add(resolutionKey("d", 0, 1), encodeResolution(7, []int64{31, 32}))
	lp := st.result(0)
	if lp.snap == nil || lp.snap.start != 2 || lp.epoch != 7 || lp.slot != 2 {
		t.Fatalf("snapshot %+v epoch %d slot %d; want one starting at 2, epoch 7, slot 2", lp.snap, lp.epoch, lp.slot)
	}
	if !slices.Equal(lp.resolved.rs, []offRange{{20, 21}, {31, 33}}) || !slices.Equal(lp.markers, []int64{3}) {
		t.Fatalf("resolved %v markers %v", lp.resolved.rs, lp.markers)
	}
	cs := &committedState{lp: lp}
	for o, want := range map[int64]bool{2: false, 3: true, 10: true, 20: true, 25: true, 30: false, 31: true, 33: false} {
		if cs.resolvedAbove(o) != want {
			t.Errorf("resolvedAbove(%d) = %v, want %v", o, !want, want)
		}
	}
}
