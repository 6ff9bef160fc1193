package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
)

// waitStaged waits until the message at pos has left the wheel into its
// topic's due heap ahead of its time (dispatch.go, stageAhead).
func waitStaged(t *testing.T, e *Engine, pos uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		e.mu.Lock()
		staged := e.disp.stagedLocked(pos, e.Now()+1)
		e.mu.Unlock()
		if staged {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("message %d was not staged: %s", pos, engineState(e))
		}
		e.life.kickLoop()
		time.Sleep(100 * time.Microsecond)
	}
}

// TestStagedMessageStaysPending: a message staged before its time is still
// pending. It can be cancelled (and then never fires), rescheduled to the
// same instant (and fires once) or later (and does not fire at the old
// time), and the fire frontier does not pass the broker clock for it.
func TestStagedMessageStaysPending(t *testing.T) {
	h := newHarness(t, nil)
	at := h.e.Now() + stageAhead/2
	cancelled := h.send("s", "c", message.When{At: at})
	same := h.send("s", "same", message.When{At: at})
	later := h.send("s", "later", message.When{At: at})
	kept := h.send("s", "kept", message.When{At: at})
	for _, r := range []Receipt{cancelled, same, later, kept} {
		waitStaged(t, h.e, r.ID.Pos)
		if info, err := h.e.Inspect(r.ID); err != nil || info.State != StatePending {
			t.Fatalf("a staged message is %v (%v), not pending", info.State, err)
		}
	}
	if f, now := h.e.Frontier(), h.e.Now(); f > now {
		t.Fatalf("frontier %d is past the broker clock %d", f, now)
	}
	if err := h.e.Cancel(context.Background(), cancelled.ID); err != nil {
		t.Fatalf("cancel of a staged message: %v", err)
	}
	if _, err := h.e.Reschedule(context.Background(), same.ID, message.When{At: at}, 0); err != nil {
		t.Fatalf("reschedule of a staged message to its own instant: %v", err)
	}
	if _, err := h.e.Reschedule(context.Background(), later.ID, message.When{At: at + 60_000}, 0); err != nil {
		t.Fatalf("reschedule of a staged message: %v", err)
	}
	waitParked(h.e, h.clk)
	h.clk.Advance(time.Duration(at-h.e.Now()) * time.Millisecond)
	vs := h.settle("s", 2)
	got := map[message.ID]int{}
	for _, v := range vs {
		got[v.ID]++
		if v.Visible < v.Due {
			t.Errorf("message %v visible at %d, before its due time %d", v.ID, v.Visible, v.Due)
		}
	}
	if got[same.ID] != 1 || got[kept.ID] != 1 {
		t.Fatalf("visible at the instant: %v; want the kept and the same-instant message once each", got)
	}
	waitParked(h.e, h.clk)
	h.clk.Advance(time.Minute)
	vs = h.settle("s", 3)
	if vs[2].ID != later.ID && vs[0].ID != later.ID && vs[1].ID != later.ID {
		t.Fatalf("the rescheduled message is not the third visible: %v", vs)
	}
}

// TestStagedRestartDoesNotRaiseTheClock: the wheel runs stageAhead ahead
// of the clock, but the checkpoint's frontier must not, because recovery
// raises the broker clock to it: a restart would make everything due in
// the next stageAhead visible early.
func TestStagedRestartDoesNotRaiseTheClock(t *testing.T) {
	h := newHarness(t, nil)
	at := h.e.Now() + stageAhead/2
	r := h.send("s", "k", message.When{At: at})
	waitStaged(t, h.e, r.ID.Pos)
	before := h.e.Now()
	h.restart()
	if now := h.e.Now(); now != before {
		t.Fatalf("the broker clock moved from %d to %d across a restart with a staged message", before, now)
	}
	if info, err := h.e.Inspect(r.ID); err != nil || info.State != StatePending {
		t.Fatalf("after the restart the staged message is %v (%v), not pending", info.State, err)
	}
	waitParked(h.e, h.clk)
	h.clk.Advance(time.Duration(at-h.e.Now()) * time.Millisecond)
	if vs := h.settle("s", 1); vs[0].Visible < at {
		t.Fatalf("visible at %d, before %d", vs[0].Visible, at)
	}
}

// TestFireBatchSize: the first fire batch after an idle spell is small and
// the next ones double, and while two topics have messages due a batch is
// at most a quarter of DispatchBatch (batchSizeLocked).
func TestFireBatchSize(t *testing.T) {
	h := newHarness(t, nil)
	at := h.e.Now() + stageAhead/2
	a := h.send("a", "", message.When{At: at})
	waitStaged(t, h.e, a.ID.Pos)
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	if k := h.e.disp.due.readyTopics(at - 1); k != 0 {
		t.Fatalf("%d topics ready before their messages are due", k)
	}
	if k := h.e.disp.due.readyTopics(at); k != 1 {
		t.Fatalf("%d topics ready at the due time of one, want 1", k)
	}
	h.e.disp.batchRamp = 0
	var got []int
	for i := 0; i < 6; i++ {
		got = append(got, h.e.disp.batchSizeLocked(at))
	}
	full := h.e.opts.DispatchBatch
	if want := []int{firstBatch, 2 * firstBatch, 4 * firstBatch, 8 * firstBatch, full, full}; !slices.Equal(got, want) {
		t.Fatalf("batch sizes after idle with one topic due: %v, want %v", got, want)
	}
	// A second topic due: a quarter of DispatchBatch at most.
	h.e.disp.due.push(99, dueEntry{due: at, pos: 1 << 62, seq: 0})
	if n := h.e.disp.batchSizeLocked(at); n != full/4 {
		t.Fatalf("batch size with two topics due: %d, want %d", n, full/4)
	}
	// The entry of topic 99 is stale (no timer): take drops it.
	if out := h.e.disp.due.take(full, at-1, &h.e.disp.near, h.e.disp.taken, h.e.disp.recycleTimerLocked, nil); len(out) != 0 {
		t.Fatalf("took %d entries before their due time", len(out))
	}
}
