package engine

import (
	"context"
	"testing"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// TestSendDeadLetters: an adapter's dead letters reach the reserved
// namespace (created with one queue), which clients' sends still cannot;
// a topic outside it is refused.
func TestSendDeadLetters(t *testing.T) {
	e, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	m := message.Message{Topic: "%DLQ%billing", Body: []byte("x")}
	if _, err := e.Send(ctx, m, message.When{}); errs.CodeOf(err) != errs.InvalidArgument {
		t.Fatalf("a client's send to a dead-letter topic: %v", err)
	}
	rs, err := e.SendDeadLetters(ctx, []SendRequest{{Message: m}})
	if err != nil || len(rs) != 1 {
		t.Fatalf("SendDeadLetters: %v, %v", rs, err)
	}
	if n, _, ok := e.TopicKind("%DLQ%billing"); !ok || n != 1 {
		t.Fatalf("dead-letter topic: %d queues, exists %v", n, ok)
	}
	if _, err := e.SendDeadLetters(ctx, []SendRequest{{Message: message.Message{Topic: "orders", Body: []byte("x")}}}); errs.CodeOf(err) != errs.InvalidArgument {
		t.Fatalf("SendDeadLetters to a normal topic: %v", err)
	}
}
