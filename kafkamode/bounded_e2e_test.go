package kafkamode_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/kafkamode"
)

// stateBound is the documented bound (doc.go, "Bounded state") on a delay
// partition's live state keys and on the state records a take-over reads,
// while nothing else is pending: the resolution slots of one epoch
// (maxResolutionSlots, 4,096), a snapshot header and chunk, the chunk
// tombstone of a larger earlier snapshot and the copy records.
const stateBound = 4096 + 4

// TestKafkaBoundedState (issue 27, defect 1): one message due in an hour
// at the head of a partition, then many due within seconds behind it.
// The group's committed offset stays at the head throughout, so every
// record behind it is resolved out of due order. Once they are all
// forwarded and a snapshot covers them, the state partition must hold a
// bounded number of live keys (latest value per key not a tombstone),
// and a take-over must read a bounded number of state records and no
// delay record again, and forward none of them a second time. At
// def821c the state partition grew by one live marker per record behind
// the head, and a take-over read all of them. HOURGLASS_KAFKA_BOUNDED_N
// sets the count (default 30,000).
func TestKafkaBoundedState(t *testing.T) {
	n := 30_000
	if s := os.Getenv("HOURGLASS_KAFKA_BOUNDED_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("HOURGLASS_KAFKA_BOUNDED_N=%q: want a positive count", s)
		}
	}
	e := newEnv(t, 1)
	c := e.collect(e.biz)
	l := &ledger{due: map[string]int64{}}
	now := time.Now().UnixMilli()
	// The head is not in the ledger: it must never arrive (cancelled
	// below), and an arrival would count as unknown.
	e.produce(nil, []msg{{id: "head", due: now + 3600_000}})
	const batch = 10_000
	for i := 0; i < n; i += batch {
		var ms []msg
		for j := i; j < min(n, i+batch); j++ {
			ms = append(ms, msg{id: fmt.Sprintf("m%07d", j), due: now + 2000})
		}
		e.produce(l, ms)
	}
	w := e.startWorker("w1", "--snapshot-interval", "1s")
	c.waitFor(t, n, 5*time.Minute)
	waitSnapshot(t, e, 0, int64(n)+1)
	keys, records := liveStateKeys(t, e, 0)
	t.Logf("%d records behind a long head: state partition has %d records, %d live keys", n, records, keys)
	if keys > stateBound {
		t.Errorf("the state partition holds %d live keys after %d records resolved behind one pending head, want at most %d",
			keys, n, stateBound)
	}
	w.kill(t)

	w2 := e.startWorker("w1")
	cancel := &kgo.Record{Topic: e.delay, Key: []byte("head"), Headers: []kgo.RecordHeader{
		{Key: kafkamode.HeaderCancel, Value: []byte("offset:0")}}}
	if err := e.cl.ProduceSync(t.Context(), cancel).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := e.settle(c, l, 2*time.Minute)
	v := l.check(got)
	t.Logf("after the take-over: %s", v)
	if !v.ok() {
		t.Fatalf("%s", v)
	}
	st := w2.stop(t)
	t.Logf("take-over: %d state records read, %d delay records read again, %d forwarded",
		st["state_records_read"], st["takeover_records_read"], st["forwarded"])
	if st["state_records_read"] > stateBound {
		t.Errorf("the take-over read %d state records, want at most %d", st["state_records_read"], stateBound)
	}
	if st["takeover_records_read"] > 2 || st["forwarded"] != 0 || st["cancelled"] != 1 {
		t.Errorf("the take-over read %d delay records again, forwarded %d, cancelled %d; want at most 2 (the head's cancel), 0 and 1",
			st["takeover_records_read"], st["forwarded"], st["cancelled"])
	}
}

// liveStateKeys reads state partition p to its end and returns how many
// keys have a live latest value (what compaction keeps, tombstones aside)
// and how many records it read.
func liveStateKeys(t *testing.T, e *env, p int32) (keys, records int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(e.cl).ListEndOffsets(ctx, e.state)
	if err != nil {
		t.Fatal(err)
	}
	end, ok := ends.Lookup(e.state, p)
	if !ok || end.Err != nil {
		t.Fatalf("no end offset of %s/%d: %v", e.state, p, end.Err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.addr), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{e.state: {p: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	live := map[string]bool{}
	for done := end.Offset == 0; !done; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s/%d to %d: %v", e.state, p, end.Offset, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= end.Offset-1 {
				done = true
			}
			if r.Attrs.IsControl() || r.Offset >= end.Offset {
				return
			}
			records++
			live[string(r.Key)] = r.Value != nil
		})
	}
	for _, v := range live {
		if v {
			keys++
		}
	}
	return keys, records
}
