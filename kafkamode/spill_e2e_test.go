package kafkamode_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/kafkamode"
)

// TestKafkaSpillAndTakeover: with a near window of 4 s, messages due in
// 20 s are spilled to the worker's local bucket files. One of them is
// cancelled by key while on disk; a snapshot then covers every record and
// the worker is SIGKILLed (its spill files are lost with it, as a lost
// disk would be). The restarted worker rebuilds its index from the
// snapshot, spills again, loads the entries back before they are due and
// delivers each message once, not early; the cancelled one never.
func TestKafkaSpillAndTakeover(t *testing.T) {
	e := newEnv(t, 3)
	c := e.collect(e.biz)
	l := &ledger{due: map[string]int64{}}
	flags := []string{"--near-window", "4s", "--body-lead", "1s", "--snapshot-interval", "300ms", "--spill-dir", t.TempDir()}
	w := e.startWorker("w1", flags...)
	now := time.Now().UnixMilli()
	msgs := []msg{{id: "soon", due: now + 1500}}
	for i := range 20 {
		msgs = append(msgs, msg{id: fmt.Sprintf("far%02d", i), due: now + 20_000})
	}
	e.produce(l, msgs)
	gone := &kgo.Record{Topic: e.delay, Key: []byte("doomed"), Value: []byte("doomed"), Headers: []kgo.RecordHeader{
		{Key: kafkamode.HeaderDeliverAt, Value: []byte(strconv.FormatInt(now+20_000, 10))},
		{Key: kafkamode.HeaderBizTopic, Value: []byte(e.biz)}}}
	if err := e.cl.ProduceSync(t.Context(), gone).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cancel := &kgo.Record{Topic: e.delay, Key: []byte("doomed"), Headers: []kgo.RecordHeader{{Key: kafkamode.HeaderCancel, Value: []byte("key")}}}
	if err := e.cl.ProduceSync(t.Context(), cancel).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, 1, 30*time.Second) // "soon" is out: the cancel, read before, is resolved too
	ends, err := kadm.NewClient(e.cl).ListEndOffsets(t.Context(), e.delay)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			waitSnapshot(t, e, o.Partition, o.Offset) // covers every record of the partition
		}
	})
	w.kill(t)

	w2 := e.startWorker("w1", flags...)
	got := e.settle(c, l, 60*time.Second)
	v := l.check(got)
	t.Logf("spilled and taken over: %s; lateness %s", v, v.latenessSummary())
	if !v.ok() {
		t.Fatalf("%s (an unknown ID is the cancelled message, delivered)", v)
	}
	st := w2.stop(t)
	t.Logf("restarted worker: %v", st)
	if st["spill_loaded"] < 1 || st["spill_errors"] != 0 {
		t.Errorf("the restarted worker loaded %d entries from its spill (errors %d); want the far messages loaded back, no errors",
			st["spill_loaded"], st["spill_errors"])
	}
}
