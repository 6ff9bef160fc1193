package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// The disk-full tests run the engine on vfs.Faulty, a fault-injecting
// layer over the in-memory FS: a real full disk cannot be produced on
// demand here (nor safely on a shared machine), while Faulty fails exactly
// the writes that would not fit under a byte limit, with ENOSPC, as a full
// disk does.

// faultClient keeps the ledger of a disk-full test.
type faultClient struct {
	t      *testing.T
	e      *Engine
	clk    *clock.Fake
	rng    *rand.Rand
	events []event
	seq    int
}

func (c *faultClient) now() int64 { return c.clk.Now().UnixMilli() }

// send sends one message due within 3 s and records the outcome; a
// failure must be a disk-full ResourceExhausted error.
func (c *faultClient) send() error {
	c.seq++
	ev := event{kind: evSend, topic: "full", body: fmt.Sprintf("m%d", c.seq)}
	if c.rng.IntN(3) == 0 {
		ev.key = fmt.Sprintf("k%d", c.rng.IntN(5))
	}
	r, err := c.e.Send(context.Background(), message.Message{Topic: ev.topic, Key: ev.key, Body: []byte(ev.body)},
		message.When{Delay: time.Duration(c.rng.IntN(3000)) * time.Millisecond})
	if err != nil {
		c.checkDiskFull(err)
		ev.state = evFailed
	} else {
		ev.state, ev.id, ev.due = evAcked, r.ID, r.Due
	}
	c.events = append(c.events, ev)
	return err
}

func (c *faultClient) checkDiskFull(err error) {
	c.t.Helper()
	if errs.CodeOf(err) != errs.ResourceExhausted || !errors.Is(err, errs.ErrExhausted) || !strings.Contains(err.Error(), "disk full") {
		c.t.Fatalf("a write on a full disk failed with %v (code %s); want resource_exhausted saying disk full", err, errs.CodeOf(err))
	}
}

// change cancels or reschedules a pending acknowledged message. On a full
// disk it may fail, with the disk-full error, and must then change nothing.
func (c *faultClient) change(resched bool) {
	var pending []event
	for _, ev := range c.events {
		if ev.kind == evSend && ev.state == evAcked && ev.due > c.now()+10 {
			pending = append(pending, ev)
		}
	}
	if len(pending) == 0 {
		return
	}
	target := pending[c.rng.IntN(len(pending))]
	ev := event{kind: evCancel, id: target.id}
	var err error
	if resched {
		ev.kind = evResched
		ev.due, err = c.e.Reschedule(context.Background(), target.id, message.When{At: c.now() + c.rng.Int64N(3000)}, 0)
	} else {
		err = c.e.Cancel(context.Background(), target.id)
	}
	switch {
	case err == nil:
		ev.state = evAcked
	case errs.CodeOf(err) == errs.FailedPrecondition:
		ev.state = evFailed // cancelled before
	default:
		c.checkDiskFull(err)
		ev.state = evFailed
	}
	c.events = append(c.events, ev)
}

// check lets the clock pass every due time and checks the ledger.
func (c *faultClient) check(step string) *report {
	c.t.Helper()
	m := buildModel(c.events)
	h := max(m.horizon(), c.now()) + 1
	waitParked(c.e, c.clk)
	c.clk.Advance(time.Duration(h-c.now()) * time.Millisecond)
	if !waitSettled(c.e, h, 5*time.Second) {
		c.t.Fatalf("%s: engine did not settle: %s", step, engineState(c.e))
	}
	rep := checkEngine(c.e, m, h)
	if rep.failures() > 0 {
		c.t.Fatalf("%s: %s", step, rep)
	}
	return rep
}

func countAcked(events []event, kind evKind) (acked, failed int) {
	for _, ev := range events {
		if ev.kind != kind {
			continue
		}
		if ev.state == evAcked {
			acked++
		} else {
			failed++
		}
	}
	return acked, failed
}

// TestDiskFull fills the disk under a running engine: sends start failing
// with a disk-full error, and once space is back they succeed again
// without a restart. Everything acknowledged before, during and after is
// delivered, also after a restart and after a power loss taken while the
// disk was full; nothing refused ever appears.
func TestDiskFull(t *testing.T) {
	mem := vfs.NewMem()
	ffs := vfs.NewFaulty(mem)
	clk := clock.NewFake(t0)
	opts := plOptions(ffs, clk)
	opts.Retention = time.Hour // keep every record: the test counts them all
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close() }()
	c := &faultClient{t: t, e: e, clk: clk, rng: rand.New(rand.NewPCG(1, 2))}
	for i := 0; i < 20; i++ {
		if err := c.send(); err != nil {
			t.Fatalf("send before the disk is full: %v", err)
		}
	}
	c.change(false)
	c.change(true)

	fillDisk(t, c, ffs)
	// Time passes while the disk is full: due messages cannot get their
	// fire records written; the loop must keep them and retry.
	waitParked(e, clk)
	clk.Advance(3 * time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for e.Stats().FireErrors.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if e.Stats().FireErrors.Load() == 0 {
		t.Fatalf("no fire record failed on the full disk: %s", engineState(e))
	}
	image := mem.Crash(nil) // a power loss while the disk is full
	imageAt, imageEvents := clk.Now(), append([]event(nil), c.events...)

	// Space is back: sends succeed without a restart, and what fell due is
	// delivered.
	ffs.SetLimit(-1)
	for i := 0; i < 5; i++ {
		if err := c.send(); err != nil {
			t.Fatalf("send after space was freed: %v", err)
		}
	}
	rep := c.check("after space was freed")
	sent, refused := countAcked(c.events, evSend)
	t.Logf("disk full: %d sends acknowledged, %d refused with disk full, %d fire-record failures retried; %s",
		sent, refused, e.Stats().FireErrors.Load(), rep)

	if err := e.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if e, err = Open(opts); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	c.e = e
	c.check("after a restart")

	// The power loss taken while the disk was full.
	pclk := clock.NewFake(imageAt)
	pe, err := Open(plOptions(image, pclk))
	if err != nil {
		t.Fatalf("recovery of the image taken on the full disk: %v", err)
	}
	defer pe.Close()
	pc := &faultClient{t: t, e: pe, clk: pclk, events: imageEvents}
	pc.check("after a power loss on the full disk")
}

// fillDisk leaves room on ffs for a few records only, then sends (and
// changes messages now and then) until five sends in a row fail.
func fillDisk(t *testing.T, c *faultClient, ffs *vfs.Faulty) {
	t.Helper()
	ffs.SetLimit(ffs.Used() + 600)
	failures := 0
	for i := 0; i < 200 && failures < 5; i++ {
		if c.send() != nil {
			failures++
		} else {
			failures = 0
		}
		if i%4 == 0 {
			c.change(i%8 == 0)
		}
	}
	if failures < 5 {
		t.Fatalf("sends kept succeeding on a full disk (used %d bytes)", ffs.Used())
	}
}

// TestQueueIndexWriteFailure fails the queue-index writes of a dispatch
// while its fire record is written (the disk fills up between the two).
// No checkpoint may then pass that fire record, so that a restart re-derives
// the index; and once the disk has room again, the running engine writes
// the entries at its next checkpoint. Either way the messages are delivered.
func TestQueueIndexWriteFailure(t *testing.T) {
	mem := vfs.NewMem()
	ffs := vfs.NewFaulty(mem)
	setFail := failIndexWrites(ffs)
	clk := clock.NewFake(t0)
	opts := plOptions(ffs, clk)
	opts.Retention = time.Hour
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close() }()
	c := &faultClient{t: t, e: e, clk: clk, rng: rand.New(rand.NewPCG(3, 4))}
	for i := 0; i < 10; i++ {
		if err := c.send(); err != nil {
			t.Fatal(err)
		}
	}
	setFail(true)
	waitParked(e, clk)
	clk.Advance(3 * time.Second)
	if !waitSettled(e, c.now(), 5*time.Second) {
		t.Fatalf("engine did not settle: %s", engineState(e))
	}
	if _, err := readAllVisible(e); err != nil {
		t.Fatalf("the queues are unreadable after failed index writes: %v", err)
	}
	if err := e.checkpoint(); err == nil {
		t.Fatalf("a checkpoint succeeded while fired messages were missing from their index")
	}
	if err := e.Close(); err == nil {
		t.Fatalf("close reported a final checkpoint past fired messages missing from their index")
	}
	// The next recovery replays the fire records the checkpoint did not pass.
	setFail(false)
	if e, err = Open(opts); err != nil {
		t.Fatal(err)
	}
	c.e = e
	c.check("after a restart")
	setFail(true)

	// The same failure, but the disk gets room again while the engine runs:
	// the periodic checkpoint (or the next dispatch to that queue) writes
	// the entries.
	for i := 0; i < 10; i++ {
		if err := c.send(); err != nil {
			t.Fatal(err)
		}
	}
	waitParked(e, clk)
	clk.Advance(3 * time.Second)
	if !waitSettled(e, c.now(), 5*time.Second) {
		t.Fatalf("engine did not settle: %s", engineState(e))
	}
	setFail(false)
	if err := e.checkpoint(); err != nil {
		t.Fatalf("checkpoint once the disk has room: %v", err)
	}
	c.check("once the index can be written again")
	if err := e.checkpoint(); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if e, err = Open(opts); err != nil {
		t.Fatal(err)
	}
	c.e = e
	c.check("after a checkpoint and a restart")
}

// failIndexWrites makes ffs fail every write to a queue index file (.qi)
// with ENOSPC while the returned setFail was last called with true.
func failIndexWrites(ffs *vfs.Faulty) (setFail func(bool)) {
	var mu sync.Mutex
	failIndex := false
	ffs.Inject(func(op vfs.Op, name string) error {
		mu.Lock()
		defer mu.Unlock()
		if failIndex && op == vfs.OpWrite && strings.HasSuffix(name, ".qi") {
			return syscall.ENOSPC
		}
		return nil
	})
	return func(v bool) {
		mu.Lock()
		failIndex = v
		mu.Unlock()
	}
}

// TestKeyIndexWriteFailure fails the key-index writes: recovery reads the
// keys of records before the checkpoint only from that file, so no
// checkpoint may pass keys it could not write, and a message stays
// findable by its key through a power loss.
func TestKeyIndexWriteFailure(t *testing.T) {
	mem := vfs.NewMem()
	ffs := vfs.NewFaulty(mem)
	var mu sync.Mutex
	failKeys := true
	ffs.Inject(func(op vfs.Op, name string) error {
		mu.Lock()
		defer mu.Unlock()
		if failKeys && op == vfs.OpWrite && strings.HasSuffix(name, ".kix") {
			return syscall.ENOSPC
		}
		return nil
	})
	clk := clock.NewFake(t0)
	e, err := Open(plOptions(ffs, clk))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close() }()
	c := &faultClient{t: t, e: e, clk: clk, rng: rand.New(rand.NewPCG(5, 6))}
	for i := 0; i < 12; i++ {
		if err := c.send(); err != nil {
			t.Fatal(err)
		}
	}
	recoverAndCheck := func(step string) {
		t.Helper()
		pclk := clock.NewFake(clk.Now())
		pe, err := Open(plOptions(mem.Crash(nil), pclk))
		if err != nil {
			t.Fatalf("%s: recovery: %v", step, err)
		}
		defer pe.Close()
		pc := &faultClient{t: t, e: pe, clk: pclk, events: c.events}
		pc.check(step) // LookupKey must find the latest message of every key
	}
	if err := e.checkpoint(); err == nil {
		t.Fatal("a checkpoint passed keys that could not be written")
	}
	recoverAndCheck("power loss after the refused checkpoint")
	mu.Lock()
	failKeys = false
	mu.Unlock()
	if err := e.checkpoint(); err != nil {
		t.Fatalf("checkpoint once the key index can be written: %v", err)
	}
	recoverAndCheck("power loss after the checkpoint")
}

// TestFireFailurePauses: a fire record that cannot be written (a full
// disk) is tried again after a pause that doubles with each failure, at
// any rate: without a rate the retries used to loop (thousands of failures
// logged a second), and at a low rate one failure was a token debt of a
// whole DispatchBatch (409 s at 10/s). Once space is back the messages
// become visible at the next try.
func TestFireFailurePauses(t *testing.T) {
	for _, rate := range []int{-1, 10} {
		ffs := vfs.NewFaulty(vfs.NewMem())
		h := newHarness(t, func(o *Options) { o.FS = ffs; o.DispatchRate = rate })
		e := h.e
		sendHerd(t, e, "t", 10, e.Now()+1000)
		waitParked(e, h.clk)
		ffs.SetLimit(ffs.Used())
		failures := func(want uint64) {
			t.Helper()
			deadline := time.Now().Add(5 * time.Second)
			for e.Stats().FireErrors.Load() < want && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			waitParked(e, h.clk)
			if n := e.Stats().FireErrors.Load(); n != want {
				t.Fatalf("rate %d: %d fire failures at %d ms, want %d", rate, n, e.Now()-t0.UnixMilli(), want)
			}
		}
		h.clk.Advance(time.Second)
		failures(1)
		for _, pause := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
			h.clk.Advance(pause - time.Millisecond)
			failures(uint64(pause / (100 * time.Millisecond))) // none during the pause
			h.clk.Advance(time.Millisecond)
			failures(uint64(pause/(100*time.Millisecond)) + 1)
		}
		ffs.SetLimit(-1)
		h.clk.Advance(400 * time.Millisecond)
		if n := waitVisible(h, "t", 10); n != 10 {
			t.Fatalf("rate %d: %d of 10 visible after space came back", rate, n)
		}
	}
}
