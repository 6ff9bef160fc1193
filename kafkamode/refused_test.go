package kafkamode

import (
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A record Kafka refuses for good is never produced again unchanged: its
// dead letter loses its body, then its key and headers, and a bare dead
// letter refused too resolves the entry with no output. A refused copy
// forward leaves the record waiting in place, not copied again. A review
// found each of these retried for ever, aborting every transaction of the
// worker and holding up all its partitions.
func TestRefusedRecordsNeverRetriedUnchanged(t *testing.T) {
	w := &Worker{cfg: Config{DelayTopic: "d", DLQTopic: "d.dlq", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	pp := newPartProgress(0, nil)
	big := make([]byte, 1<<20)
	e := &entry{pp: pp, offset: 7, due: 100, rec: &kgo.Record{Key: big, Value: big, Headers: []kgo.RecordHeader{{Key: "h", Value: big}}}}
	e.ctl = &control{dlqReason: "bad headers"}
	refuse := func() {
		t.Helper()
		r := w.output(e)
		if r == nil {
			t.Fatal("no output to refuse")
		}
		w.deadLetterRefused(map[*kgo.Record]error{r: kerr.MessageTooLarge}, map[*kgo.Record]*entry{r: e})
	}
	refuse()
	if r := w.output(e); r == nil || r.Value != nil || len(r.Key) == 0 {
		t.Fatalf("after one refusal: %+v, want the dead letter without its body", r)
	}
	refuse()
	if r := w.output(e); r == nil || r.Value != nil || r.Key != nil || len(r.Headers) != 2 {
		t.Fatalf("after two refusals: %+v, want a bare dead letter (reason and source alone)", r)
	}
	refuse()
	if r := w.output(e); r != nil {
		t.Fatalf("after three refusals: %+v, want no output (resolved, logged, counted)", r)
	}
	if n := w.stats.Refused.Load(); n != 3 {
		t.Fatalf("refusals counted %d, want 3", n)
	}

	c := &entry{pp: pp, offset: 8, due: 1 << 50, copy: true, rec: &kgo.Record{Value: big}}
	r := w.output(c)
	if r == nil || r.Topic != "d" {
		t.Fatalf("a copy forward's output: %+v", r)
	}
	w.deadLetterRefused(map[*kgo.Record]error{r: kerr.MessageTooLarge}, map[*kgo.Record]*entry{r: c})
	if c.copy || c.dlqReason() != "" {
		t.Fatalf("after its copy was refused: copy %v, dead letter %q; want it waiting in place", c.copy, c.dlqReason())
	}
}

// A reschedule's cancel half leaves the due heap before its scheduled half
// when both are due at once (_deliverAt=0): they share partition and
// offset, and a review found the scheduled half forwarded first (a
// message delivered twice) when the heap's order between them was left to
// chance.
func TestRescheduleHalvesLeaveInOrder(t *testing.T) {
	pp := newPartProgress(0, nil)
	for _, schedFirst := range []bool{true, false} {
		var h dueHeap
		sched := &entry{pp: pp, offset: 5, due: 0}
		cancel := &entry{pp: pp, offset: 5, due: 0, ctl: &control{cancel: &cancelSpec{}, keepOwn: true}}
		other := &entry{pp: pp, offset: 4, due: 0}
		if schedFirst {
			h.push(sched)
			h.push(other)
			h.push(cancel)
		} else {
			h.push(cancel)
			h.push(other)
			h.push(sched)
		}
		var got []*entry
		for h.Len() > 0 {
			got = append(got, h.pop())
		}
		if got[0] != other || got[1] != cancel || got[2] != sched {
			t.Fatalf("pushed sched first %v: popped %v %v %v, want offset 4, then the cancel half, then the scheduled half", schedFirst, got[0].offset, got[1].isCancel(), got[2].isCancel())
		}
	}
}
