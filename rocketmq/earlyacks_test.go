package rocketmq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	pb "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

// TestEarlyAcksKill9RedeliverNeverLose: with -grpc-early-acks the official
// client's acks are answered before their records are durable. The broker
// is killed with SIGKILL right after the last ack's answer; after a
// restart every message not acked comes back exactly once, and an acked
// one at most once (its record may not have been written): redelivered,
// never lost.
func TestEarlyAcksKill9RedeliverNeverLose(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p1 := startProc(t, dir, "--grpc-early-acks")
	prod := newProducer(t, p1.broker, "orders")
	sent := map[string]bool{}
	for i := range 20 {
		rs, err := prod.Send(context.Background(), &rmq.Message{Topic: "orders", Body: fmt.Appendf(nil, "order %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		sent[rs[0].MessageID] = true
	}
	c1 := newConsumerNoCleanup(t, p1.broker, "billing", "orders", time.Second)
	acked := map[string]bool{}
	seen := map[string]bool{}
	receiveUntil(t, c1, 20*time.Second, time.Minute, false, func(mv *rmq.MessageView, _ time.Time) bool {
		id := mv.GetMessageId()
		if !seen[id] && len(acked) < 10 {
			if err := c1.Ack(context.Background(), mv); err != nil {
				t.Fatalf("Ack: %v", err)
			}
			acked[id] = true
		}
		seen[id] = true
		return len(seen) == len(sent)
	})
	p1.cmd.Process.Kill() // SIGKILL, right after the last ack's answer
	<-p1.exited
	c1.GracefulStop()

	p2 := startProc(t, dir, "--grpc-early-acks")
	c2 := newConsumer(t, p2.broker, "billing", "orders", time.Second)
	got := map[string]int{}
	receiveUntil(t, c2, 20*time.Second, time.Minute, true, func(mv *rmq.MessageView, _ time.Time) bool {
		got[mv.GetMessageId()]++
		for id := range sent {
			if !acked[id] && got[id] == 0 {
				return false
			}
		}
		return true
	})
	// Everything is acked now (synced or not, the broker is up): one more
	// long poll must bring nothing that was not counted.
	mvs, err := c2.Receive(context.Background(), 32, time.Minute)
	if err != nil && rpcCode(err) != int32(pb.Code_MESSAGE_NOT_FOUND) {
		t.Fatal(err)
	}
	for _, mv := range mvs {
		got[mv.GetMessageId()]++
	}
	for id := range sent {
		switch n := got[id]; {
		case !acked[id] && n != 1:
			t.Errorf("message %s, never acked, delivered %d times after the restart, want once", id, n)
		case acked[id] && n > 1:
			t.Errorf("message %s, acked before the kill, delivered %d times after the restart, want at most once", id, n)
		}
	}
	for id, n := range got {
		if !sent[id] {
			t.Errorf("unknown message %s delivered %d times", id, n)
		}
	}
}
