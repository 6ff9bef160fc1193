package kafkamode_test

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

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
