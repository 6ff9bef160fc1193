package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// TestAbsoluteTimeWhileTheClockHolds restarts the broker with the wall
// clock an hour behind the time it had reached: the broker clock holds at
// that time until the wall clock catches up. An absolute time half an hour
// ahead by the wall clock is already past by the held broker clock. It was
// due at once, visible 30 minutes early by the wall clock. It must be
// early by neither clock: it is due at the first millisecond the broker
// clock reaches when it moves again (so after the wall clock passed the
// time asked for), and visible only then. A time past by both clocks is
// due at once, one ahead of the held time is due as given, and a deadline
// that the held clock has passed is refused with an error that says why.
func TestAbsoluteTimeWhileTheClockHolds(t *testing.T) {
	h := newHarness(t, nil)
	l := &clockLedger{h: h}
	l.advance(5 * time.Second)
	reached := h.e.Now()
	h.e.Close()
	h.clk.Jump(-time.Hour)
	h.open()
	wall := h.clk.Now().UnixMilli()
	if now := h.e.Now(); now != reached || wall != reached-3_600_000 {
		t.Fatalf("after the restart the broker reads %s and the wall clock %s; want %s held, an hour ahead", fmtMs(now), fmtMs(wall), fmtMs(reached))
	}

	if got := h.e.ClockHeld(); got != time.Hour {
		t.Fatalf("ClockHeld after the restart: %v, want 1h", got)
	}
	held := l.send("h", "wall+30m", message.When{At: wall + 30*60_000})
	if held.Due != reached+1 {
		t.Fatalf("at = wall + 30 min while the clock holds at %s: due %s, want %s (when the broker clock moves again)",
			fmtMs(reached), fmtMs(held.Due), fmtMs(reached+1))
	}
	past := l.send("h", "wall-1m", message.When{At: wall - 60_000})
	ahead := l.send("h", "held+10m", message.When{At: reached + 10*60_000})
	if past.Due != reached || ahead.Due != reached+10*60_000 {
		t.Fatalf("a time past by both clocks is due %s (want %s at once); one after the held time %s (want it as given)",
			fmtMs(past.Due), fmtMs(reached), fmtMs(ahead.Due))
	}
	if rep := l.check("just after the restart"); rep.Visible != 1 || rep.Pending != 2 {
		t.Fatalf("just after the restart: %s", rep)
	}
	_, err := h.e.Send(t.Context(), message.Message{Topic: "h", Body: []byte("d")}, message.When{Deadline: wall + 30*60_000})
	if errs.CodeOf(err) != errs.InvalidArgument || !strings.Contains(err.Error(), "holds at") {
		t.Fatalf("a deadline ahead by the wall clock and past by the held one: %v; want invalid_argument that says the clock holds", err)
	}

	// The wall clock passes the time asked for: the broker clock still
	// holds, and by it the message is not due yet. Late by the wall clock,
	// never early by either.
	l.advance(31 * time.Minute)
	if rep := l.check("the wall clock past the time asked for"); rep.Visible != 1 || rep.Pending != 2 {
		t.Fatalf("the wall clock past the time asked for: %s", rep)
	}
	// The wall clock reaches the held time and the broker clock moves.
	l.advance(29*time.Minute + time.Second)
	if h.clk.Now().UnixMilli() <= reached {
		t.Fatal("the wall clock did not catch up")
	}
	if rep := l.check("the broker clock moving again"); rep.Visible != 2 || rep.Pending != 1 {
		t.Fatalf("the broker clock moving again: %s", rep)
	}
	if got := h.e.ClockHeld(); got != 0 {
		t.Fatalf("ClockHeld once the wall clock caught up: %v", got)
	}
	l.advance(10 * time.Minute)
	if rep := l.check("ten minutes later"); rep.Visible != 3 || rep.Pending != 0 {
		t.Fatalf("ten minutes later: %s", rep)
	}
}

// TestRescheduleWhileTheClockHolds: a reschedule to an absolute time is
// resolved as a send's is.
func TestRescheduleWhileTheClockHolds(t *testing.T) {
	h := newHarness(t, nil)
	r := h.send("h", "k", message.When{Delay: 24 * time.Hour})
	h.clk.Advance(5 * time.Second)
	reached := h.e.Now()
	h.clk.Jump(-time.Hour)
	wall := h.clk.Now().UnixMilli()
	due, err := h.e.Reschedule(t.Context(), r.ID, message.When{At: wall + 30*60_000}, 0)
	if err != nil || due != reached+1 {
		t.Fatalf("reschedule to wall + 30 min while the clock holds at %s: due %s, %v; want %s", fmtMs(reached), fmtMs(due), err, fmtMs(reached+1))
	}
}
