//go:build !race

package remoting

import (
	"context"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
)

// TestClientPullPassesOverOtherGroupsMessages: a message for one consumer
// group (a redrive of billing's dead letters) reaches a 4.x pull consumer
// of that group and not one of another group reading the same queues by
// offset; the message after it still reaches both.
func TestClientPullPassesOverOtherGroupsMessages(t *testing.T) {
	b := startTest(t, nil)
	ctx := context.Background()
	if err := b.eng.CreateTopic("orders", engine.TopicConfig{Queues: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.eng.CreateGroup("orders", "billing", engine.GroupConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.eng.SendBatch(ctx, []engine.SendRequest{
		{Message: message.Message{Topic: "orders", Body: []byte("for billing")}, ForGroup: "billing"},
		{Message: message.Message{Topic: "orders", Body: []byte("for all")}},
	}); err != nil {
		t.Fatal(err)
	}
	for group, want := range map[string][]string{"billing": {"for billing", "for all"}, "audit": {"for all"}} {
		c, err := rocketmq.NewPullConsumer(consumer.WithGroupName(group), consumer.WithInstance(instance(t)),
			consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{b.addr})),
			consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Subscribe("orders", consumer.MessageSelector{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		var got []string
		for deadline := time.Now().Add(15 * time.Second); len(got) < len(want) && time.Now().Before(deadline); {
			cr, err := c.Poll(ctx, time.Second)
			if consumer.IsNoNewMsgError(err) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range cr.GetMsgList() {
				got = append(got, string(m.Body))
			}
			c.ACK(ctx, cr, consumer.ConsumeSuccess)
		}
		c.Shutdown()
		// "for all" is the queue's last entry: once it came, whatever
		// the group could get before it has come too.
		if len(got) != len(want) || got[len(got)-1] != "for all" || got[0] != want[0] {
			t.Fatalf("group %s pulled %q, want %q", group, got, want)
		}
	}
}
