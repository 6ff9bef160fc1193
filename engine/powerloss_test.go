package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// plState is one simulated power loss: the disk image and what the client
// had been told when it was taken.
type plState struct {
	run, n int
	image  *vfs.Mem
	at     time.Time
	events []event // acknowledged and failed operations, then those in flight as doubts
	// durable is how many of events a power loss cannot undo: all of them
	// under sync flush; under async flush those before the start of the
	// last completed checkpoint, which syncs the log.
	durable int
}

// plOptions are the engine options of the power-loss runs: tiny segments
// and buckets so that rolls, bucket loads and removals, retention and
// checkpoints all happen within a few dozen operations.
func plOptions(fs vfs.FS, clk clock.Clock) Options {
	return Options{
		Dir: "data", FS: fs, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		SegmentBytes: 512, DefaultQueues: 2, BucketWidth: time.Second,
		CheckpointInterval: 1000 * time.Hour, // checkpoints are called by the run, at known points
		Retention:          2 * time.Second,
	}
}

// plRun drives one engine through random operations and hands a crash
// image of its disk, with the ledger of that moment, to states after every
// operation that changes the image.
type plRun struct {
	t      *testing.T
	id     int
	rng    *rand.Rand
	clk    *clock.Fake
	e      *Engine
	states chan<- plState
	sent   []event // acknowledged sends, to pick cancel and reschedule targets
	seen   map[string]bool
	seq    int
	async  bool // FlushAsync: acknowledged is not durable until a checkpoint
	// flushEvery, when set, replaces the async runs' 2 ms sync period
	// (a real-time ticker), for a scenario that must lose acknowledged
	// sends whatever the machine's load.
	flushEvery time.Duration

	mu       sync.Mutex // guards the fields below; held briefly by the hook
	mem      *vfs.Mem
	events   []event
	inflight []event
	images   int
	durable  int // async: len(events) when the last completed checkpoint began
}

func (r *plRun) capture(durable bool) {
	if r.states == nil {
		return
	}
	// The images are taken under mu, as the ledger is read: an operation
	// that begins or ends meanwhile waits, so an image holds nothing the
	// ledger has not seen begin. (Captures come from every goroutine that
	// writes a file, the commit log's preallocator among them, not only
	// from the operation in flight.)
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.images
	r.images += 2
	evs := r.events[:len(r.events):len(r.events)]
	keep := len(evs)
	if r.async {
		keep = r.durable
	}
	for _, d := range r.inflight {
		evs = append(evs, d)
	}
	at := r.clk.Now()
	if durable {
		// Only the synced state: what the disk surely holds.
		r.states <- plState{run: r.id, n: n, image: r.mem.Crash(nil), at: at, events: evs, durable: keep}
	}
	// Synced state plus a random prefix of every file's unsynced tail.
	rng := rand.New(rand.NewPCG(uint64(r.id), uint64(n)))
	r.states <- plState{run: r.id, n: n + 1, image: r.mem.Crash(rng), at: at, events: evs, durable: keep}
}

// begin records operations in flight; end records how they ended.
func (r *plRun) begin(evs ...event) {
	r.mu.Lock()
	r.inflight = append(r.inflight[:0], evs...)
	r.mu.Unlock()
}

func (r *plRun) end(evs ...event) {
	r.mu.Lock()
	r.events = append(r.events, evs...)
	r.inflight = r.inflight[:0]
	r.mu.Unlock()
}

func (r *plRun) now() int64 { return r.clk.Now().UnixMilli() }

func (r *plRun) when() message.When {
	switch p := r.rng.IntN(100); {
	case p < 10:
		return message.When{}
	case p < 20:
		return message.When{At: r.now() - r.rng.Int64N(5000) - 1}
	case p < 30:
		return message.When{Level: 1 + r.rng.IntN(2)}
	default:
		return message.When{Delay: time.Duration(r.rng.IntN(3000)) * time.Millisecond}
	}
}

func (r *plRun) newSend() event {
	r.seq++
	ev := event{kind: evSend, state: evDoubt, topic: []string{"pa", "pb"}[r.rng.IntN(2)],
		body: fmt.Sprintf("r%d-%d", r.id, r.seq)}
	if r.rng.IntN(3) == 0 {
		ev.key = fmt.Sprintf("k%d", r.rng.IntN(4))
	}
	if r.rng.IntN(3) == 0 {
		ev.dedup = fmt.Sprintf("d%d-%d", r.id, r.seq)
	}
	ev.when = r.when()
	return ev
}

func (r *plRun) send(n int) {
	reqs := make([]SendRequest, n)
	evs := make([]event, n)
	for i := range reqs {
		evs[i] = r.newSend()
		reqs[i] = evs[i].request()
	}
	r.begin(evs...)
	rs, err := r.e.SendBatch(context.Background(), reqs)
	if err != nil {
		r.t.Errorf("run %d: send: %v", r.id, err)
		for i := range evs {
			evs[i].state = evFailed
		}
		r.end(evs...)
		return
	}
	for i := range evs {
		evs[i].state, evs[i].id, evs[i].due = evAcked, rs[i].ID, rs[i].Due
		r.sent = append(r.sent, evs[i])
	}
	r.end(evs...)
}

// request is the send request of a send event.
func (ev *event) request() SendRequest {
	return SendRequest{Message: message.Message{Topic: ev.topic, Key: ev.key, Body: []byte(ev.body), DedupID: ev.dedup}, When: ev.when}
}

// resend sends an acknowledged message with a dedup ID again, as a client
// retrying a send whose answer it lost: it must store nothing and name the
// first message, unless retention removed that one (its window ended).
func (r *plRun) resend() {
	var targets []event
	for _, ev := range r.sent {
		if ev.dedup != "" {
			targets = append(targets, ev)
		}
	}
	if len(targets) == 0 {
		return
	}
	target := targets[r.rng.IntN(len(targets))]
	ev := target
	ev.state = evDoubt
	r.begin(ev)
	rc, err := r.e.SendBatch(context.Background(), []SendRequest{target.request()})
	switch {
	case err != nil:
		r.t.Errorf("run %d: resend of %v: %v", r.id, target.id, err)
		ev.state = evFailed
	case rc[0].Duplicate && rc[0].ID == target.id:
		ev.state = evFailed // stored nothing
	default:
		if _, ierr := r.e.Inspect(target.id); errs.CodeOf(ierr) != errs.NotFound {
			r.t.Errorf("run %d: resend of %v with dedup ID %q stored %v (duplicate %v) while the first is there",
				r.id, target.id, target.dedup, rc[0].ID, rc[0].Duplicate)
		}
		ev.state, ev.id, ev.due = evAcked, rc[0].ID, rc[0].Due
		r.sent = append(r.sent, ev)
	}
	r.end(ev)
}

func (r *plRun) change(resched bool) {
	if len(r.sent) == 0 {
		return
	}
	target := r.sent[r.rng.IntN(len(r.sent))]
	ev := event{kind: evCancel, state: evDoubt, id: target.id}
	var err error
	if resched {
		at := r.now() + r.rng.Int64N(3000)
		ev.kind, ev.lo, ev.hi = evResched, at, at
		r.begin(ev)
		ev.due, err = r.e.Reschedule(context.Background(), target.id, message.When{At: at}, 0)
	} else {
		r.begin(ev)
		err = r.e.Cancel(context.Background(), target.id)
	}
	switch {
	case err == nil:
		ev.state = evAcked
	case errs.CodeOf(err) == errs.FailedPrecondition, errs.CodeOf(err) == errs.NotFound:
		// Already delivered or cancelled, or delivered long ago and
		// removed by retention (the checker verifies that): no effect.
		ev.state = evFailed
	default:
		r.t.Errorf("run %d: change %v: %v", r.id, target.id, err)
		ev.state = evFailed
	}
	r.end(ev)
}

// advance moves the clock and waits until the engine made visible what
// fell due, so the run's later operations see a settled engine.
func (r *plRun) advance() {
	waitParked(r.e, r.clk)
	r.clk.Advance(time.Duration(r.rng.IntN(1500)) * time.Millisecond)
	if !waitSettled(r.e, r.now(), 5*time.Second) {
		r.t.Errorf("run %d: engine did not settle at %d", r.id, r.now())
	}
}

// observe reads the queues like a consumer and records what it saw: an
// entry once served must stay at its offset through any crash.
func (r *plRun) observe() {
	vs, err := readAllVisible(r.e)
	if err != nil {
		r.t.Errorf("run %d: %v", r.id, err)
		return
	}
	var evs []event
	for _, v := range vs {
		k := fmt.Sprintf("%s/%d/%d", v.topic, v.queue, v.Offset)
		if !r.seen[k] {
			r.seen[k] = true
			evs = append(evs, event{kind: evSeen, state: evAcked, id: v.ID, topic: v.topic, queue: v.queue, offset: v.Offset})
		}
	}
	r.end(evs...)
}

// open starts the run's engine on a new disk.
func (r *plRun) open() bool {
	r.mem = vfs.NewMem()
	r.clk = clock.NewFake(t0.Add(time.Duration(r.id) * time.Hour))
	r.seen = map[string]bool{}
	opts := plOptions(&crashFS{mem: r.mem, hook: r.capture}, r.clk)
	// Odd runs write over preallocated zeros (-preallocate), even ones
	// grow their segments (the default); recovery always opens with the
	// default, as a broker whose flag was turned off would.
	opts.Preallocate = r.id%2 == 1
	if r.async {
		opts.Flush, opts.FlushInterval = FlushAsync, 2*time.Millisecond
		if r.flushEvery > 0 {
			opts.FlushInterval = r.flushEvery
		}
	}
	e, err := Open(opts)
	if err != nil {
		r.t.Errorf("run %d: open: %v", r.id, err)
		return false
	}
	r.e = e
	return true
}

// steps performs n random operations.
func (r *plRun) steps(n int) {
	for i := 0; i < n; i++ {
		switch p := r.rng.IntN(100); {
		case p < 35:
			r.send(1)
		case p < 42:
			r.send(2 + r.rng.IntN(3))
		case p < 52:
			r.change(false)
		case p < 62:
			r.change(true)
		case p < 80:
			r.advance()
		case p < 90:
			r.checkpoint(r.e.checkpoint)
		case p < 95:
			r.observe()
		default:
			r.resend()
		}
	}
}

func (r *plRun) run(steps int) {
	if !r.open() {
		return
	}
	r.steps(steps)
	r.checkpoint(r.e.Close)
}

// checkpoint calls fn, which writes a checkpoint, and records that what was
// acknowledged before it is durable.
func (r *plRun) checkpoint(fn func() error) {
	r.mu.Lock()
	n := len(r.events)
	r.mu.Unlock()
	if err := fn(); err != nil {
		r.t.Errorf("run %d: checkpoint: %v", r.id, err)
		return
	}
	r.mu.Lock()
	r.durable = n
	r.mu.Unlock()
}

// weaken turns the operations after the first durable ones into doubts: a
// power loss under async flush may lose what was acknowledged after the
// log's last sync. Observations after them are dropped too: a lost fire
// record can put its message at another offset when it fires again.
func weaken(events []event, durable int) []event {
	out := append([]event(nil), events[:durable]...)
	for _, ev := range events[durable:] {
		if ev.kind == evSeen || ev.state == evFailed {
			continue
		}
		if ev.kind == evResched && ev.state == evAcked {
			ev.lo, ev.hi = ev.due, ev.due
		}
		ev.state = evDoubt
		out = append(out, ev)
	}
	return out
}

// verifyState recovers an engine from a crash image and checks it twice:
// at the moment of the crash (everything due then is visible, nothing
// later is), and after the clock passed every due time (nothing lost).
// Every sixteenth state is then closed, crashed and recovered once more.
//
// The offline check is the oracle of the files: it must find no problem in
// the crash image before recovery, nor in the directory the recovered
// engine closed.
func verifyState(st plState) (rep *report, err error) {
	clk := clock.NewFake(st.at)
	opts := plOptions(st.image, clk)
	if err := checkOracle(opts.FS, opts); err != nil {
		return nil, fmt.Errorf("crash image: %w", err)
	}
	e, err := Open(opts)
	if err != nil {
		return nil, fmt.Errorf("recovery failed: %w", err)
	}
	defer func() {
		e.Close()
		if err == nil && rep.failures() == 0 {
			if cerr := checkOracle(opts.FS, opts); cerr != nil {
				err = fmt.Errorf("after recovery and close: %w", cerr)
			}
		}
	}()
	m := buildModel(weaken(st.events, st.durable))
	m.retiredBefore = st.at.UnixMilli() - opts.Retention.Milliseconds()
	now := st.at.UnixMilli()
	if !waitSettled(e, now, 5*time.Second) {
		return nil, fmt.Errorf("recovered engine did not settle at %d: %s", now, engineState(e))
	}
	rep = checkEngine(e, m, now)
	if rep.failures() > 0 {
		return rep, nil
	}
	h := max(m.horizon(), now) + 1
	waitParked(e, clk)
	clk.Advance(time.Duration(h-now) * time.Millisecond)
	if !waitSettled(e, h, 5*time.Second) {
		return nil, fmt.Errorf("recovered engine did not settle at %d: %s", h, engineState(e))
	}
	if rep = checkEngine(e, m, h); rep.failures() > 0 {
		return rep, nil
	}
	if err := checkDedup(e, m); err != nil {
		return nil, err
	}
	if st.n%16 != 0 {
		return rep, nil
	}
	m.resolve(e)
	if err := e.Close(); err != nil {
		return nil, fmt.Errorf("close after recovery: %w", err)
	}
	// Close ran retention at h.
	m.retiredBefore = h - opts.Retention.Milliseconds()
	opts.FS = st.image.Crash(nil)
	if e, err = Open(opts); err != nil {
		return nil, fmt.Errorf("second recovery failed: %w", err)
	}
	if !waitSettled(e, h, 5*time.Second) {
		return nil, fmt.Errorf("engine did not settle at %d after the second recovery", h)
	}
	return checkEngine(e, m, h), nil
}

// TestPowerLoss runs engines through random sends,
// cancels, reschedules, clock advances, checkpoints and segment rolls, and
// takes a power-loss image of the disk after every operation that changes
// one (every sync and directory sync, and every write, whose unsynced tail
// a crash may tear at any byte). An engine recovered from each image must
// serve everything that was acknowledged before the image was taken; under
// async flush (every fifth run), everything acknowledged before the last
// checkpoint began.
func TestPowerLoss(t *testing.T) {
	runs, steps, want := 30, 60, int64(10000)
	if testing.Short() {
		runs, want = 6, 1500
		t.Logf("-short: %d runs and at least %d crash states, not 30 and 10,000; `make test-durability` (CI) runs the full size", runs, want)
	}
	var total, checked atomic.Int64
	var failed atomic.Int32
	// Verifiers spend part of their time waiting for engine goroutines, so
	// there are more of them than processors.
	workers := 2*runtime.GOMAXPROCS(0) + 1
	states := make(chan plState, 2*workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for st := range states {
				total.Add(1)
				rep, err := verifyState(st)
				if err == nil && rep.failures() == 0 {
					checked.Add(int64(rep.Acked))
					continue
				}
				if failed.Add(1) > 10 {
					continue
				}
				if err != nil {
					t.Errorf("run %d state %d: %v", st.run, st.n, err)
				} else {
					t.Errorf("run %d state %d: %v", st.run, st.n, rep)
				}
			}
		}()
	}
	start := time.Now()
	// Two runs at a time keep the verifiers busy while a run waits.
	var runWG sync.WaitGroup
	next := atomic.Int64{}
	for p := 0; p < 2; p++ {
		runWG.Add(1)
		go func() {
			defer runWG.Done()
			for i := int(next.Add(1) - 1); i < runs; i = int(next.Add(1) - 1) {
				// Every fifth run uses async flush.
				r := &plRun{t: t, id: i, rng: rand.New(rand.NewPCG(uint64(i), 0x9e3779b9)), states: states, async: i%5 == 4}
				r.run(steps)
			}
		}()
	}
	runWG.Wait()
	close(states)
	wg.Wait()
	t.Logf("power loss: %d runs (%d with async flush), %d crash states recovered and checked (%d acknowledged messages in all), %d failing, in %v (%d loop wake-ups given)",
		runs, runs/5, total.Load(), checked.Load(), failed.Load(), time.Since(start).Round(time.Millisecond), nudges.Load())
	if total.Load() < want {
		t.Errorf("only %d crash states; the runs should give at least %d", total.Load(), want)
	}
}
