package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// abImage is a power loss taken while an AckBehind was being written.
type abImage struct {
	mem  *vfs.Mem
	torn bool // unsynced bytes kept at random, not the synced state alone
}

// TestAckBehindPowerLossRedeliversNeverLoses: an ack answered before its
// record is durable may come back after a power loss (at least once), but
// no message is lost, the acked one included, and none comes back twice.
// Images are taken at every write and sync from the call on: the first
// one precedes the ack record's fdatasync, so the acked message must come
// back in it; once the ack is durable (the checkpoint waits for it,
// invariant E2) it must not.
func TestAckBehindPowerLossRedeliversNeverLoses(t *testing.T) {
	mem := vfs.NewMem()
	var mu sync.Mutex
	armed := false
	var images []abImage
	fs := &crashFS{mem: mem, hook: func(bool) {
		mu.Lock()
		defer mu.Unlock()
		if armed {
			images = append(images, abImage{mem: mem.Crash(nil)},
				abImage{mem: mem.Crash(rand.New(rand.NewPCG(uint64(len(images)), 3))), torn: true})
		}
	}}
	opts := Options{Dir: "data", FS: fs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		CheckpointInterval: 1000 * time.Hour, DefaultQueues: 2}
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.CreateTopic("ab", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	bodies := map[string]string{} // message ID -> body
	for i := range 3 {
		// Delayed, so that each delivery follows a fire record.
		rc, err := e.Send(ctx, message.Message{Topic: "ab", Body: fmt.Appendf(nil, "m%d", i)}, message.When{Delay: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		bodies[rc.ID.String()] = fmt.Sprintf("m%d", i)
	}
	got := receiveN(t, e, 3)
	acked := got[0]
	mu.Lock()
	armed = true
	mu.Unlock()
	if err := e.AckBehind(ctx, "ab", "g", acked.Receipt); err != nil {
		t.Fatal(err)
	}
	// A second ack of the same receipt fails: the lease ended at the call.
	if err := e.AckBehind(ctx, "ab", "g", acked.Receipt); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("second AckBehind of one receipt: %v, want not found", err)
	}
	if err := e.checkpoint(); err != nil { // waits for the ack behind (gate)
		t.Fatal(err)
	}
	mu.Lock()
	armed = false
	final := mem.Crash(nil)
	imgs := images
	mu.Unlock()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if len(imgs) == 0 {
		t.Fatal("no image was taken while the ack was written")
	}
	for i, img := range imgs {
		back := recoverAndCount(t, img.mem, opts, bodies, acked.ID.String())
		n := back[acked.ID.String()]
		if i == 0 && !img.torn && n != 1 {
			t.Errorf("image 0 (before the ack's fdatasync): the acked message came back %d times, want 1", n)
		}
		if n > 1 {
			t.Errorf("image %d: the acked message came back %d times", i, n)
		}
	}
	if n := recoverAndCount(t, final, opts, bodies, acked.ID.String())[acked.ID.String()]; n != 0 {
		t.Errorf("after the ack was durable the acked message came back %d times", n)
	}
}

// receiveN receives n messages of topic ab as group g.
func receiveN(t *testing.T, e *Engine, n int) []Received {
	t.Helper()
	var out []Received
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		rs, err := e.Receive(context.Background(), ReceiveRequest{Topic: "ab", Group: "g", Max: n - len(out), Invisible: time.Minute, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rs...)
	}
	if len(out) != n {
		t.Fatalf("received %d of %d", len(out), n)
	}
	return out
}

// recoverAndCount opens image and receives until every message but acked
// came back; it returns how many times each message ID was delivered,
// and fails if a message never acked is missing (lost).
func recoverAndCount(t *testing.T, image *vfs.Mem, opts Options, bodies map[string]string, acked string) map[string]int {
	t.Helper()
	opts.FS = image
	e, err := Open(opts)
	if err != nil {
		t.Fatalf("recovery: %v", err)
	}
	defer e.Close()
	count := map[string]int{}
	// Every message is visible at once after recovery (leases are not
	// durable); receive until the two never acked are back, then take
	// whatever else is visible, so that a missing one shows as lost.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		rs, err := e.Receive(context.Background(), ReceiveRequest{Topic: "ab", Group: "g", Max: 10, Invisible: time.Minute, Wait: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if string(r.Message.Body) != bodies[r.ID.String()] {
				t.Fatalf("delivered %s with body %q, want %q", r.ID, r.Message.Body, bodies[r.ID.String()])
			}
			count[r.ID.String()]++
		}
		if len(rs) == 0 && allBack(count, bodies, acked) {
			break
		}
	}
	if !allBack(count, bodies, acked) {
		t.Fatalf("after recovery not every message never acked came back (lost): delivered %v of %v", count, bodies)
	}
	return count
}

// allBack reports whether every message of bodies but acked was delivered.
func allBack(count map[string]int, bodies map[string]string, acked string) bool {
	for id := range bodies {
		if id != acked && count[id] == 0 {
			return false
		}
	}
	return true
}
