package kafkamode

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRescheduleReplacesOrDeadLetters: the scheduled half of a reschedule
// is forwarded only if its cancel half replaced a pending message. When
// the message was forwarded before the reschedule was read (a slow or
// paused owner, or a cancel that got there first), the copy goes to the
// dead-letter topic in the cancel's transaction, saying why: before, both
// the message and its copy were delivered (found by an adversarial review).
func TestRescheduleReplacesOrDeadLetters(t *testing.T) {
	now := time.Now().UnixMilli()
	f := reschedFixture{now: now, far: now + time.Hour.Milliseconds(), lead: DefaultConfig().BodyLead.Milliseconds()}
	t.Run("replaces a pending message", func(t *testing.T) { reschedReplacesAPendingMessage(t, f) })
	t.Run("two reschedules read together", func(t *testing.T) { reschedTwoReschedulesReadTogether(t, f) })
	t.Run("replaces a message with one due now", func(t *testing.T) { reschedReplacesAMessageWithOneDueNow(t, f) })
	t.Run("nothing left to replace", func(t *testing.T) { reschedNothingLeftToReplace(t, f) })
}

// reschedFixture is what TestRescheduleReplacesOrDeadLetters's cases
// share: a worker owning partition 0 (never connected) and the times.
type reschedFixture struct {
	now, far, lead int64
}

// rec is a delay record of partition 0 at off, due at due, with a
// _cancel header when cancel is not empty.
func (f reschedFixture) rec(off int64, due int64, cancel string) *kgo.Record {
	r := &kgo.Record{Topic: "hourglass.delay", Partition: 0, Offset: off, Key: []byte("k"), Value: []byte("body"),
		Timestamp: time.UnixMilli(f.now),
		Headers:   []kgo.RecordHeader{{Key: HeaderDeliverAt, Value: []byte(strconv.FormatInt(due, 10))}, {Key: HeaderBizTopic, Value: []byte("biz")}}}
	if cancel != "" {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderCancel, Value: []byte(cancel)})
	}
	return r
}

// setup returns a worker owning partition 0.
func (f reschedFixture) setup(t *testing.T) *Worker {
	cfg := DefaultConfig()
	cfg.Brokers = []string{"127.0.0.1:1"}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.parts.parts[0] = newPartProgress(0, nil)
	return w
}

// reschedReplacesAPendingMessage: the case "replaces a pending message" of TestRescheduleReplacesOrDeadLetters.
func reschedReplacesAPendingMessage(t *testing.T, f reschedFixture) {
	w := f.setup(t)
	w.indexOne(f.rec(0, f.far, ""), f.now, f.lead)
	w.indexOne(f.rec(1, f.far+60_000, "offset:0"), f.now, f.lead)
	batch := w.idx.collectDue(f.now)
	var cancelled, dead int
	for _, e := range batch {
		if e.cancelled && e.offset == 0 {
			cancelled++
		}
		if e.dlqReason() != "" {
			dead++
		}
	}
	if len(batch) != 3 || cancelled != 1 || dead != 0 {
		t.Fatalf("batch of %d (%d cancelled, %d dead-lettered), want the cancel half, the original, cancelled, and the scheduled half", len(batch), cancelled, dead)
	}
	// The scheduled half is copied forward in the cancel's
	// transaction: left pending, it would be read again after a crash,
	// find nothing to replace and be dead-lettered (the message lost).
	sched := batch[0].ctl.sched
	if sched == nil || batch[2] != sched || !sched.copy || sched.ctl != nil || sched.due != f.far+60_000 {
		t.Fatalf("the scheduled half: %+v, want it copied forward at its new time", sched)
	}
	out := w.output(sched)
	if _, ok := headerValue(out, HeaderCancel); ok || out.Topic != w.cfg.DelayTopic || out.Partition != 0 {
		t.Fatalf("the copy %+v, want a plain record in partition 0 of the delay topic", out)
	}
	if at, _ := headerValue(out, HeaderDeliverAt); at != strconv.FormatInt(f.far+60_000, 10) {
		t.Errorf("the copy is due at %s, want %d", at, f.far+60_000)
	}
	if from, _ := headerValue(out, HeaderCopiedFrom); from != w.cfg.DelayTopic+"/0/1" {
		t.Errorf("the copy names %q, want the reschedule's position", from)
	}
	// Aborted, it is decided again with the cancel half.
	for _, e := range batch {
		e.inBatch = false
	}
	w.aborted(batch, nil)
	if again := w.idx.collectDue(f.now); len(again) != 3 || again[2] != sched || !sched.copy {
		t.Fatalf("after an abort: batch of %d, want the same three again", len(again))
	}
}

// reschedTwoReschedulesReadTogether: the case "two reschedules read together" of TestRescheduleReplacesOrDeadLetters.
func reschedTwoReschedulesReadTogether(t *testing.T, f reschedFixture) {
	// Both are read before the first is settled: the second replaces
	// the first (whose copy is not made), not nothing.
	w := f.setup(t)
	w.indexOne(f.rec(0, f.far, ""), f.now, f.lead)
	w.indexOne(f.rec(1, f.far+60_000, "key"), f.now, f.lead)
	w.indexOne(f.rec(2, f.far+120_000, "key"), f.now, f.lead)
	batch := w.idx.collectDue(f.now)
	state := map[int64]string{}
	for _, e := range batch {
		switch {
		case e.ctl != nil && e.ctl.cancel != nil:
		case e.dlqReason() != "":
			state[e.offset] += "dead-lettered "
		case e.cancelled:
			state[e.offset] += "cancelled "
		case e.copy:
			state[e.offset] += "copied "
		default:
			state[e.offset] += "forwarded "
		}
	}
	if state[0] != "cancelled " || state[1] != "cancelled " || state[2] != "copied " {
		t.Fatalf("offsets 0, 1, 2: %q, %q, %q; want cancelled, cancelled, copied", state[0], state[1], state[2])
	}
}

// reschedReplacesAMessageWithOneDueNow: the case "replaces a message with one due now" of TestRescheduleReplacesOrDeadLetters.
func reschedReplacesAMessageWithOneDueNow(t *testing.T, f reschedFixture) {
	w := f.setup(t)
	w.indexOne(f.rec(0, f.far, ""), f.now, f.lead)
	w.indexOne(f.rec(1, f.now-5, "offset:0"), f.now, f.lead)
	batch := w.idx.collectDue(f.now)
	if len(batch) != 3 || batch[2].copy || batch[2].offset != 1 || w.output(batch[2]).Topic != "biz" {
		t.Fatalf("batch of %d, want the cancel half, the original and the reschedule forwarded in one transaction", len(batch))
	}
}

// reschedNothingLeftToReplace: the case "nothing left to replace" of TestRescheduleReplacesOrDeadLetters.
func reschedNothingLeftToReplace(t *testing.T, f reschedFixture) {
	w := f.setup(t)
	// The reschedule names offset 0, which is not pending (forwarded
	// before the reschedule was read).
	w.indexOne(f.rec(1, f.far, "offset:0"), f.now, f.lead)
	batch := w.idx.collectDue(f.now)
	if len(batch) != 2 {
		t.Fatalf("batch of %d, want the cancel half and its copy", len(batch))
	}
	sched := batch[1]
	if sched.offset != 1 || sched.ctl == nil || sched.dlqReason() == "" {
		t.Fatalf("the copy %+v is not dead-lettered", sched)
	}
	out := w.output(sched)
	if out == nil || out.Topic != w.cfg.DLQTopic {
		t.Fatalf("the copy's output %+v, want a dead letter", out)
	}
	if later := w.idx.collectDue(f.far + 1); len(later) != 0 {
		t.Errorf("at the copy's due time %d entries are due, want none", len(later))
	}
}

// TestRefusedOutputsAreDeadLettered: an output Kafka refuses for good (a
// topic that cannot exist, a record too large) would abort every
// transaction of the worker for ever and hold up all its partitions; it
// is dead-lettered instead, and a dead letter refused for its size goes
// again without its body. A transient error changes nothing.
func TestRefusedOutputsAreDeadLettered(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Brokers = []string{"127.0.0.1:1"}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pp := newPartProgress(0, nil)
	body := &kgo.Record{Key: []byte("k"), Value: []byte("big body"), Timestamp: time.Now(),
		Headers: []kgo.RecordHeader{{Key: HeaderDeliverAt, Value: []byte("1")}, {Key: HeaderBizTopic, Value: []byte("missing-topic")}}}
	bad := &entry{pp: pp, offset: 7, due: 1, rec: body}
	slow := &entry{pp: pp, offset: 8, due: 1, rec: body}
	out1, out2 := w.output(bad), w.output(slow)
	if out1.Topic != "missing-topic" {
		t.Fatalf("the forward goes to %q", out1.Topic)
	}
	w.deadLetterRefused(map[*kgo.Record]error{out1: kerr.InvalidTopicException, out2: kerr.NotLeaderForPartition},
		map[*kgo.Record]*entry{out1: bad, out2: slow})
	if bad.dlqReason() == "" || slow.ctl != nil {
		t.Fatalf("after the refusals: bad %+v, slow %+v; want bad dead-lettered, slow unchanged", bad.ctl, slow.ctl)
	}
	dl := w.output(bad)
	if dl.Topic != w.cfg.DLQTopic || string(dl.Value) != "big body" {
		t.Fatalf("dead letter %+v, want the body on the dead-letter topic", dl)
	}
	w.deadLetterRefused(map[*kgo.Record]error{dl: kerr.MessageTooLarge}, map[*kgo.Record]*entry{dl: bad})
	dl2 := w.output(bad)
	if dl2.Topic != w.cfg.DLQTopic || dl2.Value != nil || !bad.ctl.dropBody {
		t.Fatalf("second dead letter %+v, want one without its body", dl2)
	}
	if w.stats.Refused.Load() != 2 {
		t.Errorf("refused counter %d, want 2", w.stats.Refused.Load())
	}
}

// TestChangesReadTogetherWhenDue: a message, its reschedule and then a
// cancel (or a second reschedule), all read in one poll after every due
// time passed (a worker that starts late). The batch must do what the log
// order says: the cancel reaches the reschedule, which is due and already
// in the batch, so nothing is forwarded; a second reschedule replaces the
// first and alone is forwarded. Before, the first reschedule was
// forwarded in spite of the cancel, and the second dead-lettered
// (TestKafkaRapidChanges with the worker started after the producer).
func TestChangesReadTogetherWhenDue(t *testing.T) {
	now := time.Now().UnixMilli()
	f := reschedFixture{now: now, lead: DefaultConfig().BodyLead.Milliseconds()}
	for _, c := range []struct {
		name     string
		third    *kgo.Record
		forwards []int64
	}{
		{"then a cancel", func() *kgo.Record { r := f.rec(2, 0, "key"); r.Headers = r.Headers[2:]; return r }(), nil},
		{"then a second reschedule", f.rec(2, now-1000, "key"), []int64{2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := f.setup(t)
			w.indexOne(f.rec(0, now-3000, ""), now, f.lead)
			w.indexOne(f.rec(1, now-2000, "key"), now, f.lead)
			w.indexOne(c.third, now, f.lead)
			var forwards []int64
			for _, e := range w.idx.collectDue(now) {
				if out := w.output(e); out != nil {
					if out.Topic != "biz" {
						t.Fatalf("offset %d goes to %s (%v), want nothing but forwards", e.offset, out.Topic, e.dlqReason())
					}
					forwards = append(forwards, e.offset)
				}
			}
			if !slices.Equal(forwards, c.forwards) {
				t.Fatalf("forwarded offsets %v, want %v", forwards, c.forwards)
			}
		})
	}
}
