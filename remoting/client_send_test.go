//go:build !race

package remoting

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// TestClientTimerProperties: RocketMQ 5's timer properties set the due
// time (TIMER_DELAY_SEC before TIMER_DELAY_MS before TIMER_DELIVER_MS),
// never early; a delivered timer message carries TIMER_OUT_MS,
// TIMER_ENQUEUE_MS and TIMER_DEQUEUE_MS; a delay level removes them.
func TestClientTimerProperties(t *testing.T) {
	b := startTest(t, nil)
	p := newProducer(t, b)
	_, got := newPush(t, b, "timers", "jobs", consumer.MessageSelector{}, nil)
	sent := time.Now()
	at := primitive.NewMessage("jobs", []byte("deliver-ms")).WithDelayTimestamp(sent.Add(800 * time.Millisecond))
	ms := primitive.NewMessage("jobs", []byte("delay-ms"))
	ms.WithProperty("TIMER_DELAY_MS", "600")
	ms.WithProperty("TIMER_DELIVER_MS", strconv.FormatInt(sent.Add(time.Hour).UnixMilli(), 10))
	sec := primitive.NewMessage("jobs", []byte("delay-sec"))
	sec.WithProperty("TIMER_DELAY_SEC", "1")
	sec.WithProperty("TIMER_DELAY_MS", "3600000")
	lvl := primitive.NewMessage("jobs", []byte("level")).WithDelayTimeLevel(1)
	lvl.WithProperty("TIMER_DELAY_SEC", "3600")
	want := map[string]time.Duration{"deliver-ms": 800 * time.Millisecond, "delay-ms": 600 * time.Millisecond,
		"delay-sec": time.Second, "level": testLevels[0]}
	for _, m := range []*primitive.Message{at, ms, sec, lvl} {
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	for range want {
		d := waitFor(t, got, 10*time.Second)
		body := string(d.msg.Body)
		if early := sent.Add(want[body]).Sub(d.at); early > 0 {
			t.Fatalf("%s delivered %v early", body, early)
		}
		if late := d.at.Sub(sent.Add(want[body])); late > 3*time.Second {
			t.Fatalf("%s delivered %v late: a lower-precedence property won", body, late)
		}
		props := d.msg.GetProperties()
		if body == "level" {
			if props["TIMER_DELAY_SEC"] != "" || props["TIMER_OUT_MS"] != "" || props["DELAY"] != "1" {
				t.Fatalf("level message kept timer properties: %v", props)
			}
			continue
		}
		for _, k := range []string{"TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "REAL_TOPIC"} {
			if props[k] == "" {
				t.Fatalf("%s lacks %s: %v", body, k, props)
			}
		}
	}
}

// TestClientSendKinds: batch, one-way and async sends, each message
// delivered once.
func TestClientSendKinds(t *testing.T) {
	b := startTest(t, nil)
	p := newProducer(t, b)
	_, got := newPush(t, b, "kinds", "mixed", consumer.MessageSelector{}, nil)
	ctx := context.Background()
	batch := []*primitive.Message{primitive.NewMessage("mixed", []byte("b1")), primitive.NewMessage("mixed", []byte("b2")),
		primitive.NewMessage("mixed", []byte("b3"))}
	if res, err := p.SendSync(ctx, batch...); err != nil || res.Status != primitive.SendOK {
		t.Fatalf("batch: %v, %v", res, err)
	}
	if b.srv.Requests(codeSendBatchMessage) != 1 {
		t.Fatalf("the batch did not go as SEND_BATCH_MESSAGE")
	}
	if err := p.SendOneWay(ctx, primitive.NewMessage("mixed", []byte("oneway"))); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	var asyncErr error
	err := p.SendAsync(ctx, func(ctx context.Context, r *primitive.SendResult, err error) {
		asyncErr = err
		wg.Done()
	}, primitive.NewMessage("mixed", []byte("async")))
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if asyncErr != nil {
		t.Fatal(asyncErr)
	}
	seen := map[string]int{}
	for i := 0; i < 5; i++ {
		seen[string(waitFor(t, got, 10*time.Second).msg.Body)]++
	}
	for _, body := range []string{"b1", "b2", "b3", "oneway", "async"} {
		if seen[body] != 1 {
			t.Fatalf("deliveries %v", seen)
		}
	}
}

// TestClientTagFilter: a subscription by tags gets only those tags.
func TestClientTagFilter(t *testing.T) {
	b := startTest(t, nil)
	p := newProducer(t, b)
	_, got := newPush(t, b, "sms", "notices", consumer.MessageSelector{Type: consumer.TAG, Expression: "sms || push"}, nil)
	for _, tag := range []string{"mail", "sms", "fax", "push"} {
		if _, err := p.SendSync(context.Background(), primitive.NewMessage("notices", []byte(tag)).WithTag(tag)); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for i := 0; i < 2; i++ {
		seen[waitFor(t, got, 10*time.Second).msg.GetTags()] = true
	}
	if !seen["sms"] || !seen["push"] {
		t.Fatalf("got %v", seen)
	}
	// The other two were filtered: a marker sent after them arrives next.
	if _, err := p.SendSync(context.Background(), primitive.NewMessage("notices", []byte("end")).WithTag("sms")); err != nil {
		t.Fatal(err)
	}
	if d := waitFor(t, got, 10*time.Second); string(d.msg.Body) != "end" {
		t.Fatalf("got %q, want the marker", d.msg.Body)
	}
}

// TestClientSQLFilterRefused: SQL92 filtering answers clearly that it is
// not supported, naming the group; the heartbeat's other consumer group and
// its producer group are recorded all the same (one client instance
// heartbeats for all of a process's groups).
func TestClientSQLFilterRefused(t *testing.T) {
	b := startTest(t, nil)
	c := &Command{Code: codeHeartBeat, Body: []byte(`{"clientID":"c1","producerDataSet":[{"groupName":"pg"}],"consumerDataSet":[` +
		`{"groupName":"g","messageModel":"CLUSTERING","subscriptionDataSet":[{"topic":"t","subString":"a > 1","expressionType":"SQL92"}]},` +
		`{"groupName":"tagged","messageModel":"CLUSTERING","subscriptionDataSet":[{"topic":"t","subString":"x","expressionType":"TAG"}]}]}`)}
	resp := b.request(t, c)
	if resp.Code != respSubscriptionParse || !strings.Contains(resp.Remark, `"g"`) || !strings.Contains(resp.Remark, "SQL92") {
		t.Fatalf("got %d %q", resp.Code, resp.Remark)
	}
	// The request's connection is closed by now: members were dropped
	// with it, so ask on a connection that stays open.
	nc, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	exchange(t, nc, c)
	if m := b.srv.clients.members("tagged"); len(m) != 1 || len(b.srv.clients.members("g")) != 0 || b.srv.clients.producer("pg") == nil {
		t.Fatalf("members: tagged %v, g %v; producer pg %v", m, b.srv.clients.members("g"), b.srv.clients.producer("pg"))
	}
	if _, _, ok := b.eng.TopicKind("%RETRY%tagged"); !ok {
		t.Fatal("the TAG group's retry topic was not created")
	}
}

// TestClientSQLConsumerBesideOthers: a SQL92 push consumer, refused, does
// not stop the other consumers of its client instance (one heartbeat
// carries them all, as with the clients' default instance name).
func TestClientSQLConsumerBesideOthers(t *testing.T) {
	b := startTest(t, nil)
	shared := instance(t)
	ns := consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{b.addr}))
	sq, err := rocketmq.NewPushConsumer(consumer.WithGroupName("bysql"), consumer.WithInstance(shared), ns)
	if err != nil {
		t.Fatal(err)
	}
	err = sq.Subscribe("sqltopic", consumer.MessageSelector{Type: consumer.SQL92, Expression: "a > 1"},
		func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := sq.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Shutdown() })
	_, got := newPush(t, b, "bytag", "tagtopic", consumer.MessageSelector{}, nil, consumer.WithInstance(shared))
	p := newProducer(t, b, producer.WithInstanceName(shared))
	if _, err := p.SendSync(context.Background(), primitive.NewMessage("tagtopic", []byte("hello"))); err != nil {
		t.Fatal(err)
	}
	if d := waitFor(t, got, 15*time.Second); string(d.msg.Body) != "hello" {
		t.Fatalf("got %q", d.msg.Body)
	}
	if m := b.srv.clients.members("bysql"); len(m) != 0 {
		t.Fatalf("the SQL92 group was registered: %v", m)
	}
}

// TestClientConcurrentSenders: 16 producers sending at once are all
// answered OK (RocketMQ once answered "broker busy", which the Go client
// does not retry): the broker holds requests back instead of refusing.
func TestClientConcurrentSenders(t *testing.T) {
	b := startTest(t, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 16*25)
	for i := 0; i < 16; i++ {
		p := newProducer(t, b)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 25; j++ {
				m := primitive.NewMessage("busy", []byte("x")).WithDelayTimeLevel(1 + j%3)
				if _, err := p.SendSync(context.Background(), m); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := b.srv.Requests(codeSendMessageV2) + b.srv.Requests(codeSendMessage); n < 16*25 {
		t.Fatalf("%d sends served, want %d", n, 16*25)
	}
}

// TestClientCompressedBody: a body the client compresses (over its 4 KiB
// threshold) reaches the consumer as sent.
func TestClientCompressedBody(t *testing.T) {
	b := startTest(t, nil)
	p := newProducer(t, b)
	_, got := newPush(t, b, "big", "large", consumer.MessageSelector{}, nil)
	body := []byte(strings.Repeat("hourglass ", 2000))
	if _, err := p.SendSync(context.Background(), primitive.NewMessage("large", body)); err != nil {
		t.Fatal(err)
	}
	d := waitFor(t, got, 10*time.Second)
	if string(d.msg.Body) != string(body) {
		t.Fatalf("got %d bytes, want the %d sent", len(d.msg.Body), len(body))
	}
	// Delivered, so visible in its queue: stored compressed, flagged.
	vs, err := b.eng.ReadQueue("large", 0, 0, 1)
	for q := 1; err == nil && len(vs) == 0 && q < 4; q++ {
		vs, err = b.eng.ReadQueue("large", q, 0, 1)
	}
	if err != nil || len(vs) != 1 || len(vs[0].Message.Body) >= len(body) || vs[0].Message.Properties[hidSysFlag] != "1" {
		t.Fatalf("stored: %v, %v: want the compressed body, flagged", len(vs), err)
	}
}
