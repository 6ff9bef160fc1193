package kafkamode_test

import (
	"context"
	ebin "encoding/binary"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaTakeoverFromSnapshot: a long-pending message sits at offset 0
// of a one-partition delay topic, so the group's committed offset stays
// there, and 2,000 short ones behind it fire. The worker snapshots its
// pending index every 300 ms. Once a snapshot covers every record, it is
// SIGKILLed and restarted: the new
// incarnation must resume from the snapshot's read position, re-reading
// (almost) none of the 2,001 delay records, and still deliver the
// long-pending one once, not early.
func TestKafkaTakeoverFromSnapshot(t *testing.T) {
	e := newEnv(t, 1)
	c := e.collect(e.biz)
	l := &ledger{due: map[string]int64{}}
	w := e.startWorker("w1", "--snapshot-interval", "300ms")
	now := time.Now().UnixMilli()
	e.produce(l, []msg{{id: "long", due: now + 25000}})
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	var short []msg
	for i := 0; i < 2000; i++ {
		short = append(short, msg{id: fmt.Sprintf("s%04d", i), due: now + 300 + rng.Int63n(1500)})
	}
	e.produce(l, short)
	// Wait for a snapshot that covers every record: its header (format in
	// the package doc) has a read position past the last offset, 2000.
	waitSnapshot(t, e, 0, 2001)
	c.waitFor(t, len(short), 30*time.Second)
	w.kill(t)

	// The committed offset is still the long-pending record's.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	committed, err := kadm.NewClient(e.cl).FetchOffsets(ctx, e.group)
	if err != nil {
		t.Fatal(err)
	}
	if co, ok := committed.Lookup(e.delay, 0); !ok || co.At != 0 {
		t.Fatalf("committed offset %+v, want 0 (the long-pending record)", co)
	}

	w2 := e.startWorker("w1")
	got := e.settle(c, l, 60*time.Second)
	v := l.check(got)
	t.Logf("take-over from a snapshot: %s; lateness %s", v, v.latenessSummary())
	if !v.ok() {
		t.Fatalf("%s", v)
	}
	st := w2.stop(t)
	t.Logf("restarted worker: %v", st)
	if st["takeover_records_read"] > 50 {
		t.Errorf("the take-over re-read %d delay records; with the snapshot it should read (almost) none of the 2,001",
			st["takeover_records_read"])
	}
	if st["forwarded"] != 1 {
		t.Errorf("the restarted worker forwarded %d records, want 1 (the long-pending one)", st["forwarded"])
	}
}

// waitSnapshot reads the state topic until the latest committed snapshot
// header of delay partition p names a read position of at least read. It
// decodes the header as the package doc draws it: 0x01, then uvarints id,
// read position and chunk count.
func waitSnapshot(t *testing.T, e *env, p int32, read int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.addr), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{e.state: {p: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	key := fmt.Sprintf("%s/%d/snapshot", e.delay, p)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var last int64 = -1
	for last < read {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("no snapshot of %s/%d with a read position of %d within 60 s (last seen: %d)", e.delay, p, read, last)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) != key {
				return
			}
			b := r.Value
			if len(b) == 0 || b[0] != 2 {
				t.Fatalf("snapshot header %x: want version byte 2 (doc.go)", b)
			}
			b = b[1:]
			var v [3]uint64
			for i := range v {
				x, n := ebin.Uvarint(b)
				if n <= 0 {
					t.Fatalf("snapshot header %x does not decode", r.Value)
				}
				v[i], b = x, b[n:]
			}
			last = int64(v[1])
		})
	}
}
