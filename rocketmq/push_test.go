//go:build !race

// The official Go client's push consumer races with itself: it writes the
// settings the broker sends (applySettingsCommand) while its settings-sync
// goroutine reads them (toProtobuf), with no lock. The race detector
// rightly flags it, in the client, whatever the broker answers; so this
// test runs in builds without -race only (`go test ./rocketmq`).

package rocketmq_test

import (
	"context"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"

	"github.com/hourglass-mq/hourglass/server"
)

func TestPushConsumerReceivesDelayed(t *testing.T) {
	t.Parallel()
	// A short long poll: the client's GracefulStop waits for its receives
	// in flight to end (up to the long poll plus its request timeout).
	b := startBroker(t, func(c *server.Config) { c.GRPCLongPoll = time.Second })
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
