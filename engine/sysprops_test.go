package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// TestSystemPropertiesDoNotCount: the properties a protocol adapter adds
// (SendRequest.SystemProperties) do not count against the sender's limit,
// the refusal counts only the sender's, and a message at the limit with
// the adapter's properties is dead-lettered and redriven whole (the
// engine's copies count them as the sender's, with room for them).
func TestSystemPropertiesDoNotCount(t *testing.T) {
	h := newHarness(t, nil)
	ctx := t.Context()
	limit := h.e.opts.Limits.MaxProperties
	if limit != 128 {
		t.Fatalf("default limit %d, want RocketMQ's 128", limit)
	}
	req := func(n int) SendRequest {
		props := map[string]string{}
		for i := range n {
			props[fmt.Sprintf("p%03d", i)] = strings.Repeat("v", 250) // the sender's bytes near their limit
		}
		sys := []string{"rocketmq.keys", "rocketmq.born_ms", "rocketmq.born_host", "rocketmq.encoding"}
		for _, k := range sys {
			props[k] = strings.Repeat("s", 100)
		}
		return SendRequest{Message: message.Message{Topic: "t", Properties: props, Body: []byte("b")}, SystemProperties: sys}
	}
	if _, err := h.e.SendBatch(ctx, []SendRequest{req(limit)}); err != nil {
		t.Fatalf("%d properties of the sender's and 4 of the adapter's: %v", limit, err)
	}
	_, err := h.e.SendBatch(ctx, []SendRequest{req(limit + 1)})
	if errs.CodeOf(err) != errs.TooLarge || !strings.Contains(err.Error(), fmt.Sprintf("message has %d properties; the limit (max-properties) is %d", limit+1, limit)) {
		t.Fatalf("%d of the sender's: %v", limit+1, err)
	}
	h.waitVisible("t", 1)
	r := h.receiveN("t", "g", 1, time.Minute)[0]
	if err := h.e.DeadLetterAttempts(ctx, "t", "g", r.Receipt, 0); err != nil {
		t.Fatal(err)
	}
	h.waitVisible(DeadLetterTopic("t", "g"), 1)
	if n, err := h.e.Redrive(ctx, "t", "g", 10); err != nil || n != 1 {
		t.Fatalf("redrive of a message at the limit with an adapter's properties: %d, %v", n, err)
	}
}
