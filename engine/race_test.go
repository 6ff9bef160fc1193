package engine

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// The cancel/fire and reschedule/fire races, made deterministic: the
// change's log sync is held while the clock passes the message's due time
// and the dispatch loop runs. A message whose cancel or reschedule is being
// made durable must not be dispatched meanwhile (invariant E5 of the
// architecture), and after the change returns it is never visible (cancel)
// or visible only at its new time (reschedule).

// gateFS passes everything to a vfs.FS, except that once armed it holds
// the next operation op (vfs.OpSync or vfs.OpRead) of a file whose name
// starts with prefix and ends with suffix, until released. It is a wrapper
// of its own rather than a vfs.Faulty hook: Faulty serialises its hook
// calls, so a hook that blocks would also stall every other file operation
// (the loop's bucket reads among them), and the test would then observe a
// stalled engine rather than the race.
type gateFS struct {
	vfs.FS
	op             vfs.Op
	prefix, suffix string

	mu      sync.Mutex
	armed   bool
	skip    int           // matching operations let through before the one held
	seen    int           // matching operations since armed
	reached chan struct{} // closed when the held operation begins
	release chan struct{} // closed by the test to let it go on
}

// arm holds the next matching operation.
func (g *gateFS) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = true
	g.reached = make(chan struct{})
	g.release = make(chan struct{})
}

// armFile holds the next matching operation of a file ending with suffix.
func (g *gateFS) armFile(suffix string) {
	g.mu.Lock()
	g.suffix = suffix
	g.mu.Unlock()
	g.arm()
}

func (g *gateFS) wrap(f vfs.File, name string, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &gateFile{File: f, g: g, name: name}, nil
}

func (g *gateFS) Create(name string) (vfs.File, error) {
	f, err := g.FS.Create(name)
	return g.wrap(f, name, err)
}

func (g *gateFS) Open(name string) (vfs.File, error) {
	f, err := g.FS.Open(name)
	return g.wrap(f, name, err)
}

// pass holds the caller if the gate is armed for op on name.
func (g *gateFS) pass(op vfs.Op, name string) {
	g.mu.Lock()
	hold := g.armed && op == g.op && strings.HasPrefix(name, g.prefix) && strings.HasSuffix(name, g.suffix)
	if hold && g.seen < g.skip {
		g.seen++
		hold = false
	}
	var reached, release chan struct{}
	if hold {
		g.armed = false
		reached, release = g.reached, g.release
	}
	g.mu.Unlock()
	if hold {
		close(reached)
		<-release
	}
}

type gateFile struct {
	vfs.File
	g    *gateFS
	name string
}

func (f *gateFile) Sync() error {
	f.g.pass(vfs.OpSync, f.name)
	return f.File.Sync()
}

func (f *gateFile) ReadAt(p []byte, off int64) (int, error) {
	f.g.pass(vfs.OpRead, f.name)
	return f.File.ReadAt(p, off)
}

// raceRig is an engine on a gated Mem with a fake clock and a ledger.
type raceRig struct {
	t      *testing.T
	gate   *gateFS
	clk    *clock.Fake
	opts   Options
	e      *Engine
	events []event
}

func newRaceRig(t *testing.T) *raceRig {
	r := &raceRig{t: t, gate: &gateFS{FS: vfs.NewMem(), op: vfs.OpSync, prefix: "data/log/"}, clk: clock.NewFake(t0)}
	r.opts = Options{Dir: "data", FS: r.gate, Clock: r.clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		CheckpointInterval: 1000 * time.Hour, BucketWidth: 10 * time.Second}
	e, err := Open(r.opts)
	if err != nil {
		t.Fatal(err)
	}
	r.e = e
	t.Cleanup(func() {
		if r.e != nil {
			r.e.Close()
		}
	})
	return r
}

func (r *raceRig) now() int64 { return r.clk.Now().UnixMilli() }

func (r *raceRig) send(body string, d time.Duration) message.ID {
	r.t.Helper()
	rc, err := r.e.Send(context.Background(), message.Message{Topic: "race", Body: []byte(body)}, message.When{Delay: d})
	if err != nil {
		r.t.Fatal(err)
	}
	r.events = append(r.events, event{kind: evSend, state: evAcked, id: rc.ID, topic: "race", body: body, due: rc.Due})
	return rc.ID
}

// check lets the clock reach at and checks the ledger there.
func (r *raceRig) check(step string, at int64) {
	r.t.Helper()
	if d := at - r.now(); d > 0 {
		waitParked(r.e, r.clk)
		r.clk.Advance(time.Duration(d) * time.Millisecond)
	}
	if !waitSettled(r.e, r.now(), 5*time.Second) {
		r.t.Fatalf("%s: engine did not settle: %s", step, engineState(r.e))
	}
	if rep := checkEngine(r.e, buildModel(r.events), r.now()); rep.failures() > 0 {
		r.t.Fatalf("%s: %s", step, rep)
	}
}

// inFlight reports whether the loop has taken pos for a fire record (a
// staged message, in a due heap before its time, is not taken yet).
func inFlight(e *Engine, pos uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.disp.takenLocked(pos) {
		return true
	}
	if e.disp.inflightHas(pos) {
		return true
	}
	return false
}

// holdChangeAcrossDue starts change (a cancel or reschedule of victim) with
// its log sync held, advances the clock past the due time of victim and of
// witness (both due at the same time), and waits until the loop has taken
// witness for its fire record: the loop ran past the due time. victim must
// not be dispatched then. It returns the change's result once released.
func (r *raceRig) holdChangeAcrossDue(victim, witness message.ID, change func() error) error {
	r.t.Helper()
	waitParked(r.e, r.clk) // the loop sleeps until the due time
	r.gate.arm()
	done := make(chan error, 1)
	go func() { done <- change() }()
	select {
	case <-r.gate.reached:
	case err := <-done:
		r.t.Fatalf("the change returned (%v) without syncing the log", err)
	case <-time.After(10 * time.Second):
		r.t.Fatal("the change never reached its log sync")
	}
	// The loop may have been woken by the change (a reschedule kicks it
	// only after its append); wait until it sleeps on the clock again.
	r.clk.Advance(2 * time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for !inFlight(r.e, witness.Pos) {
		if time.Now().After(deadline) {
			r.t.Fatalf("the loop did not take the witness message due before %d: %s", r.now(), engineState(r.e))
		}
		r.e.life.kickLoop()
		time.Sleep(100 * time.Microsecond)
	}
	if inFlight(r.e, victim.Pos) {
		r.t.Errorf("the message was dispatched while its change was being made durable")
	}
	r.e.mu.Lock()
	inWheel := r.e.disp.holds(victim.Pos)
	r.e.mu.Unlock()
	if inWheel {
		r.t.Errorf("the message is still in the wheel while its change is being made durable")
	}
	close(r.gate.release)
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		r.t.Fatal("the change did not return after its sync was released")
	}
	return nil
}

func TestCancelFireRace(t *testing.T) {
	r := newRaceRig(t)
	victim := r.send("victim", time.Second)
	witness := r.send("witness", time.Second)
	err := r.holdChangeAcrossDue(victim, witness, func() error { return r.e.Cancel(context.Background(), victim) })
	if err != nil {
		t.Fatalf("cancel: %v", err)
	}
	r.events = append(r.events, event{kind: evCancel, state: evAcked, id: victim})
	r.check("after the cancel returned", r.now())
	r.check("long after the due time", r.now()+time.Minute.Milliseconds())
	if info, err := r.e.Inspect(victim); err != nil || info.State != StateCancelled {
		t.Fatalf("inspect of the cancelled message: %+v %v", info, err)
	}
	if err := r.e.Close(); err != nil {
		t.Fatal(err)
	}
	e, err := Open(r.opts)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	r.e = e
	r.check("after a restart", r.now()+time.Second.Milliseconds())
}

func TestRescheduleFireRace(t *testing.T) {
	r := newRaceRig(t)
	victim := r.send("victim", time.Second)
	witness := r.send("witness", time.Second)
	oldDue := r.now() + 1000
	newAt := r.now() + 5000
	var due int64
	err := r.holdChangeAcrossDue(victim, witness, func() error {
		var err error
		due, err = r.e.Reschedule(context.Background(), victim, message.When{At: newAt}, 0)
		return err
	})
	if err != nil || due != newAt {
		t.Fatalf("reschedule: due %d, %v; want %d", due, err, newAt)
	}
	r.events = append(r.events, event{kind: evResched, state: evAcked, id: victim, due: due})
	r.check("after the reschedule returned", r.now()) // 2 s: not visible at its old due time
	if info, err := r.e.Inspect(victim); err != nil || info.State != StatePending || info.Due != newAt {
		t.Fatalf("inspect before the new due time: %+v %v", info, err)
	}
	r.check("just before the new due time", newAt-1)
	r.check("at the new due time", newAt)
	info, err := r.e.Inspect(victim)
	if err != nil || info.State != StateVisible || info.Visible < newAt {
		t.Fatalf("inspect after the new due time: %+v %v", info, err)
	}
	if info.Visible == oldDue {
		t.Fatalf("visible at the old due time %d", oldDue)
	}
	t.Logf("rescheduled from %d to %d while the loop passed %d; visible at %d", oldDue, newAt, oldDue+1000, info.Visible)
}
