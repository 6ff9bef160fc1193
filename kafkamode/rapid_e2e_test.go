package kafkamode_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/kafkamode"
)

// TestKafkaRapidChanges: a message, then at once a reschedule of it and a
// cancel (or a second reschedule), each produced as soon as the last was
// acknowledged. The worker resolves a reschedule by copying it forward in
// a transaction; a change produced before that copy lands sits in the log
// before it, and used to miss it: the cancelled message was delivered in
// 10 of 20 tries, and a second reschedule was dead-lettered. Now the
// cancel waits until the copy is read back (deferral.go): nothing of a
// cancelled key arrives, and a key rescheduled twice arrives once, at the
// second reschedule's time.
func TestKafkaRapidChanges(t *testing.T) { rapidChanges(t, false) }

// TestKafkaRapidChangesReadLate: the same changes, read by a worker that
// starts once they are all produced and due, so each key's message,
// reschedule and cancel (or second reschedule) are read in one poll and
// fall into one batch. Before, the cancel missed the reschedule (due,
// already in the batch) and it was delivered; a second reschedule found
// nothing to replace and was dead-lettered.
func TestKafkaRapidChangesReadLate(t *testing.T) { rapidChanges(t, true) }

// rapidChanges is TestKafkaRapidChanges, with the worker started after
// the records (late) or before.
func rapidChanges(t *testing.T, late bool) {
	e := newEnv(t, 1)
	e.copies = true
	c := e.collect(e.biz)
	var w *worker
	if !late {
		w = e.startWorker("w1")
	}
	l := &ledger{due: map[string]int64{}}
	rec := func(key, value string, due int64, cancel bool) *kgo.Record {
		var h []kgo.RecordHeader
		if cancel {
			h = append(h, kgo.RecordHeader{Key: kafkamode.HeaderCancel, Value: []byte("key")})
		}
		if due > 0 {
			h = append(h, kgo.RecordHeader{Key: kafkamode.HeaderDeliverAt, Value: []byte(strconv.FormatInt(due, 10))},
				kgo.RecordHeader{Key: kafkamode.HeaderBizTopic, Value: []byte(e.biz)})
		}
		return &kgo.Record{Topic: e.delay, Key: []byte(key), Value: []byte(value), Headers: h}
	}
	for i := 0; i < 24; i++ {
		k := fmt.Sprintf("order-%d", i)
		due := time.Now().UnixMilli() + 3000
		seq := []*kgo.Record{rec(k, k+"-m", due, false), rec(k, k+"-r1", due+500, true)}
		if i%2 == 0 {
			seq = append(seq, rec(k, k+"-c", 0, true))
		} else {
			seq = append(seq, rec(k, k+"-r2", due-1000, true))
			l.due[k+"-r2"] = due - 1000
		}
		for _, r := range seq {
			if err := e.cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(i%4) * time.Millisecond) // vary where the copy lands
		}
		time.Sleep(40 * time.Millisecond)
	}
	if late {
		// Every record due (r1 is due 1.5 s after the ledger's r2) before
		// the worker reads them: a wait for the clock, not for a state.
		time.Sleep(time.Until(time.UnixMilli(maxDue(l) + 1600)))
		w = e.startWorker("w1")
	}
	got := e.settle(c, l, 60*time.Second)
	if v := l.check(got); !v.ok() {
		t.Fatalf("%s (unknown: a cancelled or replaced message was delivered)", v)
	}
	st := w.stop(t)
	t.Logf("worker: cancelled %d, deferred cancels %d, copied %d, dead-lettered %d",
		st["cancelled"], st["cancels_deferred"], st["copied_forward"], st["dead_lettered"])
	if st["dead_lettered"] != 0 {
		t.Fatalf("%d reschedules dead-lettered, want 0: %v", st["dead_lettered"], st)
	}
}

// maxDue is the latest due time in the ledger (Unix ms).
func maxDue(l *ledger) int64 {
	var m int64
	for _, d := range l.due {
		m = max(m, d)
	}
	return m
}
