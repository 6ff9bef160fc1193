package hourglasstest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/hourglasstest"
)

// An integration test of "an unpaid order closes after 30 minutes" that
// takes milliseconds: the message is not there before the advance and is
// there right after it. In a test, use NewServer(t) instead of Start.
func Example() {
	srv, err := hourglasstest.Start()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx := context.Background()
	_, err = srv.Client.Send(ctx, "orders", client.Message{
		Key:  "order-123",
		Body: []byte("close unpaid order 123"),
		When: client.After(30 * time.Minute),
	})
	if err != nil {
		panic(err)
	}
	srv.Advance(29 * time.Minute)
	msgs, err := srv.Client.Receive(ctx, "orders", "closer", client.ReceiveOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("after 29m:", len(msgs), "messages")

	srv.Advance(time.Minute)
	msgs, err = srv.Client.Receive(ctx, "orders", "closer", client.ReceiveOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("after 30m: %d message: %s\n", len(msgs), msgs[0].Body)
	// Output:
	// after 29m: 0 messages
	// after 30m: 1 message: close unpaid order 123
}
