package engine

import (
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
)

// sendHerd sends n messages of topic due at at, in batches of 1,000.
func sendHerd(t *testing.T, e *Engine, topic string, n int, at int64) {
	t.Helper()
	reqs := make([]SendRequest, 0, 1000)
	for i := 0; i < n; i++ {
		reqs = append(reqs, SendRequest{Message: message.Message{Topic: topic, Body: []byte("x")}, When: message.When{At: at}})
		if len(reqs) == cap(reqs) || i == n-1 {
			if _, err := e.SendBatch(t.Context(), reqs); err != nil {
				t.Fatal(err)
			}
			reqs = reqs[:0]
		}
	}
}

// TestRateBurst: after a quiet spell the dispatcher may spend
// dispatchBurstMs of its rate at once, so a herd that fits in it is made
// visible without waiting for tokens; beyond it the rate holds. The clock
// stands still at the herd's instant, so no token accrues meanwhile: exactly
// the burst becomes visible, however long the fires take in real time.
func TestRateBurst(t *testing.T) {
	const rate, batch = 10000, 100
	const burst = 1000 // 100 ms of the rate (dispatchBurstMs)
	h := newHarness(t, func(o *Options) {
		o.DispatchRate = rate
		o.DispatchBatch = batch
		o.SegmentBytes = 64 << 20
	})
	if got := int(h.e.disp.rateBurst()); got != burst {
		t.Fatalf("rateBurst %d, want %d", got, burst)
	}
	at := h.e.Now() + 1000
	sendHerd(t, h.e, "small", burst, at)
	sendHerd(t, h.e, "large", 2*burst, at+2000)

	waitParked(h.e, h.clk)
	h.clk.Advance(1000 * time.Millisecond)
	if n := waitVisible(h, "small", burst); n != burst {
		t.Fatalf("%d of a herd of %d visible at its instant; the burst allows all of it", n, burst)
	}

	// 2 s later the bucket is full again (capped at the burst): the larger
	// herd gets exactly one burst at its instant, the rest as tokens accrue.
	h.clk.Advance(2000 * time.Millisecond)
	waitVisible(h, "large", burst)
	waitParked(h.e, h.clk) // no token accrues: no fire can follow
	if n := len(h.visible("large")); n != burst {
		t.Fatalf("%d of a herd of %d visible at its instant with the clock stopped; want the burst, %d", n, 2*burst, burst)
	}
	for n, i := 0, 0; n < 2*burst; n, i = len(h.visible("large")), i+1 {
		if i == 1000 {
			t.Fatalf("only %d of %d visible after 10 s of broker time", n, 2*burst)
		}
		h.clk.Advance(10 * time.Millisecond)
		waitParked(h.e, h.clk)
		if limit := burst + int(h.e.Now()-(at+2000))*rate/1000; n > limit {
			t.Fatalf("%d visible %d ms after the instant; the rate allows %d", n, h.e.Now()-(at+2000), limit)
		}
	}
}

// waitVisible waits, in real time (at most 5 s), until at least want
// messages of topic are visible, and returns how many are. The fires run
// one after another beside the loop, so a parked loop alone does not mean
// that they are all done.
func waitVisible(h *harness, topic string, want int) int {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	n := len(h.visible(topic))
	for n < want && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
		n = len(h.visible(topic))
	}
	return n
}

// TestTokenWait: the loop waits for tokens only when it could take a batch
// at all: not while a fire is in flight (the fire kicks it when done) and
// not without a rate; otherwise until a useful batch's tokens accrue, and
// never less than a millisecond, even with a full bucket.
func TestTokenWait(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.DispatchRate = 10000; o.DispatchBatch = 100 })
	e := h.e
	e.mu.Lock()
	defer e.mu.Unlock()
	saved, savedTokens := e.disp.inflight, e.disp.tokens
	defer func() { e.disp.inflight, e.disp.tokens = saved, savedTokens }()

	e.disp.inflight = []fireEntry{{pos: 1}}
	if ms, ok := e.disp.tokenWaitLocked(e.Now()); ok {
		t.Fatalf("a fire in flight: wait %d ms for tokens, want no wake-up", ms)
	}
	e.disp.inflight = nil
	e.disp.tokens = e.disp.rateBurst() // full: the wait came out negative before
	if ms, ok := e.disp.tokenWaitLocked(e.Now()); !ok || ms != 1 {
		t.Fatalf("full bucket: wait %d ms (%v), want 1", ms, ok)
	}
	e.disp.tokens = -100 // after a failed fire's back-off
	// Nothing is staged, so a useful batch is 0 messages: 100 tokens to go
	// at 10/ms is 10 ms, plus one.
	if ms, ok := e.disp.tokenWaitLocked(e.Now()); !ok || ms != 11 {
		t.Fatalf("100 tokens short at 10,000/s: wait %d ms (%v), want 11", ms, ok)
	}
	e.opts.DispatchRate = -1
	defer func() { e.opts.DispatchRate = 10000 }()
	if ms, ok := e.disp.tokenWaitLocked(e.Now()); ok {
		t.Fatalf("unbounded: wait %d ms for tokens, want none", ms)
	}
}
