package engine

import (
	"context"
	"testing"
	"time"
)

// A released message is handed out again at once, with the attempt it had
// before the lease, and never dead-lettered for a lease no consumer saw;
// receipts already acked, unknown or of another group are skipped.
func TestReleaseGivesLeasesBackUncounted(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	if err := h.e.CreateTopic("t", TopicConfig{Queues: 1}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.CreateGroup("t", "g", GroupConfig{MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	h.sendVisible("t", 2)
	got, err := h.e.Receive(ctx, ReceiveRequest{Topic: "t", Group: "g", Max: 2, Invisible: time.Hour})
	if err != nil || len(got) != 2 {
		t.Fatalf("%d, %v", len(got), err)
	}
	if err := h.e.Ack(ctx, "t", "g", got[1].Receipt); err != nil {
		t.Fatal(err)
	}
	rs := []string{got[0].Receipt, got[1].Receipt, "bm90LWEtcmVjZWlwdA", got[0].Receipt}
	if n := h.e.Release("t", "g", rs); n != 1 {
		t.Fatalf("released %d, want 1 (the acked, the malformed and the repeated receipt skipped)", n)
	}
	if n := h.e.Release("t", "other", rs); n != 0 {
		t.Fatalf("released %d in another group", n)
	}
	again, err := h.e.Receive(ctx, ReceiveRequest{Topic: "t", Group: "g", Max: 2, Invisible: time.Hour})
	if err != nil || len(again) != 1 || again[0].ID != got[0].ID || again[0].Attempt != 1 {
		t.Fatalf("after release: %+v, %v; want the released message again at attempt 1", again, err)
	}
	gs, _ := h.e.Groups("t")
	if gs[0].DeadLettered != 0 || gs[0].InFlight != 1 {
		t.Fatalf("group %+v: want nothing dead-lettered, one in flight", gs[0])
	}
}
