//go:build !race

package remoting

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// TestClientOrderly: an orderly producer's selector puts each order's
// messages in one queue; an orderly consumer (which locks its queues) gets
// each order's messages in send order.
func TestClientOrderly(t *testing.T) {
	b := startTest(t, nil)
	p := newProducer(t, b, producer.WithQueueSelector(producer.NewHashQueueSelector()))
	_, got := newPush(t, b, "ship", "steps", consumer.MessageSelector{}, nil,
		consumer.WithConsumerOrder(true), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	const orders, steps = 4, 5
	for s := 0; s < steps; s++ {
		for o := 0; o < orders; o++ {
			m := primitive.NewMessage("steps", []byte(fmt.Sprintf("%d/%d", o, s)))
			m.WithShardingKey(fmt.Sprintf("order-%d", o))
			if _, err := p.SendSync(context.Background(), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	next := make([]int, orders)
	for i := 0; i < orders*steps; i++ {
		var o, s int
		d := waitFor(t, got, 15*time.Second)
		fmt.Sscanf(string(d.msg.Body), "%d/%d", &o, &s)
		if s != next[o] {
			t.Fatalf("order %d: step %d after step %d", o, s, next[o]-1)
		}
		next[o]++
	}
	if b.srv.Requests(codeLockBatchMQ) == 0 {
		t.Fatal("the orderly consumer never locked a queue")
	}
}

// TestClientBroadcasting: every consumer of a broadcasting group gets every
// message (their offsets are their own).
func TestClientBroadcasting(t *testing.T) {
	b := startTest(t, nil)
	p := newProducer(t, b)
	var chans []chan delivery
	for i := 0; i < 2; i++ {
		_, got := newPush(t, b, "screens", "news", consumer.MessageSelector{}, nil,
			consumer.WithConsumerModel(consumer.BroadCasting), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
		chans = append(chans, got)
	}
	for i := 0; i < 3; i++ {
		if _, err := p.SendSync(context.Background(), primitive.NewMessage("news", []byte(fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	for i, ch := range chans {
		seen := map[string]bool{}
		for len(seen) < 3 {
			seen[string(waitFor(t, ch, 15*time.Second).msg.Body)] = true
		}
		if len(seen) != 3 {
			t.Fatalf("consumer %d got %v", i, seen)
		}
	}
}

// TestClientLitePull: the lite pull consumer's Poll gets messages, a delayed
// one no earlier than its level.
func TestClientLitePull(t *testing.T) {
	b := startTest(t, nil)
	p := newProducer(t, b)
	c, err := rocketmq.NewPullConsumer(consumer.WithGroupName("poller"), consumer.WithInstance(instance(t)),
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{b.addr})),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe("polled", consumer.MessageSelector{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Shutdown() })
	sent := time.Now()
	m := primitive.NewMessage("polled", []byte("later")).WithDelayTimeLevel(4)
	if _, err := p.SendSync(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		cr, err := c.Poll(context.Background(), time.Second)
		if consumer.IsNoNewMsgError(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		msgs := cr.GetMsgList()
		if len(msgs) == 0 {
			continue
		}
		if early := sent.Add(testLevels[3]).Sub(time.Now()); early > 0 || string(msgs[0].Body) != "later" {
			t.Fatalf("polled %q %v early", msgs[0].Body, early)
		}
		c.ACK(context.Background(), cr, consumer.ConsumeSuccess)
		return
	}
	t.Fatal("nothing polled in 15 s")
}

// TestClientOffsetsSurviveRestart: a group's committed offsets are
// durable: after the broker restarts, a new consumer of the group starts
// after what the first one consumed (no message twice, none lost).
func TestClientOffsetsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	b := startAt(t, dir, "127.0.0.1:0", nil)
	p := newProducer(t, b)
	c, got := newPush(t, b, "ledger", "entries", consumer.MessageSelector{}, nil)
	for i := 0; i < 4; i++ {
		if _, err := p.SendSync(context.Background(), primitive.NewMessage("entries", []byte(fmt.Sprint("a", i)))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 4; i++ {
		waitFor(t, got, 10*time.Second)
	}
	// Shutdown commits the consumed offsets (UPDATE_CONSUMER_OFFSET).
	c.Shutdown()
	p.Shutdown()
	// One-way UPDATE_CONSUMER_OFFSET requests, one per queue (4 and the
	// retry topic's), may still be on their way.
	for deadline := time.Now().Add(10 * time.Second); b.srv.Requests(codeUpdateConsumerOffset) < 5; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d offset updates in 10 s, want 5", b.srv.Requests(codeUpdateConsumerOffset))
		}
	}
	b.close(t)
	b2 := startAt(t, dir, "127.0.0.1:0", nil)
	p2 := newProducer(t, b2)
	if _, err := p2.SendSync(context.Background(), primitive.NewMessage("entries", []byte("b0"))); err != nil {
		t.Fatal(err)
	}
	_, got2 := newPush(t, b2, "ledger", "entries", consumer.MessageSelector{}, nil)
	if d := waitFor(t, got2, 15*time.Second); string(d.msg.Body) != "b0" {
		t.Fatalf("after the restart the group got %q first, want b0", d.msg.Body)
	}
}
