package rocketmq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"

	"github.com/hourglass-mq/hourglass/access/accesstest"
	hgbroker "github.com/hourglass-mq/hourglass/broker"
)

// startWith runs a client's Start and returns its error, failing the
// test when Start hangs.
func startWith(t *testing.T, start func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- start() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return in 10s")
		return nil
	}
}

// TestAccessMatrixOfficialClient: over TLS, the official RocketMQ 5 Go
// client signs as a principal (access key = name, secret key = its
// secret) and each of the actions the protocol has (send, receive and
// ack, recall) is allowed to the principal with the rule, and refused to
// one allowed the same action elsewhere, one allowed another action, one
// with no credentials and one with a wrong secret.
func TestAccessMatrixOfficialClient(t *testing.T) {
	rmq.EnableSsl = true
	defer func() { rmq.EnableSsl = false }()
	path, secrets := accesstest.Write(t, t.TempDir(), map[string][]string{
		"producer":       {"send:orders"},
		"consumer":       {"receive:orders/billing"},
		"operator":       {"manage:orders"},
		"elsewhere":      {"send:invoices", "receive:invoices/billing", "manage:invoices"},
		"wrong-action":   {"admin:*", "metrics:*", "receive:orders/shipping"},
		"producer-again": {"send:orders", "manage:orders"},
	})
	b := startBroker(t, func(c *hgbroker.Config) { c.GRPCPlaintext = false; c.Credentials = path })
	as := func(name string) *credentials.SessionCredentials {
		return &credentials.SessionCredentials{AccessKey: name, AccessSecret: secrets[name]}
	}
	producer := func(c *credentials.SessionCredentials) (rmq.Producer, error) {
		p, err := rmq.NewProducer(&rmq.Config{Endpoint: b.grpc, Credentials: c}, rmq.WithTopics("orders"))
		if err != nil {
			t.Fatal(err)
		}
		if err := startWith(t, p.Start); err != nil {
			return nil, err
		}
		t.Cleanup(func() { p.GracefulStop() })
		return p, nil
	}
	ctx := context.Background()
	send := func(name string) (*rmq.SendReceipt, error) {
		p, err := producer(as(name))
		if err != nil {
			return nil, err
		}
		rs, err := p.Send(ctx, &rmq.Message{Topic: "orders", Body: []byte("as " + name)})
		if err != nil {
			return nil, err
		}
		return rs[0], nil
	}
	if _, err := send("producer"); err != nil {
		t.Fatalf("send as producer: %v", err)
	}
	for _, name := range []string{"elsewhere", "wrong-action"} {
		if _, err := send(name); err == nil || !strings.Contains(err.Error(), "may not") {
			t.Errorf("send as %s: %v, want a refusal naming the action", name, err)
		}
	}
	for what, c := range map[string]*credentials.SessionCredentials{
		"no credential": {}, "a wrong secret": {AccessKey: "producer", AccessSecret: secrets["consumer"]},
	} {
		if p, err := producer(c); err == nil {
			if _, err := p.Send(ctx, &rmq.Message{Topic: "orders", Body: []byte("x")}); err == nil {
				t.Errorf("send with %s was accepted", what)
			}
		}
	}

	// Receive and ack as group billing of orders.
	consumer := func(name string) (rmq.SimpleConsumer, error) {
		c, err := rmq.NewSimpleConsumer(&rmq.Config{Endpoint: b.grpc, ConsumerGroup: "billing", Credentials: as(name)},
			rmq.WithSimpleAwaitDuration(time.Second),
			rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{"orders": rmq.SUB_ALL}))
		if err != nil {
			t.Fatal(err)
		}
		if err := startWith(t, c.Start); err != nil {
			return nil, err
		}
		t.Cleanup(func() { c.GracefulStop() })
		return c, nil
	}
	c, err := consumer("consumer")
	if err != nil {
		t.Fatal(err)
	}
	receiveUntil(t, c, 10*time.Second, 20*time.Second, true, func(mv *rmq.MessageView, _ time.Time) bool {
		return string(mv.GetBody()) == "as producer"
	})
	for _, name := range []string{"elsewhere", "wrong-action"} {
		c, err := consumer(name)
		if err != nil {
			continue // refused at its start: its route query
		}
		if _, err := c.Receive(ctx, 1, 20*time.Second); err == nil || !strings.Contains(err.Error(), "may not") {
			t.Errorf("receive as %s: %v, want a refusal", name, err)
		}
	}

	// Recall (manage) of a delayed message. A principal whose rules name
	// no part of orders is refused at its start (its route query).
	p, err := producer(as("producer-again"))
	if err != nil {
		t.Fatal(err)
	}
	m := &rmq.Message{Topic: "orders", Body: []byte("later")}
	m.SetDelayTimestamp(time.Now().Add(time.Hour))
	rs, err := p.Send(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := producer(as("elsewhere")); err == nil || !strings.Contains(err.Error(), "may not use topic orders") {
		t.Errorf("a producer of elsewhere on orders: %v, want a refusal", err)
	}
	for _, name := range []string{"producer", "wrong-action"} {
		q, err := producer(as(name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Recall(ctx, "orders", rs[0].RecallHandle); err == nil || !strings.Contains(err.Error(), "may not manage orders") {
			t.Errorf("recall as %s: %v, want a refusal", name, err)
		}
	}
	if _, err := p.Recall(ctx, "orders", rs[0].RecallHandle); err != nil {
		t.Errorf("recall as a principal that may manage orders: %v", err)
	}
}
