package kafkamode_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaDelayTopicGrows: partitions added to the delay topic while a
// worker runs are assigned to it at its next metadata refresh, and the
// state topic is grown to match, so their messages are forwarded once and
// not early; partitions added while no worker runs are matched at start.
// Before, the worker retried loading the new partitions' markers for ever
// (no state partition), holding up the group.
func TestKafkaDelayTopicGrows(t *testing.T) {
	e := newEnv(t, 2)
	c := e.collect(e.biz)
	l := &ledger{due: map[string]int64{}}
	w1 := e.startWorker("w1")
	batch := func(prefix string, n int) []msg {
		now := time.Now().UnixMilli()
		var ms []msg
		for i := 0; i < n; i++ {
			ms = append(ms, msg{id: fmt.Sprintf("%s-%02d", prefix, i), due: now + 500 + int64(i)*20})
		}
		return ms
	}
	e.produce(l, batch("before", 10))
	c.waitFor(t, 10, 60*time.Second)

	cl := e.growDelay(4)
	for p := int32(0); p < 4; p++ {
		e.produceWith(cl, l, batch(fmt.Sprintf("running-p%d", p), 5), p)
	}
	c.waitFor(t, len(l.due), 60*time.Second)
	w1.kill(t)

	cl = e.growDelay(6)
	for p := int32(0); p < 6; p++ {
		e.produceWith(cl, l, batch(fmt.Sprintf("stopped-p%d", p), 3), p)
	}
	w2 := e.startWorker("w2")
	got := e.settle(c, l, 90*time.Second)
	v := l.check(got)
	t.Logf("delay topic grown 2 -> 4 under a worker, 4 -> 6 between workers, %d messages: %s", len(l.due), v)
	if !v.ok() {
		t.Fatalf("%s", v)
	}
	td, err := kadm.NewClient(e.cl).ListTopics(context.Background(), e.state)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(td[e.state].Partitions); n != 6 {
		t.Fatalf("state topic has %d partitions, want 6 like the delay topic", n)
	}
	if s := w2.stop(t); s["forwarded"] == 0 {
		t.Fatalf("w2 forwarded nothing: %v", s)
	}
}

// growDelay sets the delay topic's partition count to n and returns a
// producer with a manual partitioner that knows the n partitions (a
// client's cached metadata would refuse the new ones).
func (e *env) growDelay(n int) *kgo.Client {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := kadm.NewClient(e.cl).UpdatePartitions(ctx, n, e.delay)
	if err == nil {
		err = rs[e.delay].Err
	}
	if err != nil {
		e.t.Fatalf("grow %s to %d partitions: %v", e.delay, n, err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(cl.Close)
	for {
		td, err := kadm.NewClient(cl).ListTopics(ctx, e.delay)
		if err == nil && len(td[e.delay].Partitions) == n {
			return cl
		}
		if ctx.Err() != nil {
			e.t.Fatalf("the metadata never showed %s with %d partitions: %v", e.delay, n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
