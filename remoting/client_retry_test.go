//go:build !race

package remoting

import (
	"context"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestClientRetryToDeadLetters: a consumer that answers "reconsume later"
// gets the message again through %RETRY%<group>, at level 3 + its reconsume
// count, with RETRY_TOPIC and ORIGIN_MESSAGE_ID; after maxReconsumeTimes
// the message goes to %DLQ%<group>, keeping its ID, keys, tag and
// properties. Another group of the topic gets it once.
func TestClientRetryToDeadLetters(t *testing.T) {
	b := startTest(t, nil)
	p := newProducer(t, b)
	_, got := newPush(t, b, "billing", "orders", consumer.MessageSelector{},
		func(*primitive.MessageExt) consumer.ConsumeResult { return consumer.ConsumeRetryLater },
		consumer.WithMaxReconsumeTimes(2))
	_, other := newPush(t, b, "audit", "orders", consumer.MessageSelector{}, nil)
	msg := primitive.NewMessage("orders", []byte("charge")).WithTag("card").WithKeys([]string{"order-7"})
	msg.WithProperty("amount", "12")
	res, err := p.SendSync(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for i := 0; i < 3; i++ {
		d := waitFor(t, got, 15*time.Second)
		m := d.msg
		if m.MsgId != res.MsgID || m.ReconsumeTimes != int32(i) || m.Topic != "orders" || m.GetTags() != "card" ||
			m.GetKeys() != "order-7" || m.GetProperty("amount") != "12" {
			t.Fatalf("delivery %d: %v (reconsume %d)", i, m, m.ReconsumeTimes)
		}
		if i > 0 {
			if m.GetProperty("RETRY_TOPIC") != "orders" || m.GetProperty("ORIGIN_MESSAGE_ID") != res.MsgID {
				t.Fatalf("retry %d lacks RETRY_TOPIC or ORIGIN_MESSAGE_ID: %v", i, m.GetProperties())
			}
			// Level 3 + the reconsume count it was sent back with.
			if early := last.Add(testLevels[2+i-1]).Sub(d.at); early > 0 {
				t.Fatalf("retry %d came %v early", i, early)
			}
		}
		last = d.at
	}
	// Then the dead letters: wait for the copy in %DLQ%billing.
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, _, ok := b.eng.TopicKind("%DLQ%billing"); ok && b.srv.queueLen("%DLQ%billing", 0) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no dead letter in %s after 15 s", "%DLQ%billing")
		}
		time.Sleep(50 * time.Millisecond)
	}
	vs, err := b.eng.ReadQueue("%DLQ%billing", 0, 0, 10)
	if err != nil || len(vs) != 1 {
		t.Fatalf("dead letters: %v, %v", vs, err)
	}
	dl := vs[0].Message
	if dl.Properties["UNIQ_KEY"] != res.MsgID || dl.Key != "order-7" || dl.Tag != "card" || dl.Properties["amount"] != "12" ||
		dl.Properties["KEYS"] != "order-7" || string(dl.Body) != "charge" || dl.Properties["RETRY_TOPIC"] != "orders" {
		t.Fatalf("dead letter: %+v", dl)
	}
	select {
	case d := <-got:
		t.Fatalf("delivered after dead-lettering: %v", d.msg)
	default:
	}
	if n := b.srv.Requests(codeConsumerSendMsgBack); n != 3 {
		t.Errorf("%d CONSUMER_SEND_MSG_BACK requests, want 3", n)
	}
	if d := waitFor(t, other, 10*time.Second); d.msg.MsgId != res.MsgID || d.msg.ReconsumeTimes != 0 {
		t.Fatalf("other group: %v", d.msg)
	}
}
