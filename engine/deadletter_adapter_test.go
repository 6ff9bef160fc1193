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

// TestAdapterLookups: LookupDedup finds a message by topic and dedup ID,
// not by another topic's; MessageAt finds the message at its position and
// nothing at a position inside a record or past the log.
func TestAdapterLookups(t *testing.T) {
	e, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	r, err := e.Send(context.Background(), message.Message{Topic: "a", DedupID: "uniq-1", Body: []byte("x")}, message.When{})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := e.LookupDedup("a", "uniq-1"); err != nil || id != r.ID {
		t.Fatalf("LookupDedup: %v, %v; want %v", id, err, r.ID)
	}
	if _, err := e.LookupDedup("b", "uniq-1"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("LookupDedup in another topic: %v", err)
	}
	if id, err := e.MessageAt(r.ID.Pos); err != nil || id != r.ID {
		t.Fatalf("MessageAt: %v, %v", id, err)
	}
	for _, pos := range []uint64{r.ID.Pos + 3, 1 << 50} {
		if _, err := e.MessageAt(pos); errs.CodeOf(err) != errs.NotFound {
			t.Fatalf("MessageAt(%d): %v", pos, err)
		}
	}
}
