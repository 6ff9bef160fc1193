package kafkamode

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/forecast"
)

// TestForecastCountsPendingOnce: the forecast counts each pending entry of
// the index once, by due second, and leaves out what is not pending: a
// control entry, an entry in a transaction, a cancelled one, one of a
// revoked partition, and the second heap slot of an entry.
func TestForecastCountsPendingOnce(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Brokers = []string{"127.0.0.1:1"}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := newPartProgress(0, nil), newPartProgress(1, nil)
	w.parts.parts[0], w.parts.parts[1] = p0, p1
	base := int64(1_800_000_000_000) // a whole minute
	twice := &entry{pp: p0, offset: 1, due: base + 500}
	for _, e := range []*entry{
		{pp: p0, offset: 0, due: base},
		twice, twice,
		{pp: p1, offset: 0, due: base + 61_000},
		{pp: p0, offset: 2, due: base, ctl: &control{dlqReason: "bad"}},
		{pp: p0, offset: 3, due: base, inBatch: true},
		{pp: p0, offset: 4, due: base, cancelled: true},
	} {
		w.idx.due.push(e)
	}
	gone := newPartProgress(2, nil)
	gone.dropped.Store(true)
	w.idx.due.push(&entry{pp: gone, offset: 0, due: base})

	plan, err := forecast.NewPlan(base, base+120_000, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		f   IndexForecast
		err error
	}
	done := make(chan result)
	go func() {
		f, err := w.Forecast(context.Background(), plan)
		done <- result{f, err}
	}()
	var got result
	for answered := false; !answered; {
		w.answerQueries() // the loop's part
		select {
		case got = <-done:
			answered = true
		case <-time.After(time.Millisecond):
		}
	}
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got.f.Pending != 3 || len(got.f.Buckets) != 2 || got.f.Buckets[0].Count != 2 || got.f.Buckets[1].Count != 1 {
		t.Fatalf("pending %d, buckets %+v; want 3 pending, 2 in the first minute and 1 in the second", got.f.Pending, got.f.Buckets)
	}
	if len(got.f.Partitions) != 2 || got.f.Partitions[0] != 0 || got.f.Partitions[1] != 1 {
		t.Fatalf("partitions %v, want [0 1]", got.f.Partitions)
	}
}

// TestForecastWithoutLoop: with no loop to answer, a forecast gives up
// when its context ends, and a full queue refuses at once.
func TestForecastWithoutLoop(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Brokers = []string{"127.0.0.1:1"}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := forecast.NewPlan(0, 60_000, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := w.Forecast(ctx, plan); !errors.Is(err, ErrNotServing) {
		t.Fatalf("got %v, want ErrNotServing", err)
	}
	for range maxQueuedQueries - 1 {
		_ = w.ask(ctx, func() {})
	}
	if err := w.ask(context.Background(), func() {}); !errors.Is(err, ErrNotServing) || errors.Is(err, context.Canceled) {
		t.Fatalf("a full queue answered %v, want ErrNotServing at once", err)
	}
}
