package engine

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// harness is an engine on an in-memory FS with a fake clock.
type harness struct {
	t   *testing.T
	fs  *vfs.Mem
	clk *clock.Fake
	e   *Engine
	opt Options
}

func newHarness(t *testing.T, mod func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, fs: vfs.NewMem(), clk: clock.NewFake(t0)}
	h.opt = Options{Dir: "data", FS: h.fs, Clock: h.clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		CheckpointInterval: time.Hour, SegmentBytes: 1 << 16}
	if mod != nil {
		mod(&h.opt)
	}
	h.open()
	t.Cleanup(func() {
		if h.e != nil {
			h.e.Close()
		}
	})
	return h
}

func (h *harness) open() {
	h.t.Helper()
	e, err := Open(h.opt)
	if err != nil {
		h.t.Fatalf("open: %v", err)
	}
	h.e = e
}

func (h *harness) restart() {
	h.t.Helper()
	if err := h.e.Close(); err != nil {
		h.t.Fatalf("close: %v", err)
	}
	h.open()
}

// powerLossRestart reopens h's engine on what mem held durably: the
// image is taken before the engine closes, so no final checkpoint or
// flush reaches it. The engine may have failed; its Close error is not
// looked at.
func (h *harness) powerLossRestart(mem *vfs.Mem) {
	h.t.Helper()
	img := mem.Crash(nil)
	h.e.Close()
	h.e = nil
	h.opt.FS = img
	h.open()
}

func (h *harness) send(topic, key string, w message.When) Receipt {
	h.t.Helper()
	r, err := h.e.Send(context.Background(), message.Message{Topic: topic, Key: key, Body: []byte("body-" + key)}, w)
	if err != nil {
		h.t.Fatalf("send: %v", err)
	}
	return r
}

// visible returns every visible message of a topic, all queues.
func (h *harness) visible(topic string) []Visible {
	h.t.Helper()
	var out []Visible
	for _, ti := range h.e.Topics() {
		if ti.Name != topic {
			continue
		}
		for q := 0; q < ti.Queues; q++ {
			vs, err := h.e.ReadQueue(topic, q, 0, 1<<20)
			if err != nil {
				h.t.Fatal(err)
			}
			out = append(out, vs...)
		}
	}
	return out
}

// waitVisible polls (in real time, briefly) until n messages are visible.
func (h *harness) waitVisible(topic string, n int) []Visible {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	nudge := time.Now().Add(20 * time.Millisecond)
	for {
		vs := h.visible(topic)
		if len(vs) >= n || time.Now().After(deadline) {
			if len(vs) != n {
				h.t.Fatalf("visible in %s: got %d, want %d", topic, len(vs), n)
			}
			return vs
		}
		// The fake clock can lose a wake-up a real one cannot: a loop that
		// read the time before an Advance arms its timer after it, for the
		// old interval. Wake it as waitSettled does.
		if time.Now().After(nudge) {
			h.e.life.kickLoop()
			nudge = time.Now().Add(20 * time.Millisecond)
		}
		time.Sleep(time.Millisecond)
	}
}

// settle lets the dispatch loop run after a clock change and checks that
// exactly n messages are visible.
func (h *harness) settle(topic string, n int) []Visible {
	h.t.Helper()
	vs := h.waitVisible(topic, n)
	// An erroneous extra fire would happen before the engine settles at
	// its own time: wait for that event, not for a while.
	if !waitSettled(h.e, h.e.Now(), 5*time.Second) {
		h.t.Fatalf("engine did not settle: %s", engineState(h.e))
	}
	if got := len(h.visible(topic)); got != n {
		h.t.Fatalf("visible in %s after settling: got %d, want %d", topic, got, n)
	}
	return vs
}

func TestDelayedDeliveryNeverEarly(t *testing.T) {
	h := newHarness(t, nil)
	r := h.send("orders", "o1", message.When{Delay: 30 * time.Minute})
	if r.Due != t0.Add(30*time.Minute).UnixMilli() {
		t.Fatalf("due = %d, want %d", r.Due, t0.Add(30*time.Minute).UnixMilli())
	}
	h.clk.Advance(30*time.Minute - time.Millisecond)
	h.settle("orders", 0)
	h.clk.Advance(time.Millisecond)
	vs := h.waitVisible("orders", 1)
	if vs[0].ID != r.ID || string(vs[0].Message.Body) != "body-o1" || vs[0].Visible < r.Due {
		t.Fatalf("unexpected visible message %+v", vs[0])
	}
	info, err := h.e.Inspect(r.ID)
	if err != nil || info.State != StateVisible {
		t.Fatalf("inspect after due: %+v %v", info, err)
	}
}

func TestImmediateAndPastAndLevel(t *testing.T) {
	h := newHarness(t, nil)
	h.send("t", "now", message.When{})
	h.send("t", "past", message.When{At: t0.Add(-time.Hour).UnixMilli()})
	r := h.send("t", "lvl", message.When{Level: 3}) // 10s in the default table
	if r.Due != t0.Add(10*time.Second).UnixMilli() {
		t.Fatalf("level 3 due %d", r.Due)
	}
	h.settle("t", 2)
	h.clk.Advance(10 * time.Second)
	h.waitVisible("t", 3)
}

func TestValidationErrors(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Limits.MaxBodyBytes = 10 })
	ctx := context.Background()
	cases := []struct {
		name string
		m    message.Message
		w    message.When
		code errs.Code
	}{
		{"no topic", message.Message{}, message.When{}, errs.InvalidArgument},
		{"bad topic", message.Message{Topic: "a b"}, message.When{}, errs.InvalidArgument},
		{"body too large", message.Message{Topic: "t", Body: make([]byte, 11)}, message.When{}, errs.TooLarge},
		{"beyond max delay", message.Message{Topic: "t"}, message.When{Delay: 401 * 24 * time.Hour}, errs.InvalidArgument},
		{"at beyond max delay", message.Message{Topic: "t"}, message.When{At: t0.Add(500 * 24 * time.Hour).UnixMilli()}, errs.InvalidArgument},
		{"negative delay", message.Message{Topic: "t"}, message.When{Delay: -time.Second}, errs.InvalidArgument},
		{"level 0 of 18", message.Message{Topic: "t"}, message.When{Level: 19}, errs.InvalidArgument},
		{"two options", message.Message{Topic: "t"}, message.When{Delay: time.Second, Level: 1}, errs.InvalidArgument},
	}
	for _, c := range cases {
		_, err := h.e.Send(ctx, c.m, c.w)
		if errs.CodeOf(err) != c.code {
			t.Errorf("%s: got %v (%s), want code %s", c.name, err, errs.CodeOf(err), c.code)
		}
	}
	_, err := h.e.Send(ctx, message.Message{Topic: "t"}, message.When{Delay: 401 * 24 * time.Hour})
	if err == nil || !contains(err.Error(), "maximum delay of 9600h0m0s") {
		t.Fatalf("max delay error should name the limit: %v", err)
	}
	if h.e.Stats().Sent.Load() != 0 {
		t.Fatalf("invalid sends were counted as sent")
	}
}

func contains(s, sub string) bool {
	return len(s) >= len(sub) && (s == sub || len(sub) == 0 || indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestCancelAndReschedule(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	a := h.send("t", "a", message.When{Delay: time.Minute})
	b := h.send("t", "b", message.When{Delay: 10 * 24 * time.Hour}) // far future, on disk
	c := h.send("t", "c", message.When{Delay: time.Minute})
	if err := h.e.Cancel(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.e.Cancel(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.e.Cancel(ctx, a.ID); !errors.Is(err, errs.ErrPrecondition) {
		t.Fatalf("second cancel: %v", err)
	}
	// Compare-and-set with a wrong due time fails and changes nothing.
	if _, err := h.e.Reschedule(ctx, c.ID, message.When{Delay: 2 * time.Hour}, c.Due+1); !errors.Is(err, errs.ErrPrecondition) {
		t.Fatalf("CAS mismatch: %v", err)
	}
	nd, err := h.e.Reschedule(ctx, c.ID, message.When{Delay: 2 * time.Hour}, c.Due)
	if err != nil || nd != t0.Add(2*time.Hour).UnixMilli() {
		t.Fatalf("reschedule: %d %v", nd, err)
	}
	h.restart() // both changes must survive
	h.clk.Advance(time.Hour)
	h.settle("t", 0)
	h.clk.Advance(time.Hour)
	vs := h.waitVisible("t", 1)
	if vs[0].ID != c.ID {
		t.Fatalf("visible %v, want %v", vs[0].ID, c.ID)
	}
	if err := h.e.Cancel(ctx, c.ID); !errors.Is(err, errs.ErrPrecondition) || !contains(err.Error(), "already delivered") {
		t.Fatalf("cancel after delivery: %v", err)
	}
	h.clk.Advance(11 * 24 * time.Hour)
	h.settle("t", 1)
	info, err := h.e.Inspect(b.ID)
	if err != nil || info.State != StateCancelled {
		t.Fatalf("inspect cancelled: %+v %v", info, err)
	}
}

func TestInspectByKeyAndUnknownID(t *testing.T) {
	h := newHarness(t, nil)
	h.send("orders", "order-123", message.When{Delay: time.Hour})
	r2 := h.send("orders", "order-123", message.When{Delay: 2 * time.Hour})
	info, err := h.e.InspectKey("orders", "order-123")
	if err != nil || info.ID != r2.ID || info.State != StatePending || info.Due != r2.Due {
		t.Fatalf("inspect key: %+v %v", info, err)
	}
	if _, err := h.e.InspectKey("orders", "nope"); !IsNotFound(err) {
		t.Fatalf("unknown key: %v", err)
	}
	foreign := r2.ID
	foreign.Tag++
	if _, err := h.e.Inspect(foreign); !IsNotFound(err) {
		t.Fatalf("foreign id: %v", err)
	}
	h.restart()
	info, err = h.e.InspectKey("orders", "order-123")
	if err != nil || info.ID != r2.ID {
		t.Fatalf("inspect key after restart: %+v %v", info, err)
	}
}

func TestRestartDeliversWhatFellDueWhileDown(t *testing.T) {
	h := newHarness(t, nil)
	for i := 0; i < 50; i++ {
		h.send("t", "", message.When{Delay: time.Duration(i) * time.Minute})
	}
	h.settle("t", 1)
	h.e.Close()
	h.e = nil
	h.clk.Advance(2 * time.Hour)
	h.open()
	vs := h.waitVisible("t", 50)
	seen := map[message.ID]bool{}
	for _, v := range vs {
		if seen[v.ID] {
			t.Fatalf("duplicate %v", v.ID)
		}
		seen[v.ID] = true
		if v.Visible < v.Due {
			t.Fatalf("early: %+v", v)
		}
	}
}

func TestCloseFreshDirectory(t *testing.T) {
	h := newHarness(t, nil)
	if err := h.e.Close(); err != nil {
		t.Fatalf("close of an engine that never saw a topic: %v", err)
	}
	h.e = nil
	h.open()
}

func TestDispatchHeapOrder(t *testing.T) {
	var h dispatchHeap
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		h.push(dueEntry{due: int64(r.IntN(50)), pos: uint64(r.IntN(1000))})
	}
	prev := h.pop()
	for h.n > 0 {
		x := h.pop()
		if x.due < prev.due || x.due == prev.due && x.pos < prev.pos {
			t.Fatalf("out of order: %+v after %+v", x, prev)
		}
		if max := (h.heap.n+dueChunk-1)/dueChunk + 1; len(h.heap.chunks) > max {
			t.Fatalf("%d chunks kept for %d entries, want at most %d", len(h.heap.chunks), h.heap.n, max)
		}
		prev = x
	}
}
