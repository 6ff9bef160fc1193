package kafkamode_test

import (
	"fmt"
	"math/rand"
	"testing"
	"time"
)

// TestKafkaRebalanceUnderLoad: one worker, then three (cooperative
// rebalancing moves partitions while records keep falling due), then one
// of the three is SIGKILLed and its partitions move to the other two after
// its session times out. A read_committed consumer sees every message
// once, none early.
func TestKafkaRebalanceUnderLoad(t *testing.T) {
	e := newEnv(t, 6)
	c := e.collect(e.biz)
	l := &ledger{due: map[string]int64{}}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	w1 := e.startWorker("w1")
	var w2, w3 *worker
	start := time.Now()
	for i := 0; time.Since(start) < 8*time.Second; i++ {
		now := time.Now().UnixMilli()
		var batch []msg
		for j := 0; j < 30; j++ {
			batch = append(batch, msg{id: fmt.Sprintf("r%03d-%02d", i, j), due: now + 200 + rng.Int63n(2000)})
		}
		e.produce(l, batch)
		switch i {
		case 15:
			w2 = e.startWorker("w2")
			w3 = e.startWorker("w3")
		case 50:
			w2.kill(t)
		}
		time.Sleep(100 * time.Millisecond)
	}
	got := e.settle(c, l, 90*time.Second)
	v := l.check(got)
	t.Logf("1 -> 3 workers, then one killed, %d messages: %s; lateness %s", len(l.due), v, v.latenessSummary())
	if !v.ok() {
		t.Fatalf("%s", v)
	}
	// The partitions did move: w3 got some and forwarded from them.
	s3 := w3.stop(t)
	if s3["assigned"] == 0 || s3["forwarded"] == 0 {
		t.Fatalf("no partition moved to w3: %v", s3)
	}
	t.Logf("w1 %v; w3 %v", w1.stop(t), s3)
}
