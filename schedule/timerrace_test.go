package schedule

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/vfs"
)

// jumpingClock is a manual clock that, once armed, moves itself on by jump
// inside the next NewTimer call for less than a second (the loop's wait
// once a firing is due within the second), before the timer starts: the
// moment a preempted loop loses between computing its wait and starting
// its timer, made to happen on demand.
//
// With inSince, it moves instead inside the next Since call, before
// reading: a clock moved between the loop's two readings (its monotonic
// base and the broker's time) is then in the base and not in the time the
// wait is computed from, unless the base is read first.
type jumpingClock struct {
	*clock.Fake
	armed   atomic.Bool
	inSince bool
	jump    time.Duration
}

func (c *jumpingClock) NewTimer(d time.Duration) clock.Timer {
	if !c.inSince && d < time.Second && c.armed.CompareAndSwap(true, false) {
		c.Fake.Advance(c.jump)
	}
	return c.Fake.NewTimer(d)
}

func (c *jumpingClock) Since() time.Duration {
	if c.inSince && c.armed.CompareAndSwap(true, false) {
		c.Fake.Advance(c.jump)
	}
	return c.Fake.Since()
}

// TestLoopRecomputesWhenTheClockMovedBeforeItsTimer: the clock moves past
// a fire time between the runner's loop computing its wait and starting
// its timer. The firing is still sent: the loop sees that the clock moved
// and computes again. On a manual clock a timer started late would never
// fire (nothing else moves the clock here); the test waits for the
// firing's send, not for a sleep.
func TestLoopRecomputesWhenTheClockMovedBeforeItsTimer(t *testing.T) {
	t.Run("inside NewTimer", func(t *testing.T) { testClockMovedBeforeTimer(t, false) })
	t.Run("between the loop's two readings", func(t *testing.T) { testClockMovedBeforeTimer(t, true) })
}

func testClockMovedBeforeTimer(t *testing.T, inSince bool) {
	// The first firing (10:01:00) is sent ahead by the runner's lead of
	// 20 s: 500 ms from the start.
	at := time.Date(2026, 11, 30, 10, 0, 39, 500e6, time.UTC)
	fake := clock.NewFake(at)
	fs := vfs.NewMem()
	o := engine.NewOptions("/data")
	o.FS, o.Clock, o.Logger = fs, fake, quiet
	eng, err := engine.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	clk := &jumpingClock{Fake: fake, jump: time.Second, inSince: inSince} // 10:00:39.5 -> 10:00:40.5
	open := func() *Runner {
		r, err := Open(Options{Dir: "/data/schedules", FS: fs, Broker: eng, Clock: clk, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := open()
	if _, err := r.Create(Schedule{ID: "tick", Topic: "ticks", Cron: "* * * * *", Body: []byte("tick")}); err != nil {
		t.Fatal(err)
	}
	// A runner opened on the stored schedule computes its first wait with
	// the schedule known and no kick pending (Create's kick would wake
	// the loop whatever its timer).
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	clk.armed.Store(true)
	r = open()
	defer r.Close()
	deadline := time.Now().Add(10 * time.Second)
	for r.Stats().Sent.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the 10:01:00 firing, sent ahead from 10:00:40, was not sent with the clock at %v (armed %v): the loop slept on a timer started after the clock moved",
				fake.Now().UTC(), clk.armed.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if clk.armed.Load() {
		t.Fatal("the clock never jumped inside NewTimer: the test did not exercise the race")
	}
}
