package rocketmq_test

import (
	"context"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	hgbroker "github.com/hourglass-mq/hourglass/broker"
)

// TestRestartKeepsDelayedAndRefusesOldReceipts: a delayed message pending
// across a broker restart is delivered once, on time; a receipt handed out
// before the restart fails cleanly after it.
func TestRestartKeepsDelayedAndRefusesOldReceipts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	onDir := func(c *hgbroker.Config) { c.DataDir = dir }
	b1, stop1 := launch(t, onDir)
	p, err := rmq.NewProducer(&rmq.Config{Endpoint: b1.grpc, Credentials: creds()}, rmq.WithTopics("timeouts"))
	if err != nil {
		t.Fatal(err)
	}
	startBounded(t, p.Start)
	due := time.Now().Add(2 * time.Second)
	msg := &rmq.Message{Topic: "timeouts", Body: []byte("close order 9")}
	msg.SetDelayTimestamp(due)
	rs, err := p.Send(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(context.Background(), &rmq.Message{Topic: "timeouts", Body: []byte("now")}); err != nil {
		t.Fatal(err)
	}
	c1 := newConsumerNoCleanup(t, b1, "closer", "timeouts", time.Second)
	var old *rmq.MessageView
	receiveUntil(t, c1, 10*time.Second, time.Minute, false, func(mv *rmq.MessageView, _ time.Time) bool { old = mv; return true })
	c1.GracefulStop()
	p.GracefulStop()
	if err := stop1(); err != nil {
		t.Fatal(err)
	}

	b2 := startBroker(t, onDir)
	r, err := dial(t, b2.grpc).AckMessage(bounded(t), &pb.AckMessageRequest{Topic: &pb.Resource{Name: "timeouts"}, Group: &pb.Resource{Name: "closer"},
		Entries: []*pb.AckMessageEntry{{MessageId: old.GetMessageId(), ReceiptHandle: old.GetReceiptHandle()}}})
	if err != nil || r.GetStatus().GetCode() != pb.Code_INVALID_RECEIPT_HANDLE {
		t.Errorf("ack of a receipt from before the restart: %v %v; want INVALID_RECEIPT_HANDLE", r.GetStatus(), err)
	}
	c2 := newConsumer(t, b2, "closer", "timeouts", time.Second)
	seen := 0
	receiveUntil(t, c2, 15*time.Second, time.Minute, true, func(mv *rmq.MessageView, at time.Time) bool {
		if mv.GetMessageId() == rs[0].MessageID {
			seen++
			if at.Before(due) {
				t.Errorf("delivered %v early", due.Sub(at))
			}
		}
		return seen > 0
	})
	// Acked: a further long poll does not bring it again.
	mvs, err := c2.Receive(context.Background(), 16, time.Minute)
	if err != nil && rpcCode(err) != int32(pb.Code_MESSAGE_NOT_FOUND) {
		t.Fatal(err)
	}
	for _, mv := range mvs {
		if mv.GetMessageId() == rs[0].MessageID {
			t.Error("the delayed message was delivered twice")
		}
	}
}
