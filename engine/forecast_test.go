package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// forecastCounts asks for the per-minute counts of the next n minutes.
func (h *harness) forecastCounts(topic string, n int) []int64 {
	h.t.Helper()
	from := t0.UnixMilli()
	bs, err := h.e.Forecast(topic, from, from+int64(n)*60_000, time.Minute)
	if err != nil {
		h.t.Fatalf("forecast: %v", err)
	}
	out := make([]int64, len(bs))
	for i, b := range bs {
		out[i] = b.Count
	}
	return out
}

// checkForecastTotal checks the invariant: every pending message is
// counted exactly once.
func (h *harness) checkForecastTotal() {
	h.t.Helper()
	f := h.e.fc
	f.mu.Lock()
	got := f.all.Total()
	f.mu.Unlock()
	if want := h.e.Stats().Pending.Load(); got != want {
		h.t.Fatalf("forecast counts %d messages, pending is %d", got, want)
	}
}

func equalCounts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestForecastFollowsChanges: sends land in their minute; a cancelled
// message and a rescheduled one leave their old bucket (the rescheduled one
// enters its new one); fired messages leave; a restart rebuilds the same
// counts from the timer buckets, both for messages in the near window and
// for far-future ones.
func TestForecastFollowsChanges(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	var ids []message.ID
	for m, n := range []int{0, 2, 3, 4} { // minute 1: 2, minute 2: 3, minute 3: 4
		for i := 0; i < n; i++ {
			r := h.send("a", "", message.When{Delay: time.Duration(m)*time.Minute + 10*time.Second})
			ids = append(ids, r.ID)
		}
	}
	h.send("b", "", message.When{Delay: 3*time.Minute + 20*time.Second})
	far := h.send("a", "", message.When{Delay: 3 * 24 * time.Hour}) // on disk, not in the wheel
	h.checkForecastTotal()
	if got := h.forecastCounts("a", 4); !equalCounts(got, []int64{0, 2, 3, 4}) {
		t.Fatalf("topic a: %v", got)
	}
	if got := h.forecastCounts("", 4); !equalCounts(got, []int64{0, 2, 3, 5}) {
		t.Fatalf("all topics: %v", got)
	}
	// Cancel one of minute 2; move one of minute 3 to minute 1, and the
	// far one to minute 2.
	if err := h.e.Cancel(ctx, ids[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := h.e.Reschedule(ctx, ids[5], message.When{At: t0.Add(time.Minute + 30*time.Second).UnixMilli()}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := h.e.Reschedule(ctx, far.ID, message.When{At: t0.Add(2*time.Minute + 5*time.Second).UnixMilli()}, 0); err != nil {
		t.Fatal(err)
	}
	want := []int64{0, 3, 3, 3}
	if got := h.forecastCounts("a", 4); !equalCounts(got, want) {
		t.Fatalf("after cancel and reschedules: %v, want %v", got, want)
	}
	h.checkForecastTotal()
	h.restart()
	if got := h.forecastCounts("a", 4); !equalCounts(got, want) {
		t.Fatalf("after restart: %v, want %v", got, want)
	}
	h.checkForecastTotal()
	// Fire minute 1 and 2: they leave.
	h.clk.Advance(2*time.Minute + 30*time.Second)
	h.settle("a", 6)
	if got := h.forecastCounts("a", 4); !equalCounts(got, []int64{0, 0, 0, 3}) {
		t.Fatalf("after firing: %v", got)
	}
	h.checkForecastTotal()
	h.restart()
	if got := h.forecastCounts("", 4); !equalCounts(got, []int64{0, 0, 0, 4}) {
		t.Fatalf("after firing and restart: %v", got)
	}
	h.checkForecastTotal()
}

// TestForecastRejects: bad requests are invalid_argument, an unknown topic
// not_found, and a topic with nothing pending is all zeros.
func TestForecastRejects(t *testing.T) {
	h := newHarness(t, nil)
	now := t0.UnixMilli()
	for _, c := range []struct {
		from, to int64
		step     time.Duration
	}{
		{now, now, time.Minute},
		{now, now - 1, time.Minute},
		{now, now + 3600_000, 100 * time.Millisecond},
		{now, now + 3*3600_000, time.Second}, // 10,800 buckets
	} {
		if _, err := h.e.Forecast("", c.from, c.to, c.step); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("Forecast(%d, %d, %v): %v, want invalid_argument", c.from, c.to, c.step, err)
		}
	}
	if _, err := h.e.Forecast("nope", now, now+60_000, time.Second); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("unknown topic: %v", err)
	}
	if err := h.e.CreateTopic("empty", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	if got := h.forecastCounts("empty", 3); !equalCounts(got, []int64{0, 0, 0}) {
		t.Errorf("empty topic: %v", got)
	}
	h.send("x", "", message.When{Delay: 30 * time.Second})
	h.send("x", "", message.When{Delay: 90 * time.Minute})
	if n := h.e.DueWithin(time.Minute); n != 1 {
		t.Errorf("due within 1m: %d", n)
	}
	if n := h.e.DueWithin(24 * time.Hour); n != 2 {
		t.Errorf("due within 24h: %d", n)
	}
}
