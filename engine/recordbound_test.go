package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
)

// TestSmallLimitsKeepEngineRecords: the engine's own records are not held
// to the message limits, however small. The commit log's bound was taken
// from them: under a 1 KiB body limit a fire record of 2,048 messages was
// refused and retried every few milliseconds, and an ack of 1,000 receipts
// was refused.
func TestSmallLimitsKeepEngineRecords(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.Limits.MaxBodyBytes = 8
		o.Limits.MaxHeaderBytes = 64
		o.DispatchRate = -1
		o.SegmentBytes = 64 << 20
	})
	e := h.e
	n := 3 * e.opts.DispatchBatch
	at := e.Now() + 1000
	sendHerd(t, e, "herd", n, at)
	waitParked(e, h.clk)
	h.clk.Advance(time.Second)
	if got := waitVisible(h, "herd", n); got != n {
		t.Fatalf("%d of %d visible (fire errors: %d)", got, n, e.stats.FireErrors.Load())
	}
	if f := e.stats.FireErrors.Load(); f != 0 {
		t.Fatalf("%d fire records refused", f)
	}
	rs := h.receiveN("herd", "g", MaxReceive, time.Minute)
	if err := e.Ack(context.Background(), "herd", "g", receipts(rs)...); err != nil {
		t.Fatalf("ack of %d receipts: %v", len(rs), err)
	}
	if acked, _ := h.groupCounts("herd", "g"); acked != uint64(MaxReceive) {
		t.Fatalf("acked %d, want %d", acked, MaxReceive)
	}
}

// TestDispatchBatchBounded: a DispatchBatch whose fire record could not be
// written is refused at Open with the range, not at the first fire.
func TestDispatchBatchBounded(t *testing.T) {
	o := Options{Dir: "x", DispatchBatch: maxDispatchBatch + 1}
	o.setDefaults()
	if err := o.validate(); err == nil {
		t.Fatalf("DispatchBatch %d accepted", o.DispatchBatch)
	}
}

// TestDeadLetterCopyAtTheLimits: a dead-letter copy of a message at every
// limit (body, header bytes, property count), of a long topic, is written
// with the four properties the copy adds. Under a bound of the limits plus
// 1 KiB it was refused as too large, and the message stayed stuck, retried
// every second.
func TestDeadLetterCopyAtTheLimits(t *testing.T) {
	const nprops = 110
	h := newHarness(t, func(o *Options) {
		o.Limits.MaxBodyBytes = 1 << 20
		o.Limits.MaxProperties = nprops
		o.SegmentBytes = 64 << 20
	})
	ctx := t.Context()
	topic := strings.Repeat("t", 150) // long, and its dead-letter topic still readable by a group
	props := map[string]string{}
	for i := range nprops {
		props[fmt.Sprintf("p%03d", i)] = "v"
	}
	props["p000"] = strings.Repeat("v", h.e.opts.Limits.MaxHeaderBytes-nprops*5+1) // the header full
	m := message.Message{Topic: topic, Properties: props, Body: make([]byte, 1<<20)}
	if _, err := h.e.Send(ctx, m, message.When{}); err != nil {
		t.Fatalf("send at the limits: %v", err)
	}
	h.waitVisible(topic, 1)
	r := h.receiveN(topic, "g", 1, time.Minute)[0]
	if err := h.e.DeadLetterAttempts(ctx, topic, "g", r.Receipt, 0); err != nil {
		t.Fatalf("dead-letter copy of a message at the limits: %v", err)
	}
	if dl := h.receiveDLQ(DeadLetterTopic(topic, "g")); len(dl.Message.Body) != 1<<20 || len(dl.Message.Properties) != nprops+4 {
		t.Fatalf("dead letter: %d body bytes, %d properties", len(dl.Message.Body), len(dl.Message.Properties))
	}
}

// TestCopiesOfMessagesAboveLoweredLimits: a message stored under a larger
// body limit is still copied (dead-lettered here; compaction copies the
// same way) after a restart with a smaller one. The copy was refused as
// too large, in a loop.
func TestCopiesOfMessagesAboveLoweredLimits(t *testing.T) {
	const size = 100_000
	h := newHarness(t, func(o *Options) { o.Limits.MaxBodyBytes = 128 << 10 })
	ctx := t.Context()
	if _, err := h.e.Send(ctx, message.Message{Topic: "t", Body: make([]byte, size)}, message.When{}); err != nil {
		t.Fatal(err)
	}
	h.opt.Limits.MaxBodyBytes = 1 << 10
	h.restart()
	h.waitVisible("t", 1)
	r := h.receiveN("t", "g", 1, time.Minute)[0]
	if err := h.e.DeadLetterAttempts(ctx, "t", "g", r.Receipt, 0); err != nil {
		t.Fatalf("dead-letter copy of a %d-byte message under a 1 KiB limit: %v", size, err)
	}
	if dl := h.receiveDLQ(DeadLetterTopic("t", "g")); len(dl.Message.Body) != size {
		t.Fatalf("dead letter of %d bytes", len(dl.Message.Body))
	}
}
