package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

func (h *harness) sendDedup(topic, id, body string, w message.When) (Receipt, error) {
	h.t.Helper()
	return h.e.Send(context.Background(), message.Message{Topic: topic, DedupID: id, Body: []byte(body)}, w)
}

func TestDedupRetryReturnsFirst(t *testing.T) {
	h := newHarness(t, nil)
	first, err := h.sendDedup("t", "op-1", "a", message.When{Delay: time.Minute})
	if err != nil || first.Duplicate {
		t.Fatalf("first send: %+v %v", first, err)
	}
	// The clock moves: a relative delay resolves to another due time, yet
	// the retry asks for the same thing and gets the first answer.
	h.clk.Advance(10 * time.Second)
	again, err := h.sendDedup("t", "op-1", "a", message.When{Delay: time.Minute})
	if err != nil || !again.Duplicate || again.ID != first.ID || again.Due != first.Due {
		t.Fatalf("retry: %+v %v, first %+v", again, err, first)
	}
	// A conflicting send names the first message.
	_, err = h.sendDedup("t", "op-1", "b", message.When{Delay: time.Minute})
	var he *errs.Error
	if !errors.As(err, &he) || he.Code != errs.AlreadyExists || he.Ref != first.ID.String() {
		t.Fatalf("conflict: %v", err)
	}
	if _, err = h.sendDedup("t", "op-1", "a", message.When{Delay: 2 * time.Minute}); errs.CodeOf(err) != errs.AlreadyExists {
		t.Fatalf("another due time is a conflict: %v", err)
	}
	// Another topic, another ID space.
	other, err := h.sendDedup("u", "op-1", "a", message.When{Delay: time.Minute})
	if err != nil || other.Duplicate {
		t.Fatalf("other topic: %+v %v", other, err)
	}
	if got := h.e.stats.Sent.Load(); got != 2 {
		t.Fatalf("sent %d, want 2", got)
	}
	h.clk.Advance(2 * time.Minute)
	h.settle("t", 1)

	// Within the window, across a restart with and without a checkpoint.
	h.restart()
	if r, err := h.sendDedup("t", "op-1", "a", message.When{Delay: time.Minute}); err != nil || !r.Duplicate || r.ID != first.ID {
		t.Fatalf("after restart: %+v %v", r, err)
	}
	if err := h.e.checkpoint(); err != nil {
		t.Fatal(err)
	}
	h.restart()
	if r, err := h.sendDedup("t", "op-1", "a", message.When{Delay: time.Minute}); err != nil || !r.Duplicate || r.ID != first.ID {
		t.Fatalf("after checkpoint and restart: %+v %v", r, err)
	}
	// After the window, the ID is free again.
	h.clk.Advance(DefaultDedupWindow)
	r, err := h.sendDedup("t", "op-1", "b", message.When{})
	if err != nil || r.Duplicate || r.ID == first.ID {
		t.Fatalf("after the window: %+v %v", r, err)
	}
	if r2, err := h.sendDedup("t", "op-1", "b", message.When{}); err != nil || r2.ID != r.ID {
		t.Fatalf("the new message holds the ID now: %+v %v", r2, err)
	}
}

func TestDedupPolicies(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.DedupTopics = map[string]DedupPolicy{
			"first":     {FirstWins: true, Window: time.Minute},
			"delivered": {UntilDelivered: true},
		}
	})
	a, _ := h.sendDedup("first", "x", "a", message.When{})
	b, err := h.sendDedup("first", "x", "b", message.When{})
	if err != nil || !b.Duplicate || b.ID != a.ID {
		t.Fatalf("first wins: %+v %v", b, err)
	}
	h.clk.Advance(time.Minute)
	if c, err := h.sendDedup("first", "x", "b", message.When{}); err != nil || c.Duplicate {
		t.Fatalf("after a 1m window: %+v %v", c, err)
	}

	d, _ := h.sendDedup("delivered", "y", "a", message.When{Delay: 48 * time.Hour})
	h.clk.Advance(30 * time.Hour) // past 24h, not yet delivered
	if r, err := h.sendDedup("delivered", "y", "a", message.When{Delay: 48 * time.Hour}); err != nil || r.ID != d.ID {
		t.Fatalf("until delivered, before delivery: %+v %v", r, err)
	}
	h.clk.Advance(19 * time.Hour)
	h.settle("delivered", 1)
	if r, err := h.sendDedup("delivered", "y", "a", message.When{}); err != nil || r.Duplicate {
		t.Fatalf("until delivered, after delivery: %+v %v", r, err)
	}
}

func TestDedupBatch(t *testing.T) {
	h := newHarness(t, nil)
	m := func(id, body string) SendRequest {
		return SendRequest{Message: message.Message{Topic: "t", DedupID: id, Body: []byte(body)}}
	}
	rs, err := h.e.SendBatch(context.Background(), []SendRequest{m("a", "1"), m("b", "2"), m("a", "1"), m("", "3")})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Duplicate || rs[1].Duplicate || !rs[2].Duplicate || rs[2].ID != rs[0].ID || rs[3].Duplicate {
		t.Fatalf("receipts %+v", rs)
	}
	rs2, err := h.e.SendBatch(context.Background(), []SendRequest{m("b", "2"), m("c", "4")})
	if err != nil || !rs2[0].Duplicate || rs2[0].ID != rs[1].ID || rs2[1].Duplicate {
		t.Fatalf("second batch %+v %v", rs2, err)
	}
	_, err = h.e.SendBatch(context.Background(), []SendRequest{m("d", "1"), m("d", "2")})
	if errs.CodeOf(err) != errs.AlreadyExists {
		t.Fatalf("conflict inside a batch: %v", err)
	}
	if _, err := h.sendDedup("t", string(make([]byte, message.MaxDedupIDBytes+1)), "x", message.When{}); errs.CodeOf(err) != errs.InvalidArgument {
		t.Fatalf("long dedup id: %v", err)
	}
	h.settle("t", 4)
}

// TestDedupConcurrent races many senders of one dedup ID: exactly one
// stores, and all get its ID.
func TestDedupConcurrent(t *testing.T) {
	h := newHarness(t, nil)
	for round := 0; round < 20; round++ {
		id := "op-" + string(rune('a'+round))
		var wg sync.WaitGroup
		ids := make([]message.ID, 8)
		stored := make([]bool, 8)
		for g := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := h.sendDedup("t", id, "same", message.When{})
				if err != nil {
					t.Error(err)
					return
				}
				ids[g], stored[g] = r.ID, !r.Duplicate
			}()
		}
		wg.Wait()
		n := 0
		for g := range ids {
			if stored[g] {
				n++
			}
			if ids[g] != ids[0] {
				t.Fatalf("round %d: ids differ: %v", round, ids)
			}
		}
		if n != 1 {
			t.Fatalf("round %d: %d senders stored", round, n)
		}
	}
	h.settle("t", 20)
}

// TestDedupPowerLoss: a send acknowledged before a power loss still holds
// its dedup ID afterwards (the index is rebuilt from the log).
func TestDedupPowerLoss(t *testing.T) {
	h := newHarness(t, nil)
	first, err := h.sendDedup("t", "op", "a", message.When{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h.powerLossRestart(h.fs)
	r, err := h.sendDedup("t", "op", "a", message.When{Delay: time.Hour})
	if err != nil || !r.Duplicate || r.ID != first.ID {
		t.Fatalf("after power loss: %+v %v", r, err)
	}
}
