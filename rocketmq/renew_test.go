package rocketmq

import (
	"context"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
)

// TestAutoRenewKeepsLeaseUntilClientGoes: a message received with a
// 300 ms auto_renew lease stays hidden from the group while its client
// lives, well past the lease (counted in renewals, not in sleeps); when
// the client goes away the renewals stop and the message is delivered
// again with attempt 2; an ack ends the renewal.
func TestAutoRenewKeepsLeaseUntilClientGoes(t *testing.T) {
	eng := engineWithOne(t)
	ctx := context.Background()
	const lease = 300 * time.Millisecond
	rs, err := eng.Receive(ctx, engine.ReceiveRequest{Topic: "t", Group: "g", Invisible: lease, Wait: 5 * time.Second})
	if err != nil || len(rs) != 1 {
		t.Fatalf("receive: %v %v", rs, err)
	}
	r := newRenewer(eng, lease, time.Hour)
	done := make(chan struct{})
	defer close(done)
	r.add("c1", "t", "g", []string{rs[0].Receipt})
	go r.run(done)

	// Six renewals, a third of a lease apart: two leases have passed since
	// the receive, so without them the message would be back.
	waitFor(t, func() bool { return r.renewals.Load() >= 6 })
	if again, err := eng.Receive(ctx, engine.ReceiveRequest{Topic: "t", Group: "g", Invisible: lease}); err != nil || len(again) != 0 {
		t.Fatalf("while renewed, the message was delivered again: %v %v", again, err)
	}

	r.forget("c1")
	if r.count() != 0 {
		t.Fatalf("%d leases still renewed after the client went", r.count())
	}
	again, err := eng.Receive(ctx, engine.ReceiveRequest{Topic: "t", Group: "g", Invisible: lease, Wait: 10 * time.Second})
	if err != nil || len(again) != 1 || again[0].Attempt != 2 {
		t.Fatalf("after the client went: %+v %v; want the message again with attempt 2", again, err)
	}

	r.add("c2", "t", "g", []string{again[0].Receipt})
	r.drop(again[0].Receipt) // what AckMessage does
	if err := eng.Ack(ctx, "t", "g", again[0].Receipt); err != nil {
		t.Fatal(err)
	}
	if r.count() != 0 {
		t.Fatalf("%d leases still renewed after the ack", r.count())
	}
}

// TestAutoRenewStopsAtLimit: a lease is renewed for at most the limit.
func TestAutoRenewStopsAtLimit(t *testing.T) {
	eng, err := engine.Open(engine.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	r := newRenewer(eng, 300*time.Millisecond, 0) // every lease is past a zero limit
	r.add("c", "t", "g", []string{"receipt"})
	r.renewAll()
	if r.count() != 0 || r.renewals.Load() != 0 {
		t.Fatalf("a lease past the limit: %d held, %d renewals; want none", r.count(), r.renewals.Load())
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
