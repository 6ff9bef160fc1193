package engine

import (
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
)

// TestOtherTopicDuringRateBoundHerd: once a herd has spent the rate's
// bucket, a message of another topic that falls due is made visible as
// soon as a small batch's tokens accrue (firstBatch), not after a full
// batch's: at 10,000/s a full batch of 1,000 takes 100 ms to accrue, 256
// take 26 ms. The clock moves 1 ms at a time, so the loop must wake at the
// probe's due time by itself.
func TestOtherTopicDuringRateBoundHerd(t *testing.T) {
	const rate = 10000 // 10 tokens a ms; the bucket holds 1,000
	h, other := herdAndOther(t, rate, 1000, 5000, 20, 50)
	// Due at +20 ms; 256 tokens have accrued by about +26 ms.
	if vs := h.visible("other"); len(vs) != 1 || vs[0].ID != other.ID {
		t.Fatalf("the other topic's message, due 20 ms after a rate-bound herd, is not visible 50 ms after the herd (%d visible)", len(vs))
	}
	// The rate still holds: the bucket and 50 ms of 10 a ms.
	if n := len(h.visible("herd")) + 1; n > 1000+50*rate/1000 {
		t.Fatalf("%d visible 50 ms after the instant at %d/s with a bucket of 1,000", n, rate)
	}
}

// herdAndOther opens an engine with the given rate and batch, sends a
// herd of n messages to topic "herd" due 1 s ahead and one message to
// topic "other" due after ms later, moves the broker clock to the herd's
// instant, waits for the bucket's worth of the herd, and then moves the
// clock steps times by 1 ms, letting the engine settle after each.
func herdAndOther(t *testing.T, rate, batch, n int, after int64, steps int) (*harness, Receipt) {
	t.Helper()
	h := newHarness(t, func(o *Options) {
		o.DispatchRate = rate
		o.DispatchBatch = batch
		o.SegmentBytes = 64 << 20
	})
	at := h.e.Now() + 1000
	sendHerd(t, h.e, "herd", n, at)
	other := h.send("other", "", message.When{At: at + after})
	waitParked(h.e, h.clk)
	h.clk.Advance(1000 * time.Millisecond)
	waitVisible(h, "herd", int(h.e.disp.rateBurst()))
	for i := 0; i < steps; i++ {
		waitParked(h.e, h.clk)
		h.clk.Advance(time.Millisecond)
	}
	waitParked(h.e, h.clk)
	return h, other
}

// TestNextAfter: the loop's next wake-up for the due set is the earliest
// first entry due after now; a topic already due does not hide another's.
func TestNextAfter(t *testing.T) {
	var d dueSet
	if _, ok := d.nextAfter(0); ok {
		t.Fatal("an empty set has a next due time")
	}
	d.push(1, dueEntry{due: 100, pos: 1, seq: 1}) // the herd, due
	d.push(1, dueEntry{due: 100, pos: 2, seq: 2})
	d.push(2, dueEntry{due: 130, pos: 3, seq: 3}) // another topic
	d.push(3, dueEntry{due: 120, pos: 4, seq: 4})
	if next, ok := d.nextAfter(110); !ok || next != 120 {
		t.Fatalf("nextAfter(110) = %d, %v; want 120 (the herd's 100 is due already)", next, ok)
	}
	if next, ok := d.nextAfter(90); !ok || next != 100 {
		t.Fatalf("nextAfter(90) = %d, %v; want 100", next, ok)
	}
	if _, ok := d.nextAfter(130); ok {
		t.Fatal("nextAfter(130) found a time, but every first entry is due")
	}
}

// TestTokenWantSeveralTopics: with one topic due the loop waits for a full
// batch's tokens; once another topic has a message due, for firstBatch's.
func TestTokenWantSeveralTopics(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.DispatchRate = 10000; o.DispatchBatch = 1000 })
	e := h.e
	e.mu.Lock()
	defer e.mu.Unlock()
	savedTokens := e.disp.tokens
	defer func() { e.disp.due, e.disp.tokens = dueSet{}, savedTokens }() // nothing was staged
	now := e.Now()
	e.disp.tokens = 0
	for i := 0; i < 2000; i++ {
		e.disp.due.push(1, dueEntry{due: now - 1, pos: uint64(i + 1), seq: uint32(i + 1)})
	}
	// 1,000 tokens at 10 a ms: 100 ms, plus one.
	if ms, ok := e.disp.tokenWaitLocked(now); !ok || ms != 101 {
		t.Fatalf("one topic due: wait %d ms (%v), want 101", ms, ok)
	}
	e.disp.due.push(2, dueEntry{due: now, pos: 5000, seq: 5000})
	// 256 tokens: 25.6 ms, plus one.
	if ms, ok := e.disp.tokenWaitLocked(now); !ok || ms != 26 {
		t.Fatalf("two topics due: wait %d ms (%v), want 26", ms, ok)
	}
}
