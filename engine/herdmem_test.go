package engine

import (
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
)

// TestHerdGivesMemoryBack: once a herd has drained, the due queues'
// chunks and the near index's maps are given back, not kept at the herd's
// size for the life of the process. The herd is due after stageAhead, so it goes
// through the wheel into near first, like one sent well ahead.
func TestHerdGivesMemoryBack(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.DispatchRate = -1; o.SegmentBytes = 64 << 20 })
	const n = 3 * herdShrink / 2
	reqs := make([]SendRequest, 0, 1000)
	at := h.e.Now() + stageAhead + 1000
	for i := 0; i < n; i++ {
		reqs = append(reqs, SendRequest{Message: message.Message{Topic: "herd", Body: []byte("x")}, When: message.When{At: at}})
		if len(reqs) == cap(reqs) {
			if _, err := h.e.SendBatch(t.Context(), reqs); err != nil {
				t.Fatal(err)
			}
			reqs = reqs[:0]
		}
	}
	h.e.mu.Lock()
	held, pages := h.e.disp.near.len(), len(h.e.disp.near.pages)
	h.e.mu.Unlock()
	if held < n/2 || pages <= nearShrinkMin {
		t.Fatalf("the near index holds %d timers in %d pages with a herd of %d in the wheel: its shrink would never be considered", held, pages, n)
	}
	waitParked(h.e, h.clk)
	h.clk.Advance((stageAhead + 2000) * time.Millisecond)
	if !waitSettled(h.e, h.e.Now(), 30*time.Second) {
		t.Fatalf("the herd did not drain: %s", engineState(h.e))
	}
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	for topic, q := range h.e.disp.due.byTopic {
		if len(q.heap.chunks) > 1 || len(q.run.chunks) > 1 {
			t.Fatalf("topic %d's due heap keeps %d + %d chunks after the herd", topic, len(q.heap.chunks), len(q.run.chunks))
		}
	}
	if x := &h.e.disp.near; x.len() != 0 || len(x.pages) != 0 || x.pagesPeak >= nearShrinkMin {
		t.Fatalf("the near index was not given back: %d timers in %d pages, map of pages made for %d", x.len(), len(x.pages), x.pagesPeak)
	}
}

// TestHerdSharesTheDispatchRate: a herd in one topic must not hold back
// another topic's message due just after it. Due messages wait per topic
// and each fire batch takes from the topics in turn.
func TestHerdSharesTheDispatchRate(t *testing.T) {
	// 21 ms of broker time past the herd's instant (20 ms past the other
	// message's due time): at 10,000/s that is room for 210 messages
	// beyond the bucket; the herd alone would take 2 s.
	const rate, steps = 10000, 21
	h, other := herdAndOther(t, rate, 100, 20000, 1, steps)
	vs := h.visible("other")
	if len(vs) != 1 || vs[0].ID != other.ID {
		t.Fatalf("the other topic's message is not visible 20 ms after its due time behind a herd of 20,000 (%d visible)", len(vs))
	}
	// At most the bucket's depth (rateBurst, 1,000 here) and the rate over
	// the 21 ms the clock moved past the instant (it was 20 ms here until a
	// run took 1,206: the loop had taken the last millisecond's tokens).
	if n, limit := len(h.visible("herd")), int(h.e.disp.rateBurst())+steps*rate/1000; n > limit {
		t.Fatalf("%d of the herd visible %d ms after its instant at %d/s: more than the bucket (%d) and the rate allow (%d)",
			n, steps, rate, int(h.e.disp.rateBurst()), limit)
	}
}
