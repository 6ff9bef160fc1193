package kafkamode_test

import (
	"fmt"
	"testing"
	"time"
)

// TestKafkaSettleWatch: after each transaction the worker asks the
// coordinator whether the end has completed (settle.go) before it starts
// the next. On a real Kafka every end must be answered that way, never by
// the fixed-gap fallback, and the forwards stay exactly once and never
// early.
func TestKafkaSettleWatch(t *testing.T) {
	e := newEnv(t, 3)
	c := e.collect(e.biz)
	w := e.startWorker("w1")
	l := &ledger{due: map[string]int64{}}
	now := time.Now().UnixMilli()
	var msgs []msg
	for i := 0; i < 300; i++ {
		msgs = append(msgs, msg{id: fmt.Sprintf("s%03d", i), due: now + 1000 + int64(i)*3})
	}
	e.produce(l, msgs)
	if v := l.check(e.settle(c, l, 60*time.Second)); !v.ok() {
		t.Fatalf("%s", v)
	}
	counters := w.stop(t)
	stages := lineInts(w.out.String(), "kafka worker transaction stages")
	ended := counters["committed_txns"] + counters["aborted_txns"]
	if counters["committed_txns"] < 1 || stages["settle_fallbacks"] != 0 || stages["settled"] != ended {
		t.Errorf("%d transactions ended (%d committed); the coordinator answered the settle watch after %d, the fixed gap stood in for %d (want every one answered)",
			ended, counters["committed_txns"], stages["settled"], stages["settle_fallbacks"])
	}
}
