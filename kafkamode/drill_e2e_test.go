package kafkamode_test

import (
	"fmt"
	"math/rand"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/kafkamode"
)

// TestKafkaKill9WithCancels: cancels by key, read and maybe committed
// before a worker is SIGKILLed (with snapshots every second, so the
// restarted worker resumes from one), stay applied: no cancelled message
// ever reaches a read_committed consumer, and every other one arrives
// once, none early.
func TestKafkaKill9WithCancels(t *testing.T) {
	e := newEnv(t, 2)
	c := e.collect(e.biz)
	l := &ledger{due: map[string]int64{}}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	w := e.startWorker("w1", "--snapshot-interval", "1s")
	e.produce(l, []msg{{id: "warm", due: 0}})
	c.waitFor(t, 1, 15*time.Second)

	now := time.Now().UnixMilli()
	var keep []msg
	for i := 0; i < 200; i++ {
		keep = append(keep, msg{id: fmt.Sprintf("keep%03d", i), due: now + 1000 + rng.Int63n(4000)})
	}
	e.produce(l, keep)
	var drop []msg
	for i := 0; i < 100; i++ {
		drop = append(drop, msg{id: fmt.Sprintf("drop%03d", i), due: now + 3000 + rng.Int63n(2000)})
	}
	e.produce(nil, drop)
	var cancels []*kgo.Record
	for _, m := range drop {
		cancels = append(cancels, &kgo.Record{Topic: e.delay, Key: []byte(m.id), Headers: []kgo.RecordHeader{{Key: kafkamode.HeaderCancel, Value: []byte("key")}}})
	}
	if err := e.cl.ProduceSync(t.Context(), cancels...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, 20, 15*time.Second) // some have fired, the cancels were read
	w.kill(t)
	e.startWorker("w1", "--snapshot-interval", "1s")
	got := e.settle(c, l, 60*time.Second)
	if v := l.check(got); !v.ok() {
		t.Fatalf("%s", v)
	}
}

// TestKafkaRescheduleSurvivesKill9: a reschedule record whose cancel half
// was applied (the message it moves is resolved, committed) and whose new
// time is still ahead survives a kill -9 and restart of its worker before
// the next snapshot: it is delivered at its new time, once, and the
// message it moved never. The restarted worker reads the reschedule again
// and finds nothing pending to replace (it replaced it before the crash).
func TestKafkaRescheduleSurvivesKill9(t *testing.T) {
	e := newEnv(t, 1)
	e.copies = true // the reschedule copies its record forward (settleReschedule)
	c := e.collect(e.biz)
	w := e.startWorker("w1")
	e.produce(nil, []msg{{id: "warm", due: 0}})
	c.waitFor(t, 1, 15*time.Second)
	l := &ledger{due: map[string]int64{"warm": 0}}

	now := time.Now().UnixMilli()
	m0 := &kgo.Record{Topic: e.delay, Partition: 0, Key: []byte("order-7"), Value: []byte("m0"), Headers: []kgo.RecordHeader{
		{Key: kafkamode.HeaderDeliverAt, Value: []byte(strconv.FormatInt(now+60_000, 10))},
		{Key: kafkamode.HeaderBizTopic, Value: []byte(e.biz)}}}
	if err := e.manual().ProduceSync(t.Context(), m0).FirstErr(); err != nil {
		t.Fatal(err)
	}
	moved := now + 5000
	resched := &kgo.Record{Topic: e.delay, Partition: 0, Key: []byte("order-7"), Value: []byte("m0-moved"), Headers: []kgo.RecordHeader{
		{Key: kafkamode.HeaderCancel, Value: []byte("offset:" + strconv.FormatInt(m0.Offset, 10))},
		{Key: kafkamode.HeaderDeliverAt, Value: []byte(strconv.FormatInt(moved, 10))},
		{Key: kafkamode.HeaderBizTopic, Value: []byte(e.biz)}}}
	if err := e.manual().ProduceSync(t.Context(), resched).FirstErr(); err != nil {
		t.Fatal(err)
	}
	l.due["m0-moved"] = moved
	// The cancel half is committed once the group's offset passes m0.
	adm := kadm.NewClient(e.cl)
	for {
		offs, err := adm.FetchOffsets(t.Context(), e.group)
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := offs.Lookup(e.delay, 0); ok && o.At > m0.Offset {
			break
		}
		if time.Now().UnixMilli() > moved-2000 {
			t.Fatal("the reschedule's cancel half was not committed in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.kill(t)
	e.startWorker("w1")
	if v := l.check(e.settle(c, l, 30*time.Second)); !v.ok() {
		t.Fatalf("%s", v)
	}
}
