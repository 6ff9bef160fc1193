package rocketmq_test

import (
	"context"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
	"google.golang.org/grpc/codes"
	gstatus "google.golang.org/grpc/status"

	hgbroker "github.com/hourglass-mq/hourglass/broker"
)

// TestAuthVerifiesSignatures: with an auth token, the official client
// signed with it as the access secret works; unsigned calls and calls
// signed with another secret are refused with Unauthenticated, at once.
func TestAuthVerifiesSignatures(t *testing.T) {
	t.Parallel()
	b := startBroker(t, func(c *hgbroker.Config) { c.AuthToken = "s3cret-token" })
	p, err := rmq.NewProducer(&rmq.Config{Endpoint: b.grpc,
		Credentials: &credentials.SessionCredentials{AccessKey: "app", AccessSecret: "s3cret-token"}}, rmq.WithTopics("paid"))
	if err != nil {
		t.Fatal(err)
	}
	startBounded(t, p.Start)
	t.Cleanup(func() { p.GracefulStop() })
	if _, err := p.Send(context.Background(), &rmq.Message{Topic: "paid", Body: []byte("signed")}); err != nil {
		t.Fatalf("signed send: %v", err)
	}
	if _, err := dial(t, b.grpc).Heartbeat(bounded(t), &pb.HeartbeatRequest{}); gstatus.Code(err) != codes.Unauthenticated {
		t.Errorf("unsigned call: %v; want Unauthenticated", err)
	}
	bad, err := rmq.NewProducer(&rmq.Config{Endpoint: b.grpc,
		Credentials: &credentials.SessionCredentials{AccessKey: "app", AccessSecret: "wrong"}}, rmq.WithTopics("paid"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- bad.Start() }()
	select {
	case err := <-done:
		if err == nil {
			bad.GracefulStop()
			t.Fatal("a client with the wrong secret started")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a client with the wrong secret hung in Start")
	}
}
