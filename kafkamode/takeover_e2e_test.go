package kafkamode_test

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestKafkaTakeoverFromSnapshot: a long-pending message sits at offset 0
// of a one-partition delay topic, so the group's committed offset stays
// there, and 2,000 short ones behind it fire. The worker snapshots its
// pending index every 300 ms. It is SIGKILLed and restarted: the new
// incarnation must resume from the snapshot's read position, re-reading
// (almost) none of the 2,001 delay records, and still deliver the
// long-pending one once, not early.
func TestKafkaTakeoverFromSnapshot(t *testing.T) {
	e := newEnv(t, 1)
	c := e.collect(e.biz)
	l := &ledger{due: map[string]int64{}}
	metricsAddr := freeAddr(t)
	w := e.startWorker("w1", "--snapshot-interval", "300ms", "--metrics-listen", metricsAddr)
	now := time.Now().UnixMilli()
	e.produce(l, []msg{{id: "long", due: now + 14000}})
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	var short []msg
	for i := 0; i < 2000; i++ {
		short = append(short, msg{id: fmt.Sprintf("s%04d", i), due: now + 300 + rng.Int63n(1500)})
	}
	e.produce(l, short)
	// Wait until the worker has read every record, then for a snapshot
	// written after that (so it covers them all).
	url := "http://" + metricsAddr + "/metrics"
	waitMetric := func(name string, atLeast float64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for scrape(t, url)[name] < atLeast {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not reach %v within 30 s", name, atLeast)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitMetric("hourglass_kafka_records_read_total", 2001)
	waitMetric("hourglass_kafka_snapshots_total", scrape(t, url)["hourglass_kafka_snapshots_total"]+1)
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
