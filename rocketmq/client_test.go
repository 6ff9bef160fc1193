package rocketmq_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"

	hgbroker "github.com/hourglass-mq/hourglass/broker"
	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/internal/clitest"
)

// TestMain turns the official client's file logging into errors on the
// console (it writes under the home directory by default) and its TLS off:
// the brokers of the tests serve plaintext, but for the TLS test.
func TestMain(m *testing.M) {
	clitest.RunIfChild() // a broker process a kill test started (kill_test.go)
	os.Setenv("mq.consoleAppender.enabled", "true")
	os.Setenv("rocketmq.client.logLevel", "error")
	rmq.ResetLogger()
	rmq.EnableSsl = false
	os.Exit(m.Run())
}

// addrCatcher is a slog handler that keeps the gRPC address Run logs.
type addrCatcher struct {
	mu   sync.Mutex
	addr string
}

func (h *addrCatcher) Enabled(context.Context, slog.Level) bool { return true }
func (h *addrCatcher) Handle(_ context.Context, r slog.Record) error {
	if r.Message == hgbroker.GRPCListeningMsg {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "addr" {
				h.mu.Lock()
				h.addr = a.Value.String()
				h.mu.Unlock()
			}
			return true
		})
	}
	return nil
}
func (h *addrCatcher) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *addrCatcher) WithGroup(string) slog.Handler      { return h }

// broker is a hourglass server started in-process on loopback.
type broker struct {
	grpc, http, dataDir string
}

// launch runs hgbroker.Run on free ports, plaintext gRPC unless edit says
// otherwise, and returns the broker and the function that shuts it down
// and returns Run's result (it fails the test after 8 s).
func launch(t *testing.T, edit func(*hgbroker.Config)) (broker, func() error) {
	t.Helper()
	cfg := hgbroker.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.GRPCListen = "127.0.0.1:0"
	cfg.GRPCPlaintext = true
	cfg.DrainTimeout = time.Second
	if edit != nil {
		edit(&cfg)
	}
	h := &addrCatcher{}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- hgbroker.Run(ctx, cfg, slog.New(h), func(a string) { ready <- a }) }()
	var b broker
	select {
	case b.http = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("server did not start: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("server did not start in 10s")
	}
	h.mu.Lock()
	b.grpc = h.addr
	h.mu.Unlock()
	b.dataDir = cfg.DataDir
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(8 * time.Second):
			t.Error("server did not stop in 8s")
			return nil
		}
	}
	if b.grpc == "" {
		stop()
		t.Fatal("the gRPC service did not report its address")
	}
	return b, stop
}

// startBroker launches a broker that stops when the test ends.
func startBroker(t *testing.T, edit func(*hgbroker.Config)) broker {
	t.Helper()
	b, stop := launch(t, edit)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("hgbroker.Run: %v", err)
		}
	})
	return b
}

func creds() *credentials.SessionCredentials { return &credentials.SessionCredentials{} }

func newProducer(t *testing.T, b broker, topics ...string) rmq.Producer {
	t.Helper()
	p, err := rmq.NewProducer(&rmq.Config{Endpoint: b.grpc, Credentials: creds()}, rmq.WithTopics(topics...))
	if err != nil {
		t.Fatal(err)
	}
	startBounded(t, p.Start)
	t.Cleanup(func() { p.GracefulStop() })
	return p
}

func newConsumer(t *testing.T, b broker, group, topic string, await time.Duration) rmq.SimpleConsumer {
	t.Helper()
	c := newConsumerNoCleanup(t, b, group, topic, await)
	t.Cleanup(func() { c.GracefulStop() })
	return c
}

// newConsumerNoCleanup is newConsumer for a consumer the test stops itself.
func newConsumerNoCleanup(t *testing.T, b broker, group, topic string, await time.Duration) rmq.SimpleConsumer {
	t.Helper()
	c, err := rmq.NewSimpleConsumer(&rmq.Config{Endpoint: b.grpc, ConsumerGroup: group, Credentials: creds()},
		rmq.WithSimpleAwaitDuration(await),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{topic: rmq.SUB_ALL}))
	if err != nil {
		t.Fatal(err)
	}
	startBounded(t, c.Start)
	return c
}

// startBounded runs a client's Start, which waits for the broker's
// settings, and fails the test if it takes more than 10 s.
func startBounded(t *testing.T, start func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- start() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return in 10s: the broker did not answer the settings")
	}
}

// rpcCode returns the RocketMQ status code of a client error (0 if none).
func rpcCode(err error) int32 {
	var e *rmq.ErrRpcStatus
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// receiveUntil receives until pick has seen what it wants or the deadline
// passes; every message received is acked and passed to pick, which says
// whether to stop.
func receiveUntil(t *testing.T, c rmq.SimpleConsumer, within time.Duration, invisible time.Duration, ack bool, pick func(*rmq.MessageView, time.Time) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		mvs, err := c.Receive(context.Background(), 16, invisible)
		if err != nil && rpcCode(err) != int32(pb.Code_MESSAGE_NOT_FOUND) {
			t.Fatalf("Receive: %v", err)
		}
		now := time.Now()
		for _, mv := range mvs {
			if ack {
				if err := c.Ack(context.Background(), mv); err != nil {
					t.Fatalf("Ack: %v", err)
				}
			}
			if pick(mv, now) {
				return
			}
		}
	}
	t.Fatalf("not received within %v", within)
}

func TestSendReceiveAck(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	p := newProducer(t, b, "orders")
	c := newConsumer(t, b, "billing", "orders", time.Second)
	msg := &rmq.Message{Topic: "orders", Body: []byte("order 1 created")}
	msg.SetKeys("order-1", "customer-7")
	msg.SetTag("created")
	msg.AddProperty("region", "eu")
	rs, err := p.Send(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].MessageID == "" || rs[0].RecallHandle != "" {
		t.Fatalf("receipts %+v: want one with the message ID and no recall handle (not delayed)", rs)
	}
	var got *rmq.MessageView
	receiveUntil(t, c, 10*time.Second, 20*time.Second, true, func(mv *rmq.MessageView, _ time.Time) bool { got = mv; return true })
	if got.GetMessageId() != rs[0].MessageID || string(got.GetBody()) != "order 1 created" {
		t.Errorf("got %s %q, want %s %q", got.GetMessageId(), got.GetBody(), rs[0].MessageID, "order 1 created")
	}
	if got.GetTag() == nil || *got.GetTag() != "created" || strings.Join(got.GetKeys(), ",") != "order-1,customer-7" ||
		got.GetProperties()["region"] != "eu" || got.GetDeliveryAttempt() != 1 {
		t.Errorf("tag %v keys %v properties %v attempt %d", got.GetTag(), got.GetKeys(), got.GetProperties(), got.GetDeliveryAttempt())
	}
	if _, hidden := got.GetProperties()["rocketmq.keys"]; hidden {
		t.Error("the adapter's own properties leak into the user properties")
	}
	// Acked: the next long poll ends empty.
	if mvs, err := c.Receive(context.Background(), 16, 20*time.Second); rpcCode(err) != int32(pb.Code_MESSAGE_NOT_FOUND) {
		t.Fatalf("receive after ack: %d messages, err %v; want MESSAGE_NOT_FOUND", len(mvs), err)
	}
	// Per-RPC metrics are on /metrics.
	resp, err := http.Get("http://" + b.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`hourglass_rocketmq_requests_total{code="OK",method="SendMessage"} 1`, `method="AckMessage"`, `code="MESSAGE_NOT_FOUND",method="ReceiveMessage"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestDelayArrivesNoEarlier(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	p := newProducer(t, b, "timeouts")
	c := newConsumer(t, b, "closer", "timeouts", 2*time.Second)
	due := time.Now().Add(3 * time.Second)
	msg := &rmq.Message{Topic: "timeouts", Body: []byte("close order 2")}
	msg.SetDelayTimestamp(due)
	rs, err := p.Send(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].RecallHandle == "" {
		t.Fatal("a delayed message's receipt has no recall handle")
	}
	receiveUntil(t, c, 15*time.Second, 20*time.Second, true, func(mv *rmq.MessageView, at time.Time) bool {
		if at.Before(due) {
			t.Errorf("delivered %v before its delivery time", due.Sub(at))
		}
		if dt := mv.GetDeliveryTimestamp(); dt == nil || dt.UnixMilli() != clock.CeilUnixMilli(due) {
			t.Errorf("delivery timestamp %v, want %v", dt, due)
		}
		return mv.GetMessageId() == rs[0].MessageID
	})
}

func TestRecallBeforeDueIsNeverDelivered(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	p := newProducer(t, b, "timeouts", "other")
	c := newConsumer(t, b, "closer", "timeouts", 2*time.Second)
	due := time.Now().Add(time.Second)
	send := func(body string, at time.Time) *rmq.SendReceipt {
		msg := &rmq.Message{Topic: "timeouts", Body: []byte(body)}
		msg.SetDelayTimestamp(at)
		rs, err := p.Send(context.Background(), msg)
		if err != nil {
			t.Fatal(err)
		}
		return rs[0]
	}
	recalled := send("paid in time", due)
	// The witness falls due just after: once it is delivered, the recalled
	// message would have been too (due messages become visible in order).
	witness := send("witness", due.Add(10*time.Millisecond))
	if id, err := p.Recall(context.Background(), "timeouts", recalled.RecallHandle); err != nil || id != recalled.MessageID {
		t.Fatalf("Recall: %q, %v; want %q", id, err, recalled.MessageID)
	}
	// A second recall, a forged handle, and a handle of another topic.
	if _, err := p.Recall(context.Background(), "timeouts", recalled.RecallHandle); rpcCode(err) != int32(pb.Code_PRECONDITION_FAILED) {
		t.Errorf("second recall: %v; want PRECONDITION_FAILED", err)
	}
	forged := []byte(witness.RecallHandle)
	forged[len(forged)-1] ^= 1
	if forged[len(forged)-1] > 'f' || forged[len(forged)-1] < '0' {
		forged[len(forged)-1] = '0'
	}
	for _, c := range []struct{ topic, handle string }{{"timeouts", string(forged)}, {"timeouts", "not-a-handle"}, {"other", witness.RecallHandle}} {
		if _, err := p.Recall(context.Background(), c.topic, c.handle); rpcCode(err) != int32(pb.Code_MESSAGE_NOT_FOUND) {
			t.Errorf("recall %q in %s: %v; want MESSAGE_NOT_FOUND", c.handle, c.topic, err)
		}
	}
	receiveUntil(t, c, 15*time.Second, 20*time.Second, true, func(mv *rmq.MessageView, _ time.Time) bool {
		if mv.GetMessageId() == recalled.MessageID {
			t.Error("the recalled message was delivered")
		}
		return mv.GetMessageId() == witness.MessageID
	})
}

func TestInvisibleDurationExpiryRedelivers(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	p := newProducer(t, b, "jobs")
	c := newConsumer(t, b, "workers", "jobs", 2*time.Second)
	rs, err := p.Send(context.Background(), &rmq.Message{Topic: "jobs", Body: []byte("job")})
	if err != nil {
		t.Fatal(err)
	}
	var attempts []int32
	receiveUntil(t, c, 15*time.Second, time.Second, false, func(mv *rmq.MessageView, _ time.Time) bool {
		if mv.GetMessageId() != rs[0].MessageID {
			t.Fatalf("unexpected message %s", mv.GetMessageId())
		}
		attempts = append(attempts, mv.GetDeliveryAttempt())
		if len(attempts) == 2 {
			if err := c.Ack(context.Background(), mv); err != nil {
				t.Fatal(err)
			}
			return true
		}
		return false
	})
	if fmt.Sprint(attempts) != "[1 2]" {
		t.Fatalf("attempts %v, want [1 2]", attempts)
	}
}

func TestDelayBeyondMaximumIsRefused(t *testing.T) {
	t.Parallel()
	b := startBroker(t, func(c *hgbroker.Config) { c.MaxDelay = time.Hour; c.DelayLevels = []time.Duration{time.Second} })
	p := newProducer(t, b, "timeouts")
	msg := &rmq.Message{Topic: "timeouts", Body: []byte("too late")}
	msg.SetDelayTimestamp(time.Now().Add(2 * time.Hour))
	_, err := p.Send(context.Background(), msg)
	if rpcCode(err) != int32(pb.Code_ILLEGAL_DELIVERY_TIME) || !strings.Contains(err.Error(), "1h0m0s") {
		t.Fatalf("send beyond the maximum delay: %v; want ILLEGAL_DELIVERY_TIME naming the 1h limit", err)
	}
}

func TestFIFOOrderWithinGroup(t *testing.T) {
	t.Parallel()
	b := startBroker(t, nil)
	p := newProducer(t, b, "ledger")
	c := newConsumer(t, b, "posting", "ledger", 2*time.Second)
	var want []string
	for i := range 5 {
		msg := &rmq.Message{Topic: "ledger", Body: []byte(fmt.Sprint("entry ", i))}
		msg.SetMessageGroup("account-1")
		rs, err := p.Send(context.Background(), msg)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, rs[0].MessageID)
	}
	var got []string
	receiveUntil(t, c, 15*time.Second, 20*time.Second, true, func(mv *rmq.MessageView, _ time.Time) bool {
		if g := mv.GetMessageGroup(); g == nil || *g != "account-1" {
			t.Errorf("message group %v", g)
		}
		got = append(got, mv.GetMessageId())
		return len(got) == len(want)
	})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

// TestTLSWithClientDefaults runs the official client with its defaults
// (TLS, certificate not checked) against the default gRPC port setup: TLS
// with the self-signed certificate kept in the data directory. Not
// parallel: the client's TLS switch is a package variable.
func TestTLSWithClientDefaults(t *testing.T) {
	rmq.EnableSsl = true
	defer func() { rmq.EnableSsl = false }()
	b := startBroker(t, func(c *hgbroker.Config) { c.GRPCPlaintext = false })
	if _, err := os.Stat(b.dataDir + "/grpc-tls/cert.pem"); err != nil {
		t.Fatalf("no self-signed certificate in the data directory: %v", err)
	}
	p := newProducer(t, b, "secure")
	c := newConsumer(t, b, "g", "secure", time.Second)
	rs, err := p.Send(context.Background(), &rmq.Message{Topic: "secure", Body: []byte("over TLS")})
	if err != nil {
		t.Fatal(err)
	}
	receiveUntil(t, c, 10*time.Second, 20*time.Second, true, func(mv *rmq.MessageView, _ time.Time) bool {
		return mv.GetMessageId() == rs[0].MessageID && string(mv.GetBody()) == "over TLS"
	})
	// A plaintext client is refused by the TLS port, not hung: its Start
	// fails or never gets settings; the raw client sees an error at once.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := dial(t, b.grpc).Heartbeat(ctx, &pb.HeartbeatRequest{}); err == nil {
		t.Error("a plaintext call to the TLS port succeeded")
	}
}
