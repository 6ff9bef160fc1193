package engine

import (
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
)

// TestHerdGivesMemoryBack: once a herd has drained, the dispatch heap's
// array and the dispatching set are given back, not kept at the herd's
// size for the life of the process.
func TestHerdGivesMemoryBack(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.DispatchRate = -1; o.SegmentBytes = 64 << 20 })
	const n = 3 * herdShrink / 2
	reqs := make([]SendRequest, 0, 1000)
	at := h.e.Now() + 1000
	for i := 0; i < n; i++ {
		reqs = append(reqs, SendRequest{Message: message.Message{Topic: "herd", Body: []byte("x")}, When: message.When{At: at}})
		if len(reqs) == cap(reqs) {
			if _, err := h.e.SendBatch(t.Context(), reqs); err != nil {
				t.Fatal(err)
			}
			reqs = reqs[:0]
		}
	}
	waitParked(h.e, h.clk)
	h.clk.Advance(2 * time.Second)
	if !waitSettled(h.e, h.e.Now(), 30*time.Second) {
		t.Fatalf("the herd did not drain: %s", engineState(h.e))
	}
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	if c := cap(h.e.disp.dispatch); c > herdShrink {
		t.Fatalf("the dispatch heap keeps %d slots after the herd", c)
	}
	if h.e.disp.dispatchingPeak > herdShrink {
		t.Fatalf("the dispatching set was not remade: peak %d", h.e.disp.dispatchingPeak)
	}
}
