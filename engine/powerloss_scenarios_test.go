package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// Power-loss scenarios that TestPowerLoss's random mix reaches rarely or
// not at all: retention and compaction forward of long-pending messages,
// far-future messages that reach the wheel only from their timer buckets,
// power losses during a recovery and during the first checkpoint after
// it, and new sends after recovering an async-flush image. Each scenario
// drives a plRun through a fixed plan, so the crash images fall where the
// class of bug would; every image is recovered and checked by verifyState.

// plSoakEnv scales the scenarios up for soak runs (a factor, default 1).
const plSoakEnv = "HOURGLASS_PL_SCALE"

func plScale(t *testing.T) int {
	s := os.Getenv(plSoakEnv)
	if s == "" {
		return 1
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q is not a positive number", plSoakEnv, s)
	}
	return n
}

// sendWhen sends one message due at w, recorded like plRun.send.
func (r *plRun) sendWhen(w message.When) event {
	ev := r.newSend()
	ev.when = w
	r.begin(ev)
	req := ev.request()
	rc, err := r.e.Send(context.Background(), req.Message, req.When)
	if err != nil {
		r.t.Errorf("run %d: send: %v", r.id, err)
		ev.state = evFailed
		r.end(ev)
		return ev
	}
	ev.state, ev.id, ev.due = evAcked, rc.ID, rc.Due
	r.sent = append(r.sent, ev)
	r.end(ev)
	return ev
}

// advanceBy moves the clock by d and waits until the engine settled.
func (r *plRun) advanceBy(d time.Duration) {
	waitParked(r.e, r.clk)
	r.clk.Advance(d)
	if !waitSettled(r.e, r.now(), 5*time.Second) {
		r.t.Errorf("run %d: engine did not settle at %d: %s", r.id, r.now(), engineState(r.e))
	}
}

// plVerifier checks crash states on a pool of goroutines.
type plVerifier struct {
	t              *testing.T
	states         chan plState
	wg             sync.WaitGroup
	total, checked atomic.Int64
	failed         atomic.Int32
	// also, when set, is called with every state after its check passed
	// (from a verifier goroutine) for further checks of the image.
	also func(st plState) error
}

func newPLVerifier(t *testing.T, also func(plState) error) *plVerifier {
	v := &plVerifier{t: t, states: make(chan plState, 8), also: also}
	for w := 0; w < 5; w++ {
		v.wg.Add(1)
		go func() {
			defer v.wg.Done()
			for st := range v.states {
				v.total.Add(1)
				pristine := st
				if v.also != nil {
					// verifyState runs an engine on the image; also gets
					// an untouched copy (a crash image is all synced, so
					// Crash copies it exactly).
					pristine.image = st.image.Crash(nil)
				}
				rep, err := verifyState(st)
				if err == nil && rep.failures() > 0 {
					err = fmt.Errorf("%s", rep)
				}
				if err == nil && v.also != nil {
					err = v.also(pristine)
				}
				if err == nil {
					v.checked.Add(int64(rep.Acked))
					continue
				}
				if v.failed.Add(1) <= 10 {
					t.Errorf("run %d state %d: %v", st.run, st.n, err)
				}
			}
		}()
	}
	return v
}

// finish waits for the checks and requires at least want states.
func (v *plVerifier) finish(name string, want int64) {
	close(v.states)
	v.wg.Wait()
	v.t.Logf("%s: %d crash states recovered and checked (%d acknowledged messages in all), %d failing",
		name, v.total.Load(), v.checked.Load(), v.failed.Load())
	if v.total.Load() < want {
		v.t.Errorf("%s: only %d crash states; want at least %d", name, v.total.Load(), want)
	}
}

func (v *plVerifier) newRun(t *testing.T, id int, async bool) *plRun {
	return &plRun{t: t, id: id, rng: rand.New(rand.NewPCG(uint64(id), 0x5eed)), states: v.states, async: async}
}

// TestPowerLossRetentionCompaction crashes around compaction forward and
// segment deletion: a few messages due far ahead pin old segments while
// short-lived traffic fills and retires segments around them, and
// checkpoints run retention (compaction, then deletion) at every step.
// No pending message may be lost, nor its ID change.
func TestPowerLossRetentionCompaction(t *testing.T) {
	v := newPLVerifier(t, nil)
	var compacted, deleted uint64
	for i := 0; i < 2*plScale(t); i++ {
		r := v.newRun(t, 1000+i, false)
		if !r.open() {
			break
		}
		for round := 0; round < 6; round++ {
			// One long-pending message per round, then traffic that makes
			// its segment old.
			r.sendWhen(message.When{Delay: time.Duration(20+r.rng.IntN(20)) * time.Second})
			if round%2 == 1 {
				r.change(r.rng.IntN(2) == 0)
			}
			for k := 0; k < 4; k++ {
				r.send(2)
				r.advanceBy(time.Duration(300+r.rng.IntN(400)) * time.Millisecond)
			}
			r.checkpoint(r.e.checkpoint)
			r.observe()
		}
		compacted += r.e.Stats().Compacted.Load()
		deleted += r.e.Stats().SegmentsDeleted.Load()
		r.checkpoint(r.e.Close)
	}
	v.finish("retention and compaction", 200)
	t.Logf("%d messages compacted forward, %d segments deleted", compacted, deleted)
	if compacted == 0 || deleted == 0 {
		t.Errorf("the runs compacted %d messages and deleted %d segments: the scenario missed its target", compacted, deleted)
	}
}

// TestPowerLossFarFuture crashes while messages sent beyond the near
// window (so that only their timer bucket holds them) are loaded from
// their buckets, fall due and fire, with checkpoints removing loaded
// buckets in between.
func TestPowerLossFarFuture(t *testing.T) {
	v := newPLVerifier(t, nil)
	for i := 0; i < 3*plScale(t); i++ {
		r := v.newRun(t, 2000+i, i == 2)
		if !r.open() {
			break
		}
		lookahead := r.e.opts.Lookahead
		for k := 0; k < 12; k++ {
			d := lookahead + time.Duration(1+r.rng.IntN(6000))*time.Millisecond
			r.sendWhen(message.When{Delay: d})
		}
		r.checkpoint(r.e.checkpoint)
		for step := 0; step < 16; step++ {
			switch r.rng.IntN(4) {
			case 0:
				r.checkpoint(r.e.checkpoint)
			case 1:
				r.sendWhen(message.When{Delay: lookahead + time.Duration(r.rng.IntN(3000))*time.Millisecond})
			case 2:
				r.change(r.rng.IntN(2) == 0)
			}
			r.advanceBy(time.Duration(200+r.rng.IntN(500)) * time.Millisecond)
		}
		r.checkpoint(r.e.Close)
	}
	v.finish("far future", 200)
}

// TestPowerLossDuringRecovery takes crash images of a run, then crashes
// each chosen image again at every durable step of its recovery and of
// the first checkpoint after it, and a few of those again: a recovery
// interrupted by a power loss must leave a directory the next recovery
// handles, with nothing acknowledged lost.
func TestPowerLossDuringRecovery(t *testing.T) {
	// The images of one ordinary run, kept rather than checked.
	src := make(chan plState, 1<<16)
	r := &plRun{t: t, id: 3000, rng: rand.New(rand.NewPCG(3000, 1)), states: src}
	r.run(40)
	close(src)
	var base []plState
	for st := range src {
		base = append(base, st)
	}
	if len(base) < 50 {
		t.Fatalf("the source run gave only %d crash images", len(base))
	}
	v := newPLVerifier(t, nil)
	rng := rand.New(rand.NewPCG(3000, 2))
	picks := 6 * plScale(t)
	for p := 0; p < picks; p++ {
		st := base[rng.IntN(len(base))]
		crashRecovery(t, st, v.states, rng, 2)
	}
	v.finish("crashes during recovery", int64(picks)*4)
}

// crashRecovery recovers st's image on a crashFS, runs the first
// checkpoint and closes, and sends an image of the disk at every step that
// changes it to states, with st's ledger (a recovery acknowledges
// nothing new). With depth > 1 a few of those images are crashed again.
func crashRecovery(t *testing.T, st plState, states chan<- plState, rng *rand.Rand, depth int) {
	var mu sync.Mutex
	var images []*vfs.Mem
	mem := st.image.Crash(nil) // a copy: st.image is checked elsewhere too
	seed := rng.Uint64()
	n := 0
	cfs := &crashFS{mem: mem, hook: func(durable bool) {
		mu.Lock()
		defer mu.Unlock()
		n++
		if durable {
			images = append(images, mem.Crash(nil))
		}
		images = append(images, mem.Crash(rand.New(rand.NewPCG(seed, uint64(n)))))
	}}
	clk := clock.NewFake(st.at)
	e, err := Open(plOptions(cfs, clk))
	if err != nil {
		t.Errorf("run %d state %d: recovery: %v", st.run, st.n, err)
		return
	}
	if err := e.checkpoint(); err != nil {
		t.Errorf("run %d state %d: first checkpoint after recovery: %v", st.run, st.n, err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("run %d state %d: close after recovery: %v", st.run, st.n, err)
	}
	mu.Lock()
	got := images
	mu.Unlock()
	// The clean image after the close, first: no crash at all.
	clean := st
	clean.image, clean.n = mem.Crash(nil), st.n*1000+999
	states <- clean
	for i, img := range got {
		sub := st
		sub.image, sub.n = img, st.n*1000+i
		states <- sub
	}
	if depth > 1 && len(got) > 0 {
		for k := 0; k < 2; k++ {
			sub := st
			sub.image = got[rng.IntN(len(got))]
			crashRecovery(t, sub, states, rng, depth-1)
		}
	}
}

// TestPowerLossAsyncNewSends recovers async-flush images in which
// acknowledged sends were lost, sends new messages over the lost log
// positions, and requires that no lost message's ID addresses a new
// message: Inspect and Cancel of a lost ID answer not_found.
func TestPowerLossAsyncNewSends(t *testing.T) {
	var aliased, lostIDs atomic.Int64
	v := newPLVerifier(t, func(st plState) error {
		n, a, err := checkLostIDs(st)
		lostIDs.Add(int64(n))
		aliased.Add(int64(a))
		return err
	})
	for i := 0; i < 3*plScale(t); i++ {
		r := v.newRun(t, 4000+i, true)
		// No timed sync during the run: only checkpoints and segment
		// rolls make sends durable, so a loaded machine (whose ticker
		// outpaces the run) still leaves acknowledged sends to lose.
		r.flushEvery = time.Hour
		r.run(30)
	}
	v.finish("async new sends", 150)
	t.Logf("%d lost IDs probed after new sends; %d addressed another message", lostIDs.Load(), aliased.Load())
	if lostIDs.Load() == 0 {
		t.Errorf("no acknowledged send was lost in any image: the scenario missed its target")
	}
}

// checkLostIDs recovers st (again), finds the acknowledged sends the power
// loss took, sends as many new messages, and probes the lost IDs.
func checkLostIDs(st plState) (lost, aliased int, err error) {
	clk := clock.NewFake(st.at)
	e, err := Open(plOptions(st.image, clk))
	if err != nil {
		return 0, 0, fmt.Errorf("recovery: %w", err)
	}
	defer e.Close()
	var gone []event
	for _, ev := range st.events[st.durable:] {
		if ev.kind != evSend || ev.state != evAcked {
			continue
		}
		if _, ierr := e.Inspect(ev.id); ierr != nil {
			gone = append(gone, ev)
		}
	}
	if len(gone) == 0 {
		return 0, 0, nil
	}
	ctx := context.Background()
	for i := 0; i < 2*len(gone)+2; i++ {
		body := fmt.Sprintf("after-%d", i)
		if _, err := e.Send(ctx, message.Message{Topic: gone[i%len(gone)].topic, Body: []byte(body)},
			message.When{Delay: time.Hour}); err != nil {
			return 0, 0, fmt.Errorf("send after recovery: %w", err)
		}
	}
	var problems []string
	for _, ev := range gone {
		info, ierr := e.Inspect(ev.id)
		cerr := e.Cancel(ctx, ev.id)
		if ierr == nil && errs.CodeOf(cerr) != errs.NotFound {
			// The lost ID now names a new message (or its cancel did not
			// say not_found).
			aliased++
			if len(problems) < 3 {
				problems = append(problems, fmt.Sprintf("lost %v (body %q) inspects as %q body %dB, cancel: %v",
					ev.id, ev.body, info.State, info.BodyBytes, cerr))
			}
			continue
		}
		if errs.CodeOf(ierr) != errs.NotFound || errs.CodeOf(cerr) != errs.NotFound {
			aliased++
			problems = append(problems, fmt.Sprintf("lost %v: inspect %v, cancel %v; want not_found", ev.id, ierr, cerr))
		}
	}
	if aliased > 0 {
		return len(gone), aliased, fmt.Errorf("%d of %d lost IDs address something after new sends: %v", aliased, len(gone), problems)
	}
	return len(gone), 0, nil
}

// checkDedup sends every acknowledged message with a dedup ID again: the
// recovered engine must answer with the latest message stored with that
// ID (a resend stores one only after retention removed the one before)
// and store nothing, unless retention removed that one too. A resend in
// doubt at the crash may be the one named.
func checkDedup(e *Engine, m *model) error {
	latest := map[string]*expect{}
	for _, x := range m.order {
		if x.dedup != "" {
			latest[x.dedup] = x
		}
	}
	for _, x := range latest {
		if rc0, _ := e.Inspect(x.id); rc0.ID != x.id {
			continue
		}
		ev := event{topic: x.topic, key: x.key, body: x.body, dedup: x.dedup, when: x.when}
		rc, err := e.Send(context.Background(), ev.request().Message, x.when)
		if err != nil {
			return fmt.Errorf("resend of %v: %w", x.id, err)
		}
		if !rc.Duplicate || rc.ID != x.id && (m.msgs[rc.ID] != nil || !m.maybe[x.body]) {
			return fmt.Errorf("resend of %v with dedup ID %q after recovery stored %v (duplicate %v)", x.id, x.dedup, rc.ID, rc.Duplicate)
		}
	}
	return nil
}
