package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/server"
)

// startBroker runs a real broker (engine and HTTP API) in this process on a
// temporary directory, so the examples run as written against a loopback
// httptest server. In real use the broker is "hourglass serve".
func startBroker() (url string, stop func()) {
	dir, err := os.MkdirTemp("", "hourglass-example-")
	if err != nil {
		panic(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := engine.NewOptions(dir)
	opts.Logger = logger
	eng, err := engine.Open(opts)
	if err != nil {
		panic(err)
	}
	h := server.New(eng, server.DefaultOptions(), logger, nil)
	srv := httptest.NewServer(h)
	return srv.URL, func() {
		h.Drain()
		srv.Close()
		eng.Close()
		os.RemoveAll(dir)
	}
}

// A message sent now with a delay becomes visible after it; a consumer
// group long-polls for it and acks it.
func Example() {
	url, stop := startBroker()
	defer stop()
	ctx := context.Background()
	c := client.New(url)

	r, err := c.Send(ctx, "orders", client.Message{
		Key:  "order-123",
		Body: []byte("close unpaid order 123"),
		When: client.After(300 * time.Millisecond),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	info, _ := c.InspectKey(ctx, "orders", "order-123")
	fmt.Println("state before due:", info.State, "- same message:", info.ID == r.ID)

	msgs, err := c.Receive(ctx, "orders", "billing", client.ReceiveOptions{Wait: 10 * time.Second})
	if err != nil || len(msgs) != 1 {
		fmt.Println(len(msgs), err)
		return
	}
	m := msgs[0]
	fmt.Printf("received %q, attempt %d, not early: %v\n", m.Body, m.Attempt, m.Visible >= r.Due)
	n, _ := c.Ack(ctx, "orders", "billing", m.Receipt)
	fmt.Println("acked", n)
	// Output:
	// state before due: pending - same message: true
	// received "close unpaid order 123", attempt 1, not early: true
	// acked 1
}

// Cancel a pending message when the business event it guarded happened
// (the order got paid). A second cancel is a failed precondition.
func ExampleClient_Cancel() {
	url, stop := startBroker()
	defer stop()
	ctx := context.Background()
	c := client.New(url)

	r, _ := c.Send(ctx, "orders", client.Message{Key: "order-456", Body: []byte("close unpaid order 456"), When: client.After(30 * time.Minute)})
	if err := c.Cancel(ctx, r.ID); err != nil {
		fmt.Println(err)
		return
	}
	info, _ := c.Inspect(ctx, r.ID)
	fmt.Println("state:", info.State)
	err := c.Cancel(ctx, r.ID)
	fmt.Println("cancel again is a failed precondition:", client.IsFailedPrecondition(err))
	// Output:
	// state: cancelled
	// cancel again is a failed precondition: true
}

// Reschedule with a compare-and-set on the due time: the move happens only
// if nobody moved the message since it was read.
func ExampleClient_Reschedule() {
	url, stop := startBroker()
	defer stop()
	ctx := context.Background()
	c := client.New(url)

	r, _ := c.Send(ctx, "reminders", client.Message{Key: "user-7", Body: []byte("remind"), When: client.After(24 * time.Hour)})
	moved, err := c.Reschedule(ctx, r.ID, client.After(48*time.Hour), r.Due)
	fmt.Println("moved:", err == nil, "- one day later:", time.Duration(moved.Due-r.Due)*time.Millisecond >= 24*time.Hour)
	_, err = c.Reschedule(ctx, r.ID, client.After(time.Hour), r.Due) // r.Due is stale now
	fmt.Println("stale compare-and-set is a failed precondition:", client.IsFailedPrecondition(err))
	// Output:
	// moved: true - one day later: true
	// stale compare-and-set is a failed precondition: true
}

// Errors carry the broker's stable code and message.
func ExampleIsNotFound() {
	url, stop := startBroker()
	defer stop()
	c := client.New(url)

	_, err := c.InspectKey(context.Background(), "orders", "order-999")
	fmt.Println(client.IsNotFound(err))
	fmt.Println(err)
	// Output:
	// true
	// not_found (HTTP 404): no message with key "order-999" in topic "orders"
}

// Send several messages in one all-or-nothing request, each with its own
// delivery time: the delay-level table (RocketMQ 4.x style) or an
// absolute time.
func ExampleClient_SendBatch() {
	url, stop := startBroker()
	defer stop()
	c := client.New(url)

	rs, err := c.SendBatch(context.Background(), "payments", []client.Message{
		{Key: "pay-1", Body: []byte("poll channel"), When: client.AtLevel(3)},                                // level 3: 10s by default
		{Key: "pay-1", Body: []byte("poll channel again"), When: client.AtTime(time.Now().Add(time.Minute))}, // absolute
	})
	fmt.Println(len(rs), err, rs[0].Due < rs[1].Due)
	// Output:
	// 2 <nil> true
}

// New takes options: a token for a broker started with -auth-token, an
// HTTP client, and the retry policy (see the package doc for what is
// retried; sends are never retried after the broker may have seen them).
func ExampleNew() {
	c := client.New("http://127.0.0.1:7070",
		client.WithToken(os.Getenv("HOURGLASS_TOKEN")),
		client.WithHTTPClient(&http.Client{Transport: http.DefaultTransport}),
		client.WithRetries(3),
		client.WithBackoff(50*time.Millisecond, time.Second),
	)
	fmt.Println(c.BaseURL())
	// Output: http://127.0.0.1:7070
}
