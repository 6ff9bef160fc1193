package engine

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

func (h *harness) sendHerd(topic string, n int, w message.When) {
	h.t.Helper()
	reqs := make([]SendRequest, 0, 500)
	for i := 0; i < n; i++ {
		reqs = append(reqs, SendRequest{Message: message.Message{Topic: topic, Body: []byte("h")}, When: w})
		if len(reqs) == cap(reqs) || i == n-1 {
			if _, err := h.e.SendBatch(context.Background(), reqs); err != nil {
				h.t.Fatal(err)
			}
			reqs = reqs[:0]
		}
	}
}

// TestWindowSpreadsHerd: a herd due at T with a 10 s window becomes
// visible over the window at an even rate, never before T, never after
// T+w; across a restart in the middle too.
func TestWindowSpreadsHerd(t *testing.T) {
	h := newHarness(t, nil)
	const n = 2000
	T := h.e.Now() + 5000
	h.sendHerd("herd", n, message.When{At: T, Window: 10 * time.Second})
	h.clk.Advance(5 * time.Second)
	total := 0
	for s := 1; s <= 10; s++ {
		h.clk.Advance(time.Second)
		if s == 5 {
			h.restart()
		}
		if !waitSettled(h.e, h.e.Now(), 5*time.Second) {
			t.Fatalf("not settled: %s", engineState(h.e))
		}
		got := len(h.visible("herd"))
		// An even rate: n/10 a second, give or take a few.
		if per := got - total; per < n/10-10 || per > n/10+10 {
			t.Errorf("second %d: %d became visible, want about %d", s, per, n/10)
		}
		total = got
	}
	if total != n {
		t.Fatalf("%d visible, want %d", total, n)
	}
	for _, v := range h.visible("herd") {
		if v.Visible < T || v.Due < T || v.Due > T+10_000 {
			t.Fatalf("%v: due %d visible %d outside [%d, %d]", v.ID, v.Due, v.Visible, T, T+10_000)
		}
	}
	if m := h.e.stats.WindowMissed.Load(); m != 0 {
		t.Fatalf("%d counted as missing their window", m)
	}
}

// TestWindowMissedAfterDowntime: messages whose window ended while the
// broker was down are delivered late and counted; the deadline caps the
// window.
func TestWindowMissedAfterDowntime(t *testing.T) {
	h := newHarness(t, nil)
	T := h.e.Now() + 1000
	h.sendHerd("w", 50, message.When{At: T, Window: 2 * time.Second})
	h.sendHerd("capped", 50, message.When{At: T, Window: time.Hour, Deadline: T + 500})
	h.e.Close()
	h.e = nil
	h.clk.Advance(time.Minute)
	h.open()
	h.settle("w", 50)
	if m := h.e.stats.WindowMissed.Load(); m != 100 {
		t.Fatalf("window missed %d, want 100", m)
	}
	for _, v := range h.settle("capped", 50) {
		if v.Due > T+500 {
			t.Fatalf("fire time %d past the deadline %d", v.Due, T+500)
		}
	}
}

func TestFireAtBounds(t *testing.T) {
	for nonce := uint64(0); nonce < 5000; nonce += 7 {
		s := &message.Stored{Due: 1000, Window: 99, Nonce: nonce}
		if f := fireAt(s); f < 1000 || f > 1099 {
			t.Fatalf("nonce %d: %d", nonce, f)
		}
		s.Deadline = 1010
		if f := fireAt(s); f < 1000 || f > 1010 {
			t.Fatalf("nonce %d capped: %d", nonce, f)
		}
	}
	if f := fireAt(&message.Stored{Due: 5, Nonce: 123}); f != 5 {
		t.Fatalf("no window: %d", f)
	}
}

func TestWindowRefusedOnFIFO(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.e.CreateTopic("fifo", TopicConfig{FIFO: true}); err != nil {
		t.Fatal(err)
	}
	_, err := h.e.Send(context.Background(), message.Message{Topic: "fifo", Group: "g"}, message.When{Window: time.Second})
	if errs.CodeOf(err) != errs.InvalidArgument {
		t.Fatalf("window on a FIFO topic: %v", err)
	}
}
