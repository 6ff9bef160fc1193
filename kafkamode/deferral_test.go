package kafkamode

import (
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/vfs"
)

// copyScene is a message (offset 0, key k) rescheduled by key (1) and the
// reschedule's copy forward committed at offset 3, with a cancel at 2
// written before the copy landed: the race deferral.go closes.
type copyScene struct {
	t        *testing.T
	w        *Worker
	now      int64
	copyRec  *kgo.Record
	copyRecs []*kgo.Record // the copies state records of the transaction
}

// newCopyScene builds the scene up to the committed copy; the reschedule
// is due rescheduleIn from now; with spill, entries beyond the near window
// go to a spill on an in-memory filesystem.
func newCopyScene(t *testing.T, rescheduleIn time.Duration, spill bool) *copyScene {
	cfg := DefaultConfig()
	cfg.Brokers = []string{"127.0.0.1:1"}
	if spill {
		cfg.SpillDir, cfg.SpillFS = "spill", vfs.NewMem()
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if spill {
		cleanup, err := w.openSpill()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cleanup)
	}
	s := &copyScene{t: t, w: w, now: 1_800_000_000_000}
	w.parts.parts[0] = newPartProgress(0, nil)
	s.index(s.rec(0, s.now+time.Hour.Milliseconds(), "", nil))
	s.index(s.rec(1, s.now+rescheduleIn.Milliseconds(), "key", nil))
	first := w.idx.collectDue(s.now)
	sched := first[len(first)-1]
	if !sched.copy {
		t.Fatalf("the reschedule is not copied forward: %+v", sched)
	}
	s.copyRec = w.output(sched)
	s.copyRec.Offset, s.copyRec.Timestamp = 3, time.UnixMilli(s.now)
	outputs := map[*kgo.Record]*entry{s.copyRec: sched}
	s.copyRecs = w.copiesRecords(outputs)
	w.committed(first, nil, nil, s.now)
	w.noteCopies(outputs, nil)
	return s
}

// rec is a record of partition 0 with key k: a schedule due at due (if
// due > 0), with _cancel set to cancel (if not empty), and extra headers.
func (s *copyScene) rec(off, due int64, cancel string, extra []kgo.RecordHeader) *kgo.Record {
	r := &kgo.Record{Topic: s.w.cfg.DelayTopic, Offset: off, Key: []byte("k"), Value: []byte("v" + strconv.FormatInt(off, 10)),
		Timestamp: time.UnixMilli(s.now), Headers: extra}
	if due > 0 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderDeliverAt, Value: []byte(strconv.FormatInt(due, 10))},
			kgo.RecordHeader{Key: HeaderBizTopic, Value: []byte("biz")})
	}
	if cancel != "" {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderCancel, Value: []byte(cancel)})
	}
	return r
}

func (s *copyScene) index(r *kgo.Record) {
	s.w.indexOne(r, s.now, s.w.cfg.BodyLead.Milliseconds())
	s.w.idx.flushSpill()
}

// takeOver replaces the worker by a new owner that loaded the partition's
// state (the copies record) and resumes reading after the reschedule (the
// message and the reschedule are resolved).
func (s *copyScene) takeOver() {
	if len(s.copyRecs) != 1 {
		s.t.Fatalf("%d copies records, want 1", len(s.copyRecs))
	}
	st := newStateRead(s.w.cfg, nil)
	st.add(s.copyRecs[0])
	out := map[int32]*loadedPart{0: st.result(0)}
	w, err := New(s.w.cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	pp := newPartProgress(0, nil)
	pp.copies.copies = out[0].copies
	pp.next = 2
	w.parts.parts[0] = pp
	s.w = w
}

// check requires the batches to hold the cancel (2) and the copy (3),
// cancelled, and nothing else.
func (s *copyScene) check(batches ...[]*entry) {
	s.t.Helper()
	got := describe(batches...)
	if got[2] != "cancel " || got[3] != "cancelled " || len(got) != 2 {
		s.t.Fatalf("batches: %v; want the cancel (2) and the copy (3) cancelled, nothing else", got)
	}
}

// TestCancelReachesTheCopy: the cancel at 2 reaches the copy at 3 of a
// message first sent at 1, whether the cancel is read before the copy or
// in the same poll, by key or by the reschedule's offset, with the copy
// due soon, in RAM, or spilled, and after a change of owner.
func TestCancelReachesTheCopy(t *testing.T) {
	cases := []struct {
		name     string
		in       time.Duration
		spill    bool
		samePoll bool
		takeOver bool
		cancel   string
	}{
		{"separate polls, by key", time.Hour, false, false, false, "key"},
		{"same poll, by key", time.Hour, false, true, false, "key"},
		{"same poll, copy due soon", time.Second, false, true, false, "key"},
		{"separate polls, by the reschedule's offset", time.Hour, false, false, false, "offset:1"},
		{"same poll, copy spilled", time.Hour, true, true, false, "key"},
		{"separate polls, copy spilled", time.Hour, true, false, false, "offset:1"},
		{"new owner, same poll", time.Hour, false, true, true, "key"},
		{"new owner, separate polls", time.Hour, false, false, true, "key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newCopyScene(t, c.in, c.spill)
			if c.takeOver {
				s.takeOver()
			}
			cancel := s.rec(2, 0, c.cancel, nil)
			if c.samePoll {
				s.index(cancel)
				s.index(s.copyRec)
				s.check(s.w.idx.collectDue(s.now))
				return
			}
			s.index(cancel)
			if b := s.w.idx.collectDue(s.now); len(b) != 0 || s.w.stats.CancelsDeferred.Load() != 1 {
				t.Fatalf("batch of %d, %d deferred: want the cancel to wait for the copy", len(b), s.w.stats.CancelsDeferred.Load())
			}
			if snaps := s.w.buildSnapshots([]*partProgress{s.w.parts.parts[0]}, nil); len(snaps) != 0 {
				t.Fatalf("a snapshot of a partition with a waiting cancel")
			}
			s.index(s.copyRec)
			s.check(s.w.idx.collectDue(s.now))
		})
	}
}

// TestCopiedFromHeaderIsNotTrusted: a record that merely carries a
// hourglass-copied-from header naming an offset before a waiting cancel is
// not taken for a copy: the cancel, written before the record, leaves it.
func TestCopiedFromHeaderIsNotTrusted(t *testing.T) {
	s := newCopyScene(t, time.Hour, false)
	s.index(s.rec(2, 0, "key", nil))
	if b := s.w.idx.collectDue(s.now); len(b) != 0 {
		t.Fatalf("batch of %d, want the cancel to wait", len(b))
	}
	s.index(s.copyRec)
	forged := s.rec(4, s.now+time.Hour.Milliseconds(), "", []kgo.RecordHeader{{Key: HeaderCopiedFrom, Value: []byte(s.w.cfg.DelayTopic + "/0/0")}})
	s.index(forged)
	s.check(s.w.idx.collectDue(s.now))
}

// TestCopiesRecordRoundTrip: a copies record's value decodes to what was
// encoded, and values that are not one are refused.
func TestCopiesRecordRoundTrip(t *testing.T) {
	want := map[int64]copyRef{5: {first: 1, keyHash: 0xabc}, 1 << 40: {first: 7, keyHash: 1 << 63}}
	got, ok := parseCopies(encodeCopies(want))
	if !ok || len(got) != 2 || got[5] != want[5] || got[1<<40] != want[1<<40] {
		t.Fatalf("decoded %+v %v, want %+v", got, ok, want)
	}
	hash := []byte{0, 0, 0, 0, 0, 0, 0, 1}
	bad := [][]byte{nil, {copiesVersion}, {2, 0}, {copiesVersion, 0x80},
		append([]byte{copiesVersion, 1, 5, 1}, hash[:7]...),        // short hash
		append([]byte{copiesVersion, 1, 5, 1}, append(hash, 0)...), // trailing byte
		append([]byte{copiesVersion, 1, 5, 5}, hash...),            // first not before the copy
		append([]byte{copiesVersion, 200, 5, 1}, hash...),          // count beyond the bytes
	}
	for _, v := range bad {
		if m, ok := parseCopies(v); ok {
			t.Errorf("value %x read as %+v, want refused", v, m)
		}
	}
	many := map[int64]copyRef{}
	for x := int64(1); x <= maxCopyRefs+10; x++ {
		many[x] = copyRef{first: 0, keyHash: uint64(x)}
	}
	v := encodeCopies(many)
	got, ok = parseCopies(v)
	if _, low := got[10]; !ok || len(got) != maxCopyRefs || low || len(v) > 512<<10 {
		t.Fatalf("%d refs in %d bytes (ok %v), want the highest %d in under 512 KiB", len(got), len(v), ok, maxCopyRefs)
	}
}

// TestCopyRecordsArePruned: a copy's record is kept while a cancel below
// the copy is open or the copy is not read yet, and dropped after.
func TestCopyRecordsArePruned(t *testing.T) {
	cs := copyState{copies: map[int64]copyRef{5: {first: 1}, 9: {first: 2}}}
	cs.opened(4)
	cs.pruneCopies(10)
	if len(cs.copies) != 2 {
		t.Fatalf("copies %v after a prune with a cancel open at 4, want both kept", cs.copies)
	}
	cs.closed(4)
	cs.opened(7)
	cs.pruneCopies(10)
	if _, ok := cs.copies[5]; ok || len(cs.copies) != 1 {
		t.Fatalf("copies %v with a cancel open at 7, want only 9 kept", cs.copies)
	}
	cs.closed(7)
	cs.pruneCopies(9)
	if len(cs.copies) != 1 {
		t.Fatalf("copies %v with the copy at 9 not read yet, want it kept", cs.copies)
	}
	cs.pruneCopies(10)
	if len(cs.copies) != 0 {
		t.Fatalf("copies %v, want none", cs.copies)
	}
}

// TestWaitingCancelHoldsItsTargets: a cancel waits only for a copy it
// would match, and meanwhile the entries it would match are not
// forwarded: a message with the cancel's key, due while the cancel
// waits, is cancelled with the copy once the copy is read. A cancel of
// another key does not wait.
func TestWaitingCancelHoldsItsTargets(t *testing.T) {
	s := newCopyScene(t, time.Hour, false) // message 0 and reschedule 1 of key k; copy at 3
	other := s.rec(2, 0, "key", nil)
	other.Key = []byte("other")
	s.index(other)
	if b := describe(s.w.idx.collectDue(s.now)); b[2] != "cancel " {
		t.Fatalf("a cancel of another key: %v, want it run at once", b)
	}
	// The copy lands at 6 instead, leaving room for two more records.
	s.copyRec.Offset = 6
	s.w.parts.parts[0].copies.copies = map[int64]copyRef{6: {first: 1, keyHash: keyHash([]byte("k"))}}
	soon := s.rec(4, s.now+500, "", nil) // a second message of key k, due in 500 ms
	s.index(soon)
	s.index(s.rec(5, 0, "key", nil))
	if b := s.w.idx.collectDue(s.now + 1000); len(b) != 0 {
		t.Fatalf("while the cancel waits: %v, want nothing (its target held)", describe(b))
	}
	s.index(s.copyRec)
	got := describe(s.w.idx.collectDue(s.now + 1000))
	if got[5] != "cancel " || got[4] != "cancelled " || got[6] != "cancelled " {
		t.Fatalf("after the copy was read: %v; want the cancel (5) to cancel 4 and the copy (6)", got)
	}
}

// TestDeadLetteredRescheduleIsNotCopied: a reschedule that replaces
// nothing is dead-lettered even when its record was old enough to be
// queued for copy-forward (it was copied, and so delivered, before).
func TestDeadLetteredRescheduleIsNotCopied(t *testing.T) {
	f := reschedFixture{now: 1_800_000_000_000, far: 1_800_000_000_000 + 3_600_000, lead: DefaultConfig().BodyLead.Milliseconds()}
	w := f.setup(t)
	w.indexOne(f.rec(1, f.far, "offset:0"), f.now, f.lead)
	for _, e := range w.idx.due {
		if e.ctl == nil {
			e.copy = true // what requestBodies does for a record past half the retention
		}
	}
	b := w.idx.collectDue(f.now)
	sched := b[len(b)-1]
	if out := w.output(sched); sched.dlqReason() == "" || out == nil || out.Topic != w.cfg.DLQTopic {
		t.Fatalf("the reschedule's output %+v (reason %q), want a dead letter", out, sched.dlqReason())
	}
}

// TestNoSnapshotWhileARescheduleWaits: a reschedule (2) read before the
// copy (3) of an earlier one waits; meanwhile its scheduled half is in the
// index like a plain message, and a snapshot would record it as one: a
// new owner would then deliver it beside the copy. The partition takes no
// snapshot until the reschedule has run.
func TestNoSnapshotWhileARescheduleWaits(t *testing.T) {
	s := newCopyScene(t, time.Hour, false)
	s.takeOver()
	s.index(s.rec(2, s.now+2*time.Hour.Milliseconds(), "key", nil))
	if b := s.w.idx.collectDue(s.now); len(b) != 0 {
		t.Fatalf("batch of %d, want the reschedule to wait for the copy", len(b))
	}
	if snaps := s.w.buildSnapshots([]*partProgress{s.w.parts.parts[0]}, nil); len(snaps) != 0 {
		t.Fatalf("a snapshot while a reschedule waits")
	}
	s.index(s.copyRec)
	got := describe(s.w.idx.collectDue(s.now))
	if got[2] != "cancel copied " || got[3] != "cancelled " {
		t.Fatalf("after the copy was read: %v; want the reschedule (2) to replace the copy (3)", got)
	}
}

// describe says what each offset's entries in the batches do.
func describe(batches ...[]*entry) map[int64]string {
	got := map[int64]string{}
	for _, b := range batches {
		for _, e := range b {
			switch {
			case e.ctl != nil && e.ctl.cancel != nil:
				got[e.offset] += "cancel "
			case e.cancelled:
				got[e.offset] += "cancelled "
			case e.copy:
				got[e.offset] += "copied "
			default:
				got[e.offset] += "other "
			}
		}
	}
	return got
}

// TestCancelByFirstOffsetAfterPrune: a cancel that names the offset a
// message was first sent at reaches its copy forward after the copy was
// read back and its copy record pruned (so only the entry itself still
// knows where the message began): in RAM, spilled, and at a new owner
// that took the partition over from a snapshot, with no copy record left.
func TestCancelByFirstOffsetAfterPrune(t *testing.T) {
	cases := []struct {
		name     string
		spill    bool
		takeOver bool
	}{
		{"in RAM", false, false},
		{"spilled", true, false},
		{"new owner from a snapshot", false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newCopyScene(t, time.Hour, c.spill) // the reschedule (1) copied forward to 3
			s.index(s.copyRec)
			if b := s.w.idx.collectDue(s.now); len(b) != 0 {
				t.Fatalf("the copy, due in an hour, came due: %v", describe(b))
			}
			pp := s.w.parts.parts[0]
			pp.copies.pruneCopies(4)
			if len(pp.copies.copies) != 0 {
				t.Fatalf("copy records %v after the copy was read and no cancel is open, want none", pp.copies.copies)
			}
			if c.takeOver {
				s.takeOverFromSnapshot()
			}
			s.index(s.rec(4, 0, "offset:1", nil))
			got := describe(s.w.idx.collectDue(s.now))
			if got[4] != "cancel " || got[3] != "cancelled " || len(got) != 2 {
				t.Fatalf("batch %v; want the cancel (4) of the message first sent at 1 to cancel its copy (3)", got)
			}
		})
	}
}

// takeOverFromSnapshot replaces the worker by a new owner that loaded the
// old one's snapshot of partition 0 (the committed offset 3: the copy is
// all that is pending) and no copy record.
func (s *copyScene) takeOverFromSnapshot() {
	s.t.Helper()
	// The scene's transaction resolved 0 and 1 without offset plans:
	// name them as resolved by the snapshot's transaction.
	snaps := s.w.buildSnapshots([]*partProgress{s.w.parts.parts[0]}, map[*partProgress][]int64{s.w.parts.parts[0]: {0, 1}})
	if len(snaps) != 1 {
		s.t.Fatalf("%d snapshots, want 1", len(snaps))
	}
	a := &snapAssembler{}
	for _, r := range snaps[0].records {
		if string(r.Key) == string(copiesKey(s.w.cfg.DelayTopic, 0)) {
			continue // the partition's copy records, rewritten with its snapshot
		}
		chunk, ok := parseSnapKey(r.Key, s.w.cfg.DelayTopic, 0)
		if !ok {
			s.t.Fatalf("key %q is not a snapshot key", r.Key)
		}
		a.add(chunk, r.Value, r.Offset)
	}
	snap, err := a.snapshot()
	if err != nil || snap == nil || len(snap.entries) != 1 || snap.entries[0].offset != 3 {
		s.t.Fatalf("snapshot %+v (%v), want the copy at 3 alone", snap, err)
	}
	w, err := New(s.w.cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	if s.w.idx.spill != nil {
		s.t.Fatal("takeOverFromSnapshot does not carry a spill over")
	}
	pp := newPartProgress(0, nil)
	pp.seed = snap
	entries, _ := pp.applySeed(3)
	w.parts.parts[0] = pp
	w.idx.indexSeeded([]seededPart{{pp: pp, entries: entries}}, s.now)
	s.w = w
}

// TestCopyRecordsKeptUntilASnapshotPassesThem: a copy read back is
// pruned from the copy records only once a snapshot taken after it has
// committed. Before that a new owner starts below it, from the last
// snapshot, and reads the copy again: only the copy record (in the state
// topic, written from this map by the next copying transaction) tells it
// where the copy's message was first sent, so that a cancel naming that
// offset still reaches it.
func TestCopyRecordsKeptUntilASnapshotPassesThem(t *testing.T) {
	s := newCopyScene(t, time.Hour, false) // the reschedule (1) copied forward to 3
	s.index(s.copyRec)
	pp := s.w.parts.parts[0]
	s.w.noteCopies(nil, []*partPlan{{pp: pp}}) // a later transaction; no snapshot yet
	if _, ok := pp.copies.copies[3]; !ok {
		t.Fatalf("copy records %v: the copy at 3 was pruned with no snapshot past it", pp.copies.copies)
	}
	// A new owner with the copy records as this worker would write them,
	// starting from an older snapshot (below 3): it reads the copy again.
	loaded, ok := parseCopies(encodeCopies(pp.copies.copies))
	if !ok {
		t.Fatal("the copy records do not round trip")
	}
	w, err := New(s.w.cfg)
	if err != nil {
		t.Fatal(err)
	}
	owner := newPartProgress(0, nil)
	owner.copies.copies, owner.next = loaded, 3
	w.parts.parts[0] = owner
	old := s.w
	s.w = w
	s.index(s.copyRec)
	s.index(s.rec(4, 0, "offset:1", nil))
	if got := describe(s.w.idx.collectDue(s.now)); got[4] != "cancel " || got[3] != "cancelled " || len(got) != 2 {
		t.Fatalf("at the new owner: %v; want the cancel (4) naming offset 1 to cancel the copy (3)", got)
	}
	// Once a snapshot read past 3 has committed, the record goes.
	pp.snapRead = 4
	old.noteCopies(nil, []*partPlan{{pp: pp}})
	if len(pp.copies.copies) != 0 {
		t.Fatalf("copy records %v after a snapshot past them, want none", pp.copies.copies)
	}
}
