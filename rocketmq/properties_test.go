package rocketmq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	hgbroker "github.com/hourglass-mq/hourglass/broker"
)

// propsMessage is a message with n user properties and two keys.
func propsMessage(topic string, n int) *rmq.Message {
	m := &rmq.Message{Topic: topic, Body: []byte(fmt.Sprintf("%d properties", n))}
	m.SetKeys("order-1", "customer-7")
	for i := range n {
		m.AddProperty(fmt.Sprintf("p%03d", i), "v")
	}
	return m
}

// TestUserPropertiesUpToRocketMQsLimit: RocketMQ allows 128 user
// properties besides its system ones. The adapter's own properties (keys,
// born time and host) counted against the engine's limit of 64, so a
// client could send only 62 (61 with keys), and the error counted what
// the adapter added. Now 128 with keys go through and arrive, 129 are
// refused with MESSAGE_PROPERTIES_TOO_LARGE saying 129 and naming the
// limit of 128.
func TestUserPropertiesUpToRocketMQsLimit(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	p := newProducer(t, b, "props")
	c := newConsumer(t, b, "g", "props", 2*time.Second)
	rs, err := p.Send(context.Background(), propsMessage("props", 128))
	if err != nil {
		t.Fatalf("128 user properties and keys: %v", err)
	}
	receiveUntil(t, c, 15*time.Second, 20*time.Second, true, func(mv *rmq.MessageView, _ time.Time) bool {
		if got := len(mv.GetProperties()); got != 128 {
			t.Errorf("received %d properties, want the 128 sent", got)
		}
		if k := mv.GetKeys(); len(k) != 2 {
			t.Errorf("received keys %v", k)
		}
		return mv.GetMessageId() == rs[0].MessageID
	})
	_, err = p.Send(context.Background(), propsMessage("props", 129))
	if code := rpcCode(err); code != int32(pb.Code_MESSAGE_PROPERTIES_TOO_LARGE) ||
		!strings.Contains(err.Error(), "129 properties") || !strings.Contains(err.Error(), "is 128") {
		t.Fatalf("129 user properties: %v (code %d); want MESSAGE_PROPERTIES_TOO_LARGE counting 129 against 128", err, code)
	}
}

// TestMaxPropertiesSetting: -max-properties raises the engine's limit,
// for RocketMQ clients as for every other.
func TestMaxPropertiesSetting(t *testing.T) {
	t.Parallel()
	b := startBroker(t, func(c *hgbroker.Config) { c.MaxProperties = 300 })
	p := newProducer(t, b, "props")
	if _, err := p.Send(context.Background(), propsMessage("props", 300)); err != nil {
		t.Fatalf("300 user properties under -max-properties 300: %v", err)
	}
	if _, err := p.Send(context.Background(), propsMessage("props", 301)); rpcCode(err) != int32(pb.Code_MESSAGE_PROPERTIES_TOO_LARGE) {
		t.Fatalf("301 under -max-properties 300: %v", err)
	}
}
