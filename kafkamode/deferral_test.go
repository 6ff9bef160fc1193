package kafkamode

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCancelWaitsForTheCopy: a message (offset 0) is rescheduled (1), and
// the reschedule's copy lands at 3, after a cancel by key (2) that was
// produced before the copy. The cancel waits until the copy is read back
// and then cancels it, because the copy carries on a message sent before
// the cancel; without waiting it would find nothing and the copy would be
// delivered.
func TestCancelWaitsForTheCopy(t *testing.T) {
	f := reschedFixture{now: 1_000_000, far: 1_000_000 + 3_600_000, lead: DefaultConfig().BodyLead.Milliseconds()}
	w := f.setup(t)
	w.indexRecord(f.rec(0, f.far, ""), f.now, f.lead)
	w.indexRecord(f.rec(1, f.far+60_000, "key"), f.now, f.lead)
	first := w.collectDue(f.now)
	sched := first[len(first)-1]
	if !sched.copy {
		t.Fatalf("the reschedule is not copied forward: %+v", sched)
	}
	copyRec := w.output(sched)
	copyRec.Offset = 3
	w.committed(first, nil, nil, f.now)
	w.noteCopies(map[*kgo.Record]*entry{copyRec: sched}, nil)
	if recs := w.copiesRecords(map[*kgo.Record]*entry{copyRec: sched}); len(recs) != 0 {
		t.Fatalf("%d copies records for a copy already noted, want none", len(recs))
	}

	cancel := f.rec(2, 0, "key")
	cancel.Headers = cancel.Headers[len(cancel.Headers)-1:] // _cancel only
	w.indexRecord(cancel, f.now, f.lead)
	if b := w.collectDue(f.now); len(b) != 0 || w.stats.CancelsDeferred.Load() != 1 {
		t.Fatalf("batch of %d, %d deferred: want the cancel to wait for the copy", len(b), w.stats.CancelsDeferred.Load())
	}
	copyRec.Partition, copyRec.Topic, copyRec.Timestamp = 0, w.cfg.DelayTopic, time.UnixMilli(f.now)
	w.indexRecord(copyRec, f.now, f.lead)
	b := w.collectDue(f.now)
	if len(b) != 2 || b[0].offset != 2 || b[1].offset != 3 || !b[1].cancelled {
		for _, e := range b {
			t.Logf("entry %d cancelled %v ctl %+v", e.offset, e.cancelled, e.ctl)
		}
		t.Fatalf("batch of %d, want the cancel (2) and the copy (3) cancelled", len(b))
	}
	if firstOffset(b[1]) != 1 {
		t.Errorf("the copy's first offset is %d, want the reschedule's, 1", firstOffset(b[1]))
	}
}

// TestCopiesRecordRoundTrip: the state record of a partition's highest
// copy offset is read back by a new owner (stateRead), and values that
// are not one are ignored.
func TestCopiesRecordRoundTrip(t *testing.T) {
	f := reschedFixture{}
	w := f.setup(t)
	pp := w.parts[0]
	e := &entry{pp: pp, offset: 5, copy: true}
	r := &kgo.Record{Topic: w.cfg.DelayTopic, Offset: 1 << 40}
	recs := w.copiesRecords(map[*kgo.Record]*entry{r: e})
	if len(recs) != 1 || recs[0].Topic != w.cfg.StateTopic || recs[0].Partition != 0 {
		t.Fatalf("copies records %+v, want one for state partition 0", recs)
	}
	st := &stateRead{live: map[int32]map[int64]struct{}{}, snaps: map[int32]*snapAssembler{}, copyHigh: map[int32]int64{}}
	st.add(w, recs[0])
	out := map[int32]*loadedPart{}
	st.result(w, []int32{0}, out)
	if out[0].copyHigh != 1<<40 || len(out[0].markers) != 0 {
		t.Fatalf("loaded %+v, want copyHigh %d and no marker", out[0], int64(1<<40))
	}
	for _, v := range [][]byte{nil, {copiesVersion}, {2, 1}, {copiesVersion, 0x80}, {copiesVersion, 1, 1}} {
		if x, ok := parseCopiesValue(v); ok {
			t.Errorf("value %x read as %d, want refused", v, x)
		}
	}
}
