package schedule

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

var errDiskFull = errs.New(errs.ResourceExhausted, "disk full: nothing was written")

// cancelsFailing is the engine with Cancel failing after ok more calls
// while fail is set, as on a full disk.
type cancelsFailing struct {
	Broker
	fail atomic.Bool
	ok   atomic.Int64
}

func (b *cancelsFailing) Cancel(ctx context.Context, id message.ID) error {
	if b.fail.Load() && b.ok.Add(-1) < 0 {
		return errDiskFull
	}
	return b.Broker.Cancel(ctx, id)
}

// runnerOn replaces g's runner by one on broker b.
func (g *rig) runnerOn(b Broker) {
	g.t.Helper()
	g.r.Close()
	r, err := Open(Options{Dir: "/data/schedules", FS: g.fs, Broker: b, Clock: g.clk, Logger: quiet})
	if err != nil {
		g.t.Fatal(err)
	}
	g.r = r
}

// aheadOnFailingCancels is a rig whose runner's cancels can be made to
// fail, with an @every 1s schedule s whose next 15 s are sent ahead.
func aheadOnFailingCancels(t *testing.T) (*rig, *cancelsFailing) {
	t.Helper()
	g := newRig(t)
	b := &cancelsFailing{Broker: g.eng}
	g.runnerOn(b)
	if _, err := g.r.Create(Schedule{ID: "s", Topic: "t", Cron: "@every 1s"}); err != nil {
		t.Fatal(err)
	}
	g.aheadSent()
	return g, b
}

// aheadSent waits until the firings of the next 15 s of an @every 1s
// schedule s are sent ahead.
func (g *rig) aheadSent() {
	g.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if in, err := g.r.Get("s"); err == nil && in.LastFire >= g.clk.Now().Add(15*time.Second).UnixMilli() {
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatal("the firings of the next 15 s were not sent ahead")
		}
	}
}

// countAfter returns how many firings of topic t after at were
// delivered, failing on one delivered twice.
func (g *rig) countAfter(at int64) (n int) {
	for _, ft := range g.visible("t") { // fails on a key delivered twice
		if ft > at {
			n++
		}
	}
	return n
}

// TestPauseWhoseCancelsFailSaysSo (invariant S3): a pause whose cancels
// of the firings sent ahead fail (a full disk) does not answer success:
// it says that firings sent ahead may still be delivered. The schedule is
// paused durably with what is left to cancel, so the next start cancels
// them (as after a crash between the pause and its cancels), and nothing
// fires while it is paused; after a resume every fire time is delivered
// once.
func TestPauseWhoseCancelsFailSaysSo(t *testing.T) {
	g, b := aheadOnFailingCancels(t)
	b.fail.Store(true)
	paused := g.clk.Now().UnixMilli()
	info, err := g.r.Pause("s")
	if errs.CodeOf(err) != errs.Unavailable || !errors.Is(err, errDiskFull) || !info.Paused {
		t.Fatalf("pause whose cancels failed: %+v, %v; want paused, unavailable and the cancels' error", info, err)
	}
	b.fail.Store(false)
	g.runnerOn(g.eng) // a restart: it cancels what the pause could not
	g.advance(25 * time.Second)
	if n := g.countAfter(paused); n != 0 {
		t.Fatalf("%d firings after the pause were delivered", n)
	}
	resumed := g.clk.Now().UnixMilli()
	if _, err := g.r.Resume("s"); err != nil {
		t.Fatal(err)
	}
	g.advance(25 * time.Second)
	if n := g.countAfter(resumed); n != 25 {
		t.Fatalf("%d firings in the 25 s after the resume, want 25", n)
	}
}

// TestPauseRetriesCancels: a pause again retries the cancels a pause
// left; one that cancelled some firings sent ahead and not others leaves
// the rest to fire, each once, and a resume then sends every fire time
// after it once: none twice, none missing.
func TestPauseRetriesCancels(t *testing.T) {
	g, b := aheadOnFailingCancels(t)
	b.ok.Store(5)
	b.fail.Store(true)
	if _, err := g.r.Pause("s"); err == nil {
		t.Fatal("a pause whose cancels failed answered success")
	}
	resumed := g.clk.Now().UnixMilli()
	if _, err := g.r.Resume("s"); err != nil {
		t.Fatal(err)
	}
	g.advance(25 * time.Second)
	if n := g.countAfter(resumed); n != 25 {
		t.Fatalf("%d firings in the 25 s after a resume of a half-cancelled pause, want 25", n)
	}
	g.aheadSent()
	b.ok.Store(0)
	if _, err := g.r.Pause("s"); err == nil {
		t.Fatal("a pause whose cancels failed answered success")
	}
	b.fail.Store(false)
	paused := g.clk.Now().UnixMilli()
	if _, err := g.r.Pause("s"); err != nil {
		t.Fatalf("a pause again, with cancels working: %v", err)
	}
	g.advance(25 * time.Second)
	if n := g.countAfter(paused); n != 0 {
		t.Fatalf("%d firings after the pause were delivered", n)
	}
}

// TestDeleteWhoseCancelsFailSaysSo: a delete whose cancels fail does not
// answer success while firings it sent ahead are still pending: it
// leaves the schedule paused, and a delete again finishes it; nothing
// fires after it.
func TestDeleteWhoseCancelsFailSaysSo(t *testing.T) {
	g, b := aheadOnFailingCancels(t)
	b.fail.Store(true)
	deleted := g.clk.Now().UnixMilli()
	if _, err := g.r.Delete("s"); errs.CodeOf(err) != errs.Unavailable || !errors.Is(err, errDiskFull) {
		t.Fatalf("a delete whose cancels failed: %v; want unavailable and the cancels' error", err)
	}
	if info, err := g.r.Get("s"); err != nil || !info.Paused {
		t.Fatalf("after a delete whose cancels failed: %+v %v; want the schedule there, paused", info, err)
	}
	b.fail.Store(false)
	if _, err := g.r.Delete("s"); err != nil {
		t.Fatalf("a delete again: %v", err)
	}
	g.advance(25 * time.Second)
	if n := g.countAfter(deleted); n != 0 {
		t.Fatalf("%d firings after the delete were delivered", n)
	}
}
