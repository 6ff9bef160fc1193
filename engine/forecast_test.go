package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// crashOpen opens a second engine on a crash image of h's disk (a kill -9:
// what was synced, no final checkpoint); it closes when the test ends.
func (h *harness) crashOpen() *harness {
	h.t.Helper()
	opt := h.opt
	opt.FS = h.fs.Crash(nil)
	e, err := Open(opt)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { e.Close() })
	return &harness{t: h.t, fs: opt.FS.(*vfs.Mem), clk: h.clk, e: e, opt: opt}
}

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
	f := h.e.side.fc
	// After Open the count of the checkpoint's timers may still run in
	// the background (forecastrecount.go): the counts are whole, and the
	// invariant holds, only once it is done, as readers see them.
	if err := f.wait(); err != nil {
		h.t.Fatalf("forecast not ready: %v", err)
	}
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

// TestForecastReplay: changes after the last checkpoint (a send, a cancel,
// a reschedule, a fire) are replayed into the counts after a crash, on top
// of the checkpoint's counts, read from the timer buckets as they are
// verified; a message moved away and back counts once.
func TestForecastReplay(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	at := func(d time.Duration) message.When { return message.When{At: t0.Add(d).UnixMilli()} }
	a := h.send("a", "", at(time.Minute+time.Second))
	b := h.send("a", "", at(2*time.Minute+time.Second))
	back := h.send("a", "", at(3*time.Minute+time.Second))
	h.send("a", "", at(30*time.Second)) // fires after the checkpoint
	// Away and back within the checkpoint: two identical bucket entries.
	if _, err := h.e.Reschedule(ctx, back.ID, at(4*time.Minute), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := h.e.Reschedule(ctx, back.ID, at(3*time.Minute+time.Second), 0); err != nil {
		t.Fatal(err)
	}
	h.restart() // a clean checkpoint of all that
	want := []int64{1, 1, 1, 1, 0}
	if got := h.forecastCounts("a", 5); !equalCounts(got, want) {
		t.Fatalf("after the checkpoint: %v, want %v", got, want)
	}
	if err := h.e.Cancel(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.e.Reschedule(ctx, b.ID, at(4*time.Minute+time.Second), 0); err != nil {
		t.Fatal(err)
	}
	h.send("a", "", at(2*time.Minute+5*time.Second))
	h.clk.Advance(40 * time.Second)
	h.waitVisible("a", 1)
	want = []int64{0, 0, 1, 1, 1}
	if got := h.forecastCounts("a", 5); !equalCounts(got, want) {
		t.Fatalf("live: %v, want %v", got, want)
	}
	// kill -9: the image holds what was synced; no final checkpoint.
	crashed := h.crashOpen()
	if got := crashed.forecastCounts("a", 5); !equalCounts(got, want) {
		t.Fatalf("after the crash: %v, want %v", got, want)
	}
	crashed.checkForecastTotal()
}

// TestForecastAfterTimerRebuild: when the timer buckets are found damaged
// and rebuilt from the log, the counts are made again from the log and the
// partial count of the damaged files is dropped.
func TestForecastAfterTimerRebuild(t *testing.T) {
	for _, remove := range []bool{true, false} {
		h := newHarness(t, nil)
		ctx := context.Background()
		for m := 1; m <= 3; m++ {
			h.send("a", "", message.When{At: t0.Add(time.Duration(m)*time.Minute + time.Second).UnixMilli()})
		}
		gone := h.send("a", "", message.When{At: t0.Add(2*time.Minute + 2*time.Second).UnixMilli()})
		if err := h.e.Cancel(ctx, gone.ID); err != nil {
			t.Fatal(err)
		}
		h.e.Close()
		damageTimers(t, h.fs, "data", remove)
		h.open()
		if got, want := h.forecastCounts("a", 4), []int64{0, 1, 1, 1}; !equalCounts(got, want) {
			t.Fatalf("remove=%v: after the rebuild %v, want %v", remove, got, want)
		}
		if h.e.Stats().CacheRebuilds.Load() != 1 {
			t.Fatalf("remove=%v: the timer buckets were not rebuilt", remove)
		}
		h.checkForecastTotal()
	}
}

// TestForecastWindowed: a message with a tolerance window is counted at its
// fire time, inside its window; cancel, reschedule, restart (with changes
// replayed) and fire take it out of the bucket it was counted in.
func TestForecastWindowed(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	sum := func(cs []int64) (n int64) {
		for _, c := range cs {
			n += c
		}
		return n
	}
	var ids []message.ID
	for i := 0; i < 30; i++ {
		ids = append(ids, h.send("a", "", message.When{Delay: time.Minute + 10*time.Second, Window: 2 * time.Minute}).ID)
	}
	got := h.forecastCounts("a", 5)
	if sum(got) != 30 || got[0] != 0 || got[4] != 0 {
		t.Fatalf("windowed sends: %v; want 30 within minutes 1 to 3", got)
	}
	h.checkForecastTotal()
	h.restart() // a checkpoint, then counted again from the buckets
	if got := h.forecastCounts("a", 5); sum(got) != 30 {
		t.Fatalf("after restart: %v; want 30", got)
	}
	for _, id := range ids[:5] {
		if err := h.e.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.e.Reschedule(ctx, ids[5], message.When{At: t0.Add(4*time.Minute + time.Second).UnixMilli()}, 0); err != nil {
		t.Fatal(err)
	}
	want := h.forecastCounts("a", 5)
	if sum(want) != 25 || want[4] != 1 {
		t.Fatalf("after 5 cancels and a reschedule to minute 4: %v", want)
	}
	h.checkForecastTotal()
	// kill -9: the cancels and the reschedule are replayed from the log.
	crashed := h.crashOpen()
	if got := crashed.forecastCounts("a", 5); !equalCounts(got, want) {
		t.Fatalf("after the crash: %v, want %v", got, want)
	}
	crashed.checkForecastTotal()
}

// TestForecastCountsChangesDuringTheDeferredCount: the count of the
// checkpoint's timers runs after Open; sends, cancels, reschedules and
// fires made while it runs (held here until they are done) wait and are
// applied after it, so the counts are those of a count made before them:
// the same as a restart with nothing running beside its count.
func TestForecastCountsChangesDuringTheDeferredCount(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	var ids []message.ID
	for m, n := range []int{0, 2, 3, 4} { // minute 1: 2, minute 2: 3, minute 3: 4
		for range n {
			ids = append(ids, h.send("a", "", message.When{Delay: time.Duration(m)*time.Minute + 10*time.Second}).ID)
		}
	}
	far := h.send("a", "", message.When{Delay: 3 * 24 * time.Hour}) // in the timer runs, not loaded
	h.e.Close()
	gate := make(chan struct{})
	h.opt.recountGate = gate
	h.open()
	if err := h.e.Cancel(ctx, ids[2]); err != nil { // minute 2
		t.Fatal(err)
	}
	if _, err := h.e.Reschedule(ctx, ids[5], message.When{At: t0.Add(time.Minute + 30*time.Second).UnixMilli()}, 0); err != nil {
		t.Fatal(err) // minute 3 to minute 1
	}
	if _, err := h.e.Reschedule(ctx, far.ID, message.When{At: t0.Add(2*time.Minute + 5*time.Second).UnixMilli()}, 0); err != nil {
		t.Fatal(err) // 3 days to minute 2
	}
	h.send("a", "", message.When{Delay: 3*time.Minute + 20*time.Second}) // minute 3
	waitParked(h.e, h.clk)
	h.clk.Advance(time.Minute + 40*time.Second)
	h.settle("a", 3) // minute 1: two and the one moved there
	f := h.e.side.fc
	f.mu.Lock()
	held, waiting := f.deferred, len(f.deltas)
	f.mu.Unlock()
	if !held || waiting == 0 {
		t.Fatalf("the count was not held while the changes were made (deferred %v, %d changes waiting): the test proves nothing", held, waiting)
	}
	close(gate)
	want := []int64{0, 0, 3, 4}
	if got := h.forecastCounts("a", 4); !equalCounts(got, want) {
		t.Fatalf("after the count: %v, want %v", got, want)
	}
	h.checkForecastTotal()
	if n := sum(h.forecastCounts("a", 4*24*60)); n != 7 {
		t.Fatalf("%d pending counted in 4 days, want 7 (the far one moved)", n)
	}
	h.restart()
	if got := h.forecastCounts("a", 4); !equalCounts(got, want) {
		t.Fatalf("after a restart: %v, want %v", got, want)
	}
	h.checkForecastTotal()
}
