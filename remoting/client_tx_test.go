//go:build !race

package remoting

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// txListener commits, rolls back or leaves open by body, and answers a
// check of an open one with commit.
type txListener struct{ checked atomic.Int32 }

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	switch string(m.Body) {
	case "commit":
		return primitive.CommitMessageState
	case "rollback":
		return primitive.RollbackMessageState
	}
	return primitive.UnkonwnState
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.checked.Add(1)
	return primitive.CommitMessageState
}

// TestClientTransactions: the official transactional producer's half
// messages: a committed one is delivered (after its delay level, counted
// from the commit), a rolled-back one never, and one left open is checked
// back with the producer and committed by its answer.
func TestClientTransactions(t *testing.T) {
	b := startTest(t, func(o *Options) {
		o.TransactionTimeout, o.TransactionCheckInterval = 300*time.Millisecond, 100*time.Millisecond
	})
	l := &txListener{}
	p, err := rocketmq.NewTransactionProducer(l, producer.WithNsResolver(primitive.NewPassthroughResolver([]string{b.addr})),
		producer.WithInstanceName(instance(t)), producer.WithGroupName("orders-tx"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown() })
	_, got := newPush(t, b, "fulfil", "placed", consumer.MessageSelector{}, nil)
	ids := map[string]string{}
	sentAt := map[string]time.Time{}
	// Eight left open: their checks carry handles, half of which are over
	// 2^63 and must still parse as the clients' signed 64-bit numbers.
	bodies := []string{"rollback", "commit"}
	for i := 0; i < 8; i++ {
		bodies = append(bodies, fmt.Sprint("unknown-", i))
	}
	for _, body := range bodies {
		m := primitive.NewMessage("placed", []byte(body))
		if body == "commit" {
			m.WithDelayTimeLevel(2)
		}
		sentAt[body] = time.Now()
		res, err := p.SendMessageInTransaction(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		ids[body] = res.MsgID
	}
	seen := map[string]delivery{}
	for len(seen) < 9 {
		d := waitFor(t, got, 15*time.Second)
		seen[string(d.msg.Body)] = d
	}
	if _, ok := seen["rollback"]; ok {
		t.Fatal("a rolled-back message was delivered")
	}
	c, ok := seen["commit"]
	if !ok || c.msg.MsgId != ids["commit"] || c.at.Before(sentAt["commit"].Add(testLevels[1])) {
		t.Fatalf("committed message: %+v", c)
	}
	for i := 0; i < 8; i++ {
		body := fmt.Sprint("unknown-", i)
		if u, ok := seen[body]; !ok || u.msg.MsgId != ids[body] {
			t.Fatalf("open message %s: %+v, %d checks", body, u, l.checked.Load())
		}
	}
	// The rolled-back one stays out: a marker committed after it is the
	// next delivery.
	if _, err := p.SendMessageInTransaction(context.Background(), primitive.NewMessage("placed", []byte("commit"))); err != nil {
		t.Fatal(err)
	}
	if d := waitFor(t, got, 15*time.Second); string(d.msg.Body) != "commit" {
		t.Fatalf("got %q after the marker", d.msg.Body)
	}
}
