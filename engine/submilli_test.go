package engine

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
)

// waitLeaseWheel waits, in real time, until the lease wheel has been
// advanced to t: every lease and backoff that ends at or before t has been
// handled. It nudges the loop as waitSettled does.
func waitLeaseWheel(h *harness, t int64) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.e.mu.Lock()
		at, busy := h.e.disp.leaseWheel()
		h.e.mu.Unlock()
		if at >= t && !busy {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the lease wheel did not reach %d (at %d)", t, at)
		}
		h.e.life.kickLoop()
		time.Sleep(200 * time.Microsecond)
	}
}

// TestFiresOnlyOnceTheTrueTimeReachesDue: the engine's clock is the wall
// clock rounded down to its millisecond, so a message due at X is not
// visible while the true time is 0.2 ms before X, and is once it is X.
func TestFiresOnlyOnceTheTrueTimeReachesDue(t *testing.T) {
	h := newHarness(t, nil)
	due := h.e.Now() + 1000
	h.send("t", "k", message.When{At: due})
	waitParked(h.e, h.clk)
	h.clk.Advance(999_800 * time.Microsecond) // 0.2 ms before due
	if now := h.e.Now(); now != due-1 {
		t.Fatalf("0.2 ms before %d the engine reads %d", due, now)
	}
	h.settle("t", 0)
	waitParked(h.e, h.clk)
	h.clk.Advance(200 * time.Microsecond)
	h.settle("t", 1)
}

// TestLeasesAndBackoffsRoundUp: a lease or a retry delay with a fraction
// of a millisecond ends at the next whole millisecond, never before its
// length has passed. Cut down, a 1.5 ms lease ended after 1 ms (the ack
// of a consumer still within it was refused), and a 1.5 ms nack delay
// made the message receivable again after 1 ms.
func TestLeasesAndBackoffsRoundUp(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	h.send("t", "a", message.When{})
	h.send("t", "b", message.When{})
	h.waitVisible("t", 2)
	rs := h.receiveN("t", "g", 2, 1500*time.Microsecond)
	start := h.e.Now()
	// b goes back with a 1.5 ms delay; a keeps its 1.5 ms lease.
	if err := h.e.Nack(ctx, "t", "g", rs[1].Receipt, 1500*time.Microsecond); err != nil {
		t.Fatal(err)
	}
	waitParked(h.e, h.clk)
	h.clk.Advance(1600 * time.Microsecond) // the engine reads start+1
	waitLeaseWheel(h, start+1)
	if got, err := h.e.Receive(ctx, ReceiveRequest{Topic: "t", Group: "g", Max: 10, Invisible: time.Minute}); err != nil || len(got) != 0 {
		t.Fatalf("1.6 ms into a 1.5 ms nack delay, received %d (err %v); want none before 2 ms", len(got), err)
	}
	if err := h.e.Ack(ctx, "t", "g", rs[0].Receipt); err != nil {
		t.Fatalf("ack 1.6 ms into a 1.5 ms lease (the engine's clock at +1 ms): %v", err)
	}
	waitParked(h.e, h.clk)
	h.clk.Advance(time.Millisecond)
	waitLeaseWheel(h, start+2)
	if got := h.receiveN("t", "g", 1, time.Minute); got[0].ID != rs[1].ID {
		t.Fatalf("after the nack delay received %v, want %v", got[0].ID, rs[1].ID)
	}
}
