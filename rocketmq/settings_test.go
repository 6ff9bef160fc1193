package rocketmq

import (
	"testing"
	"time"

	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	"github.com/hourglass-mq/hourglass/engine"
)

// TestSubscriptionSettings: a consumer is told its group's retry policy
// (the fewest attempts where the group is on several topics), cut so the
// retries end within the lease renewal's limit, and fifo only when every
// subscribed topic is FIFO.
func TestSubscriptionSettings(t *testing.T) {
	eng, err := engine.Open(engine.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	for name, fifo := range map[string]bool{"f1": true, "f2": true, "plain": false} {
		if err := eng.CreateTopic(name, engine.TopicConfig{FIFO: fifo}); err != nil {
			t.Fatal(err)
		}
	}
	groups := []struct {
		topic string
		cfg   engine.GroupConfig
	}{
		{"f1", engine.GroupConfig{MaxAttempts: 5, BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second}},
		{"f2", engine.GroupConfig{MaxAttempts: 3, BackoffBase: 200 * time.Millisecond, BackoffMax: time.Second}},
		{"plain", engine.GroupConfig{MaxAttempts: 1000, BackoffBase: time.Second, BackoffMax: 24 * time.Hour}},
	}
	for _, g := range groups {
		if err := eng.CreateGroup(g.topic, "g", g.cfg); err != nil {
			t.Fatal(err)
		}
	}
	s := New(eng, Options{})
	sub := func(topics ...string) *pb.Settings {
		var es []*pb.SubscriptionEntry
		for _, tp := range topics {
			es = append(es, &pb.SubscriptionEntry{Topic: &pb.Resource{Name: tp}})
		}
		return s.settings("c", &pb.Settings{PubSub: &pb.Settings_Subscription{Subscription: &pb.Subscription{
			Group: &pb.Resource{Name: "g"}, Subscriptions: es}}})
	}
	for _, c := range []struct {
		topics   []string
		attempts int32
		initial  time.Duration
		fifo     bool
	}{
		{[]string{"f1"}, 5, 100 * time.Millisecond, true},
		{[]string{"f1", "f2"}, 3, 200 * time.Millisecond, true},
		{[]string{"f2", "f1"}, 3, 200 * time.Millisecond, true},
		{[]string{"f1", "plain"}, 5, 100 * time.Millisecond, false},
		{[]string{"f1", "unknown"}, 5, 100 * time.Millisecond, false},
		// 1,000 attempts from 1 s doubling: 11 backoffs (2,047 s) fit in
		// three quarters of the hour a lease is renewed, a 12th does not.
		{[]string{"plain"}, 12, time.Second, false},
		{[]string{"unknown"}, 16, time.Second, false}, // the defaults
	} {
		out := sub(c.topics...)
		p := out.GetBackoffPolicy()
		if p.GetMaxAttempts() != c.attempts || p.GetExponentialBackoff().GetInitial().AsDuration() != c.initial ||
			out.GetSubscription().GetFifo() != c.fifo {
			t.Errorf("%v: told %d attempts from %v, fifo %v; want %d from %v, fifo %v", c.topics, p.GetMaxAttempts(),
				p.GetExponentialBackoff().GetInitial().AsDuration(), out.GetSubscription().GetFifo(), c.attempts, c.initial, c.fifo)
		}
	}
}
