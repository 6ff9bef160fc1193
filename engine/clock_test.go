package engine

import (
	"path"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// clockLedger keeps the ledger of the clock tests' sends and checks the
// engine against it at the engine's own time.
type clockLedger struct {
	h      *harness
	events []event
}

func (l *clockLedger) send(topic, body string, w message.When) Receipt {
	r, err := l.h.e.Send(l.h.t.Context(), message.Message{Topic: topic, Body: []byte(body)}, w)
	if err != nil {
		l.h.t.Fatalf("send %s: %v", body, err)
	}
	l.events = append(l.events, event{kind: evSend, state: evAcked, id: r.ID, topic: topic, body: body, due: r.Due})
	return r
}

// check waits until the engine settled at its own time and checks that
// exactly what is due by then is visible, none of it early.
func (l *clockLedger) check(step string) *report {
	l.h.t.Helper()
	now := l.h.e.Now()
	if !waitSettled(l.h.e, now, 5*time.Second) {
		l.h.t.Fatalf("%s: engine did not settle at %d: %s", step, now, engineState(l.h.e))
	}
	rep := checkEngine(l.h.e, buildModel(l.events), now)
	if rep.failures() > 0 {
		l.h.t.Fatalf("%s (engine time %s): %s", step, fmtMs(now), rep)
	}
	return rep
}

// advance moves wall and monotonic time together, as time passing does.
func (l *clockLedger) advance(d time.Duration) {
	waitParked(l.h.e, l.h.clk)
	l.h.clk.Advance(d)
}

// TestClockJumps steps the wall clock an hour forward and an hour back
// around pending messages. The engine's clock follows a forward step (what
// it skipped falls due at once) and holds still after a backward one until
// the wall clock catches up, so nothing becomes visible before its due time
// on the engine's clock, nothing is lost, and each step is counted once.
func TestClockJumps(t *testing.T) {
	h := newHarness(t, nil)
	l := &clockLedger{h: h}
	base := h.e.Now()
	l.send("j", "near", message.When{Delay: 10 * time.Second})        // in the wheel
	l.send("j", "half-hour", message.When{Delay: 30 * time.Minute})   // in a bucket on disk
	l.send("j", "two-hours", message.When{Delay: 2 * time.Hour})      // beyond the jump
	l.send("j", "ten-days", message.When{Delay: 10 * 24 * time.Hour}) // far away
	if rep := l.check("before the jumps"); rep.Visible != 0 || rep.Pending != 4 {
		t.Fatalf("before the jumps: %s", rep)
	}

	checkSmallSteps(t, h, base)

	// An hour forward: the near and half-hour messages are due at once.
	h.clk.Jump(time.Hour)
	l.advance(time.Second) // the loop notices a step within a second
	now := h.e.Now()
	if now != base+int64(time.Hour/time.Millisecond)+1000 {
		t.Fatalf("after an hour's jump the engine reads %s, want %s", fmtMs(now), fmtMs(base+3601000))
	}
	if n := h.e.Stats().ClockJumps.Load(); n != 1 {
		t.Fatalf("jumps after one step forward: %d", n)
	}
	if rep := l.check("after the forward jump"); rep.Visible != 2 || rep.Pending != 2 {
		t.Fatalf("after the forward jump: %s", rep)
	}

	// An hour back: the engine's time holds; a message sent now is due
	// relative to it, not to the wall clock.
	h.clk.Jump(-time.Hour)
	if got := h.e.Now(); got != now {
		t.Fatalf("after a step back the engine reads %s, want it held at %s", fmtMs(got), fmtMs(now))
	}
	if n := h.e.Stats().ClockJumps.Load(); n != 2 {
		t.Fatalf("jumps after a step back: %d", n)
	}
	after := l.send("j", "after-back-step", message.When{Delay: time.Minute})
	if after.Due != now+60000 {
		t.Fatalf("a one-minute delay after the step back is due %s, want %s", fmtMs(after.Due), fmtMs(now+60000))
	}
	// 59 minutes later the wall clock is still behind: nothing moves.
	for i := 0; i < 59; i++ {
		l.advance(time.Minute)
	}
	if got := h.e.Now(); got != now {
		t.Fatalf("the engine's time moved to %s while the wall clock was behind it", fmtMs(got))
	}
	if rep := l.check("while the wall clock catches up"); rep.Visible != 2 || rep.Pending != 3 {
		t.Fatalf("while the wall clock catches up: %s", rep)
	}

	// A restart while the wall clock is behind the time the engine had
	// reached: what is visible stays, nothing pending fires early.
	h.restart()
	if rep := l.check("after a restart behind the old time"); rep.Visible != 2 || rep.Pending != 3 {
		t.Fatalf("after a restart behind the old time: %s", rep)
	}
	if n := h.e.Stats().ClockJumps.Load(); n != 0 {
		t.Fatalf("a restart counted %d jumps", n)
	}

	// The wall clock catches up and passes: the rest falls due in order.
	l.advance(2 * time.Minute)
	if rep := l.check("a minute after the wall clock caught up"); rep.Visible != 3 {
		t.Fatalf("a minute after the wall clock caught up: %s", rep)
	}
	l.advance(time.Hour)
	if rep := l.check("past two hours"); rep.Visible != 4 {
		t.Fatalf("past two hours: %s", rep)
	}
	l.advance(10 * 24 * time.Hour)
	if rep := l.check("past ten days"); rep.Visible != 5 || rep.Pending != 0 {
		t.Fatalf("past ten days: %s", rep)
	}
	if n := h.e.Stats().ClockJumps.Load(); n != 0 {
		t.Fatalf("time passing counted %d jumps", n)
	}
}

// checkSmallSteps checks that a 500 ms step forward and back, below the
// jump threshold, is not a jump: the engine follows the step forward and
// holds its time at the step back.
func checkSmallSteps(t *testing.T, h *harness, base int64) {
	t.Helper()
	h.clk.Jump(500 * time.Millisecond)
	if got := h.e.Now(); got != base+500 {
		t.Fatalf("after a 500ms step the engine reads %d, want %d", got, base+500)
	}
	if n := h.e.Stats().ClockJumps.Load(); n != 0 {
		t.Fatalf("a 500ms step counted as %d jumps", n)
	}
	h.clk.Jump(-500 * time.Millisecond)
	if got := h.e.Now(); got != base+500 {
		t.Fatalf("after a 500ms step back the engine reads %d, want it held at %d", got, base+500)
	}
	if n := h.e.Stats().ClockJumps.Load(); n != 0 {
		t.Fatalf("a 500ms step back counted as %d jumps", n)
	}
}

// TestRestartWithClockBehind restarts the broker with the wall clock ten
// minutes behind the time it had reached (an NTP step during downtime, a VM
// snapshot restored). The broker clock is persisted: it resumes where it
// was, so a message sent with a ten-minute delay after the restart is due
// ten minutes after the old time, not at once.
func TestRestartWithClockBehind(t *testing.T) {
	h := newHarness(t, nil)
	l := &clockLedger{h: h}
	l.send("b", "before", message.When{Delay: time.Second})
	l.advance(5 * time.Second)
	if rep := l.check("before the restart"); rep.Visible != 1 {
		t.Fatalf("before the restart: %s", rep)
	}
	reached := h.e.Now()
	h.e.Close()
	h.clk.Jump(-10 * time.Minute)
	h.open()
	if got := h.e.Now(); got < reached {
		t.Fatalf("after a restart 10m behind the broker reads %s, before the %s it had reached", fmtMs(got), fmtMs(reached))
	}
	r := l.send("b", "after", message.When{Delay: 10 * time.Minute})
	if r.Due < reached+600_000 {
		t.Fatalf("a 10m delay sent after the restart is due %s, before %s", fmtMs(r.Due), fmtMs(reached+600_000))
	}
	if rep := l.check("just after the restart"); rep.Visible != 1 || rep.Pending != 1 {
		t.Fatalf("just after the restart: %s", rep)
	}
	// Ten minutes of wall time later the wall clock has only caught up:
	// the broker clock stood still, the message is still pending.
	l.advance(10 * time.Minute)
	if rep := l.check("when the wall clock caught up"); rep.Visible != 1 || rep.Pending != 1 {
		t.Fatalf("when the wall clock caught up: %s", rep)
	}
	l.advance(10*time.Minute + time.Second)
	if rep := l.check("ten minutes after that"); rep.Visible != 2 {
		t.Fatalf("ten minutes after that: %s", rep)
	}
}

// TestRestartWithClockBehindAfterCrash is TestRestartWithClockBehind after
// a power loss instead of a clean close: no checkpoint records the time the
// broker reached, only the log does (the fire record, written at that
// time). Recovery must take the broker clock's floor from the replayed
// records, or a delay sent after the restart is counted from the wall
// clock, an hour behind, and fires up to an hour early.
func TestRestartWithClockBehindAfterCrash(t *testing.T) {
	h := newHarness(t, nil)
	l := &clockLedger{h: h}
	l.send("b", "before", message.When{Delay: time.Second})
	l.advance(10 * time.Minute)
	if rep := l.check("before the crash"); rep.Visible != 1 {
		t.Fatalf("before the crash: %s", rep)
	}
	reached := h.e.Now()
	// The fire record that carries the time reached is visible before it
	// is durable (E21): wait for its fdatasync, or the crash can take it
	// back and, with it, the only record of that time.
	if err := h.e.Sync(); err != nil {
		t.Fatal(err)
	}
	// The power goes: what was synced stays, no checkpoint is written.
	img := h.fs.Crash(nil)
	h.e.Close()
	if _, err := img.Open(path.Join(h.opt.Dir, checkpointFile)); !vfs.IsNotExist(err) {
		t.Fatalf("the crash image holds a checkpoint (%v): the test needs one whose only record of the time reached is the log", err)
	}
	h.fs, h.opt.FS = img, img
	h.clk.Jump(-time.Hour)
	h.open()
	if got := h.e.Now(); got < reached {
		t.Errorf("after a crash and a restart 1h behind the broker reads %s, before the %s it had reached", fmtMs(got), fmtMs(reached))
	}
	r := l.send("b", "after", message.When{Delay: 30 * time.Minute})
	if want := reached + 30*60_000; r.Due < want {
		t.Errorf("a 30m delay sent after the restart is due %s, before %s", fmtMs(r.Due), fmtMs(want))
	}
	if rep := l.check("just after the restart"); rep.Visible != 1 || rep.Pending != 1 {
		t.Fatalf("just after the restart: %s", rep)
	}
	// An hour of wall time later the wall clock has only caught up with
	// the time the broker had reached: the message is still pending.
	l.advance(time.Hour)
	if rep := l.check("when the wall clock caught up"); rep.Visible != 1 || rep.Pending != 1 {
		t.Fatalf("when the wall clock caught up: %s", rep)
	}
	l.advance(30*time.Minute + time.Second)
	if rep := l.check("thirty minutes after that"); rep.Visible != 2 || rep.Pending != 0 {
		t.Fatalf("thirty minutes after that: %s", rep)
	}
}
