//go:build !race

// The official Go client's push consumer races with itself: it writes the
// settings the broker sends (applySettingsCommand) while its settings-sync
// goroutine reads them (toProtobuf), with no lock. The race detector
// rightly flags it, in the client, whatever the broker answers; so this
// test runs in builds without -race only (`go test ./rocketmq`).

package rocketmq_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	hgbroker "github.com/hourglass-mq/hourglass/broker"
	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/engine"
)

func TestPushConsumerReceivesDelayed(t *testing.T) {
	t.Parallel()
	// A short long poll: the client's GracefulStop waits for its receives
	// in flight to end (up to the long poll plus its request timeout).
	b := startBroker(t, func(c *hgbroker.Config) { c.GRPCLongPoll = time.Second })
	p := newProducer(t, b, "reminders")
	got := make(chan *rmq.MessageView, 16)
	pc, err := rmq.NewPushConsumer(&rmq.Config{Endpoint: b.grpc, ConsumerGroup: "notifier", Credentials: creds()},
		rmq.WithPushAwaitDuration(2*time.Second),
		rmq.WithPushSubscriptionExpressions(map[string]*rmq.FilterExpression{"reminders": rmq.SUB_ALL}),
		rmq.WithPushMessageListener(&rmq.FuncMessageListener{Consume: func(mv *rmq.MessageView) rmq.ConsumerResult {
			got <- mv
			return rmq.SUCCESS
		}}))
	if err != nil {
		t.Fatal(err)
	}
	startBounded(t, pc.Start)
	t.Cleanup(func() { pc.GracefulStop() })
	due := time.Now().Add(time.Second)
	msg := &rmq.Message{Topic: "reminders", Body: []byte("remind")}
	msg.SetDelayTimestamp(due)
	rs, err := p.Send(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case mv := <-got:
		if mv.GetMessageId() != rs[0].MessageID || time.Now().Before(due) {
			t.Fatalf("got %s at %v, want %s no earlier than %v", mv.GetMessageId(), time.Now(), rs[0].MessageID, due)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the push consumer got nothing in 15s")
	}
}

// TestPushConsumerForwardsFIFOToDeadLetters: the official push consumer
// retries a failing FIFO message itself, with the retry policy the broker
// tells it (the group's: 2 attempts, 100 ms backoff), then forwards it to
// the dead-letter queue and goes on with the next message of the group.
// The forward used to be refused as not implemented, and the client
// retries it for ever, holding the message group's queue meanwhile. The
// dead letter records the client's two attempts, not the broker's one
// delivery.
func TestPushConsumerForwardsFIFOToDeadLetters(t *testing.T) {
	t.Parallel()
	b := startBroker(t, func(c *hgbroker.Config) { c.GRPCLongPoll = time.Second })
	hc := client.New("http://" + b.http)
	ctx := context.Background()
	if _, err := hc.CreateTopic(ctx, "orders", client.TopicConfig{FIFO: true, Queues: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := hc.CreateGroup(ctx, "orders", "billing", client.GroupConfig{MaxAttempts: 2, BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second}); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, b, "orders")
	var ids []string
	for _, body := range []string{"poison", "next"} {
		msg := &rmq.Message{Topic: "orders", Body: []byte(body)}
		msg.SetMessageGroup("customer-1")
		rs, err := p.Send(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rs[0].MessageID)
	}
	var poisonTries atomic.Int32
	next := make(chan string, 1)
	pc, err := rmq.NewPushConsumer(&rmq.Config{Endpoint: b.grpc, ConsumerGroup: "billing", Credentials: creds()},
		rmq.WithPushAwaitDuration(time.Second),
		rmq.WithPushSubscriptionExpressions(map[string]*rmq.FilterExpression{"orders": rmq.SUB_ALL}),
		rmq.WithPushMessageListener(&rmq.FuncMessageListener{Consume: func(mv *rmq.MessageView) rmq.ConsumerResult {
			if string(mv.GetBody()) == "poison" {
				poisonTries.Add(1)
				return rmq.FAILURE
			}
			select {
			case next <- mv.GetMessageId():
			default:
			}
			return rmq.SUCCESS
		}}))
	if err != nil {
		t.Fatal(err)
	}
	startBounded(t, pc.Start)
	t.Cleanup(func() { pc.GracefulStop() })
	select {
	case id := <-next:
		if id != ids[1] {
			t.Fatalf("got %s after the poison message, want %s", id, ids[1])
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the message after a poison one never came (poison tried %d times)", poisonTries.Load())
	}
	if n := poisonTries.Load(); n != 2 {
		t.Errorf("the poison message was tried %d times; the group allows 2", n)
	}
	dlq := engine.DeadLetterTopic("orders", "billing")
	deadline := time.Now().Add(10 * time.Second)
	for {
		rs, err := hc.Receive(ctx, dlq, "ops", client.ReceiveOptions{Max: 10, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 1 && string(rs[0].Body) == "poison" && rs[0].Properties[engine.DeadReasonProperty] == engine.ReasonGivenUp {
			// The client tried it twice under the broker's one
			// delivery: the dead letter says 2 (it said 1).
			if got := rs[0].Properties["hourglass-attempts"]; got != "2" {
				t.Errorf("dead letter records %q attempts; the consumer made 2", got)
			}
			break
		}
		if len(rs) > 0 || time.Now().After(deadline) {
			t.Fatalf("dead-letter topic holds %+v, want the poison message forwarded", rs)
		}
	}
}
