//go:build !race

package remoting

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestClientUserPropertiesBesideRocketMQs: a 4.x client's message carries
// RocketMQ's own properties (UNIQ_KEY, WAIT, KEYS, DELAY, ...) and the
// adapter's hidden ones beside the user's. None of them counts against the
// user's 128: a delayed message with 128 user properties and keys is
// sent and arrives with all of them; a 129th is refused.
func TestClientUserPropertiesBesideRocketMQs(t *testing.T) {
	b := startTest(t, nil)
	p := newProducer(t, b)
	_, got := newPush(t, b, "g", "props", consumer.MessageSelector{}, nil)
	msg := func(n int) *primitive.Message {
		m := primitive.NewMessage("props", []byte("props"))
		m.WithDelayTimeLevel(1).WithKeys([]string{"order-1"}).WithTag("t")
		for i := range n {
			m.WithProperty(fmt.Sprintf("p%03d", i), "v")
		}
		return m
	}
	res, err := p.SendSync(context.Background(), msg(128))
	if err != nil || res.Status != primitive.SendOK {
		t.Fatalf("128 user properties: %v, %v", res, err)
	}
	d := waitFor(t, got, 15*time.Second)
	for i := range 128 {
		if k := fmt.Sprintf("p%03d", i); d.msg.GetProperty(k) != "v" {
			t.Fatalf("property %s missing from the delivered message", k)
		}
	}
	if res, err := p.SendSync(context.Background(), msg(129)); err == nil && res.Status == primitive.SendOK {
		t.Fatal("129 user properties were accepted")
	}
}
