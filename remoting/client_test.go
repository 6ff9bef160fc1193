//go:build !race

// The official Go client (rocketmq-client-go/v2) races inside itself (its
// push consumer's process queues and rebalance share state without locks),
// so these tests build without -race only: `go test -run Client ./remoting`.

package remoting

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

func newProducer(t *testing.T, b *testBroker, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	opts = append([]producer.Option{producer.WithNsResolver(primitive.NewPassthroughResolver([]string{b.addr})),
		producer.WithInstanceName(instance(t)), producer.WithRetry(2)}, opts...)
	p, err := rocketmq.NewProducer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown() })
	return p
}

// newProducerNoStartCheck starts a producer whose sends are expected to fail.
func newProducerNoStartCheck(t *testing.T, b *testBroker, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	opts = append([]producer.Option{producer.WithNsResolver(primitive.NewPassthroughResolver([]string{b.addr})),
		producer.WithInstanceName(instance(t)), producer.WithRetry(0)}, opts...)
	p, err := rocketmq.NewProducer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	t.Cleanup(func() { p.Shutdown() })
	return p
}

type delivery struct {
	msg *primitive.MessageExt
	at  time.Time
}

// newPush starts a push consumer of group on topic whose listener hands
// each message to the returned channel and answers with result.
func newPush(t *testing.T, b *testBroker, group, topic string, sel consumer.MessageSelector,
	result func(*primitive.MessageExt) consumer.ConsumeResult, opts ...consumer.Option) (rocketmq.PushConsumer, chan delivery) {
	t.Helper()
	got := make(chan delivery, 1024)
	opts = append([]consumer.Option{consumer.WithGroupName(group), consumer.WithInstance(instance(t)),
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{b.addr}))}, opts...)
	c, err := rocketmq.NewPushConsumer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, sel, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		now := time.Now()
		res := consumer.ConsumeSuccess
		for _, m := range msgs {
			got <- delivery{m, now}
			if result != nil && result(m) != consumer.ConsumeSuccess {
				res = consumer.ConsumeRetryLater
			}
		}
		return res, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Shutdown() })
	return c, got
}

func waitFor(t *testing.T, ch chan delivery, d time.Duration) delivery {
	t.Helper()
	select {
	case x := <-ch:
		return x
	case <-time.After(d):
		t.Fatalf("nothing delivered in %v", d)
	}
	return delivery{}
}

// TestClientDelayLevel: the official Go client's delay-level producer and
// push consumer, as in its own example: the message comes back no earlier
// than its level, with its ID, keys, tag and properties, and the
// properties RocketMQ adds (DELAY, REAL_TOPIC, REAL_QID).
func TestClientDelayLevel(t *testing.T) {
	b := startTest(t, nil)
	p := newProducer(t, b)
	_, got := newPush(t, b, "notifier", "reminders", consumer.MessageSelector{}, nil)
	msg := primitive.NewMessage("reminders", []byte("remind me"))
	msg.WithDelayTimeLevel(3).WithTag("sms").WithKeys([]string{"order-1", "user-9"})
	msg.WithProperty("tenant", "acme")
	sent := time.Now()
	res, err := p.SendSync(context.Background(), msg)
	if err != nil || res.Status != primitive.SendOK {
		t.Fatalf("send: %v, %v", res, err)
	}
	d := waitFor(t, got, 15*time.Second)
	if early := sent.Add(testLevels[2]).Sub(d.at); early > 0 {
		t.Fatalf("delivered %v early", early)
	}
	m := d.msg
	if m.MsgId != res.MsgID || string(m.Body) != "remind me" || m.GetTags() != "sms" || m.GetKeys() != "order-1 user-9" ||
		m.GetProperty("tenant") != "acme" || m.GetProperty("DELAY") != "3" || m.GetProperty("REAL_TOPIC") != "reminders" ||
		m.GetProperty("REAL_QID") == "" || m.Topic != "reminders" {
		t.Fatalf("got %v (ID %s), want ID %s with its keys, tag and properties", m, m.MsgId, res.MsgID)
	}
	// The first key is hourglass's: the message is found by topic and key,
	// and the offset message ID holds the handle of its position.
	info, err := b.eng.InspectKey("reminders", "order-1")
	if err != nil || offsetMsgID(b.addr, b.srv.handles.seal(info.ID.Pos)) != res.OffsetMsgID {
		t.Fatalf("inspect by key: %+v, %v; send result %s", info, err, res.OffsetMsgID)
	}
}

// TestClientDelayLevelPastTable: a level above the table's length is its
// last level, as in RocketMQ: delivered no earlier than the last level,
// and saying the last level in DELAY, as RocketMQ's broker rewrites it.
func TestClientDelayLevelPastTable(t *testing.T) {
	b := startTest(t, nil)
	p := newProducer(t, b)
	_, got := newPush(t, b, "late", "capped", consumer.MessageSelector{}, nil)
	sent := time.Now()
	if _, err := p.SendSync(context.Background(), primitive.NewMessage("capped", []byte("x")).WithDelayTimeLevel(99)); err != nil {
		t.Fatal(err)
	}
	d := waitFor(t, got, 15*time.Second)
	last := testLevels[len(testLevels)-1]
	if early := sent.Add(last).Sub(d.at); early > 0 {
		t.Fatalf("delivered %v before the last level", early)
	}
	if late := d.at.Sub(sent.Add(last)); late > 5*time.Second {
		t.Fatalf("delivered %v after the last level", late)
	}
	if lv := d.msg.GetProperty("DELAY"); lv != strconv.Itoa(len(testLevels)) {
		t.Fatalf("DELAY is %q, want the last level, %d", lv, len(testLevels))
	}
}

// TestClientQueries: QUERY_MESSAGE finds a message by its first key, and
// by its message ID or its offset message ID (the clients' unique-key
// query); VIEW_MESSAGE_BY_ID by the offset of its offset message ID; each
// in a body the client's own decoder reads. An ID, offset ID or key never
// handed out, or of another topic, finds nothing.
func TestClientQueries(t *testing.T) {
	b := startTest(t, nil)
	p := newProducer(t, b)
	keyed, err := p.SendSync(context.Background(), primitive.NewMessage("shop", []byte("keyed")).WithKeys([]string{"cart-1"}).WithTag("t1"))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := p.SendSync(context.Background(), primitive.NewMessage("shop", []byte("plain")).WithDelayTimeLevel(7))
	if err != nil {
		t.Fatal(err)
	}
	query := func(topic, key string, uniq bool) *Command {
		ext := map[string]string{"topic": topic, "key": key, "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "9999999999999"}
		if uniq {
			ext["_UNIQUE_KEY_QUERY"] = "true"
		}
		return b.request(t, &Command{Code: codeQueryMessage, ExtFields: ext})
	}
	view := func(topic, offsetID string) *Command {
		h, _ := handleOf(offsetID)
		return b.request(t, &Command{Code: codeViewMessageByID, ExtFields: map[string]string{"topic": topic, "offset": strconv.FormatInt(int64(h), 10)}})
	}
	found := func(how string, resp *Command, want *primitive.SendResult, body string) {
		t.Helper()
		if resp.Code != respSuccess {
			t.Fatalf("%s: %d %q", how, resp.Code, resp.Remark)
		}
		ms := primitive.DecodeMessage(resp.Body)
		if len(ms) != 1 || ms[0].MsgId != want.MsgID || string(ms[0].Body) != body || ms[0].OffsetMsgId != want.OffsetMsgID {
			t.Fatalf("%s: %v", how, ms)
		}
	}
	found("by key", query("shop", "cart-1", false), keyed, "keyed")
	found("by the ID of a keyed message", query("shop", keyed.MsgID, true), keyed, "keyed")
	found("by the ID of a message without keys", query("shop", plain.MsgID, true), plain, "plain")
	found("by offset ID", query("shop", plain.OffsetMsgID, true), plain, "plain")
	found("view by offset", view("shop", keyed.OffsetMsgID), keyed, "keyed")
	flip := func(s string, i int) string {
		c := byte('0')
		if s[i] == '0' {
			c = '1'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	for _, bad := range []*Command{
		query("shop", "cart-2", false),
		query("shop", flip(plain.MsgID, len(plain.MsgID)-16), true),
		query("shop", flip(plain.OffsetMsgID, len(plain.OffsetMsgID)-15), true),
		query("other", plain.MsgID, true),
		view("shop", flip(keyed.OffsetMsgID, len(keyed.OffsetMsgID)-1)),
		view("other", keyed.OffsetMsgID),
		b.request(t, &Command{Code: codeViewMessageByID, ExtFields: map[string]string{"offset": "0"}}),
	} {
		if bad.Code != respQueryNotFound {
			t.Fatalf("a forged or foreign ID: %d %q, want not found", bad.Code, bad.Remark)
		}
	}
}
