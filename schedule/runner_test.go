package schedule

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// rig is a real engine and a runner on one in-memory filesystem, driven by
// one virtual clock.
type rig struct {
	t   *testing.T
	fs  *vfs.Mem
	clk *clock.Virtual
	eng *engine.Engine
	r   *Runner
	// onTime: every firing must be due exactly at its fire time (the test
	// moves the clock in steps shorter than the runner's lead).
	onTime bool
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// start is 2026-11-30 10:00:30 UTC: 30 s before a minute boundary.
var start = time.Date(2026, 11, 30, 10, 0, 30, 0, time.UTC)

func newRig(t *testing.T) *rig {
	t.Helper()
	g := &rig{t: t, fs: vfs.NewMem(), clk: clock.NewVirtual(start)}
	g.openEngine()
	g.openRunner()
	t.Cleanup(func() {
		if g.r != nil {
			g.r.Close()
		}
		if g.eng != nil {
			g.eng.Close()
		}
	})
	return g
}

func (g *rig) openEngine() {
	g.t.Helper()
	o := engine.NewOptions("/data")
	o.FS, o.Clock, o.Logger = g.fs, g.clk, quiet
	eng, err := engine.Open(o)
	if err != nil {
		g.t.Fatal(err)
	}
	g.eng = eng
}

func (g *rig) openRunner() {
	g.t.Helper()
	r, err := Open(Options{Dir: "/data/schedules", FS: g.fs, Broker: g.eng, Clock: g.clk, Logger: quiet})
	if err != nil {
		g.t.Fatal(err)
	}
	g.r = r
}

// restartRunner stops the runner, moves the clock by down while it is
// stopped (the engine keeps running), and starts it again.
func (g *rig) restartRunner(down time.Duration) {
	g.t.Helper()
	if err := g.r.Close(); err != nil {
		g.t.Fatal(err)
	}
	g.clk.AdvanceTo(g.clk.Now().Add(down))
	g.openRunner()
}

// advance moves the clock and waits until the runner has sent what fell
// due and the engine has made it visible.
func (g *rig) advance(d time.Duration) {
	g.t.Helper()
	to := g.clk.AdvanceTo(g.clk.Now().Add(d)).UnixMilli()
	deadline := time.Now().Add(10 * time.Second)
	for !(g.r.Settled(to) && g.eng.Frontier() >= to) {
		if time.Now().After(deadline) {
			g.t.Fatalf("not settled at %v", time.UnixMilli(to).UTC())
		}
		time.Sleep(time.Millisecond)
	}
}

// visible returns the fire times of the visible messages of topic, sorted,
// failing on a key seen twice.
func (g *rig) visible(topic string) []int64 {
	g.t.Helper()
	got, err := g.eng.Receive(context.Background(), engine.ReceiveRequest{Topic: topic, Group: "check-" + time.Now().Format("150405.000000000"), Max: 1000})
	if errors.Is(err, errs.ErrNotFound) {
		return nil // no firing sent yet: the topic is created by the first
	}
	if err != nil {
		g.t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []int64
	for _, m := range got {
		if seen[m.Message.Key] {
			g.t.Fatalf("key %s delivered twice", m.Message.Key)
		}
		seen[m.Message.Key] = true
		ft, err := time.Parse("2006-01-02T15:04:05.000Z", m.Message.Properties[PropFireTime])
		// A firing sent after its fire time (a catch-up, or a clock jump
		// past it) is due at once: at its send time.
		if err != nil || m.Due < ft.UnixMilli() || !strings.HasSuffix(m.Message.Key, "@"+m.Message.Properties[PropFireTime]) {
			g.t.Fatalf("firing %+v %+v: due, key and fire-time property disagree", m, m.Message)
		}
		if g.onTime && m.Due != ft.UnixMilli() {
			g.t.Fatalf("firing of %s is due at %d, not at its fire time", m.Message.Key, m.Due)
		}
		out = append(out, ft.UnixMilli())
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func minutesAfter(base time.Time, ms ...int) []int64 {
	var out []int64
	for _, m := range ms {
		out = append(out, base.Add(time.Duration(m)*time.Minute).UnixMilli())
	}
	return out
}

func equal(a, b []int64) bool {
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

func fmtMs(ts []int64) string { return fmtAll(ts) }

// TestRunnerFiresOnTime: an every-minute schedule's firings become visible
// exactly at their fire times, one each, with the schedule's message.
func TestRunnerFiresOnTime(t *testing.T) {
	g := newRig(t)
	info, err := g.r.Create(Schedule{ID: "tick", Topic: "ticks", Cron: "* * * * *", Body: []byte("tick"), Tag: "t",
		Properties: map[string]string{"team": "ops"}})
	if err != nil {
		t.Fatal(err)
	}
	m0 := start.Truncate(time.Minute)
	if want := minutesAfter(m0, 1, 2, 3, 4, 5); !equal(info.Next, want) {
		t.Fatalf("next fire times %s, want %s", fmtMs(info.Next), fmtMs(want))
	}
	g.advance(29 * time.Second) // 10:00:59
	if got := g.visible("ticks"); len(got) != 0 {
		t.Fatalf("visible before the first fire time: %s", fmtMs(got))
	}
	g.advance(time.Second) // 10:01:00
	g.onTime = true
	for range 6 {
		g.advance(30 * time.Second)
	}
	if got, want := g.visible("ticks"), minutesAfter(m0, 1, 2, 3, 4); !equal(got, want) {
		t.Fatalf("visible %s, want %s", fmtMs(got), fmtMs(want))
	}
	if got := g.r.Stats().Sent.Load(); got < 4 || got > 5 {
		t.Fatalf("sent %d firings; 4 are due and one may be sent ahead", got)
	}
}

// TestCatchUpPolicies: fire times missed while the runner was down follow
// each schedule's policy; the schedule then goes on as before.
func TestCatchUpPolicies(t *testing.T) {
	g := newRig(t)
	for _, p := range CatchUps() {
		if _, err := g.r.Create(Schedule{ID: string(p), Topic: "t-" + string(p), Cron: "*/10 * * * *", CatchUp: p}); err != nil {
			t.Fatal(err)
		}
	}
	m0 := start.Truncate(time.Minute)
	g.advance(9*time.Minute + 25*time.Second) // 10:09:55: 10:10 is sent ahead
	g.restartRunner(time.Hour)                // down from 10:09:55 to 11:09:55
	g.advance(time.Minute)                    // 11:10:55
	want := map[CatchUp][]int64{
		CatchUpSkip: minutesAfter(m0, 10, 70),
		CatchUpOnce: minutesAfter(m0, 10, 60, 70),
		CatchUpAll:  minutesAfter(m0, 10, 20, 30, 40, 50, 60, 70),
	}
	for p, w := range want {
		if got := g.visible("t-" + string(p)); !equal(got, w) {
			t.Errorf("catch-up %s: visible %s\nwant %s", p, fmtMs(got), fmtMs(w))
		}
	}
}

// TestRestartDoesNotResendAFiring: firings sent before a crash whose
// progress never reached the journal are found by their keys after the
// restart and not sent again; nothing is lost either.
func TestRestartDoesNotResendAFiring(t *testing.T) {
	g := newRig(t)
	if _, err := g.r.Create(Schedule{ID: "s", Topic: "t", Cron: "* * * * *"}); err != nil {
		t.Fatal(err)
	}
	g.r.Close()
	// What a runner that crashed after a batch's send and before its
	// journal write leaves: the firings of 10:01 and 10:02 in the engine,
	// no progress.
	var reqs []engine.SendRequest
	for _, fire := range minutesAfter(start.Truncate(time.Minute), 1, 2) {
		reqs = append(reqs, g.r.request(&Schedule{ID: "s", Topic: "t"}, &firing{fire: fire, key: FireKey("s", fire)}))
	}
	if _, err := g.eng.SendBatch(context.Background(), reqs); err != nil {
		t.Fatal(err)
	}
	g.openRunner()
	g.advance(3 * time.Minute) // 10:03:30
	if got, want := g.visible("t"), minutesAfter(start.Truncate(time.Minute), 1, 2, 3); !equal(got, want) {
		t.Fatalf("visible %s, want %s", fmtMs(got), fmtMs(want))
	}
	if g.r.Stats().Recovered.Load() != 2 {
		t.Fatalf("recovered %d firings, want 2", g.r.Stats().Recovered.Load())
	}
}

// TestPauseResumeDelete: a pause cancels the firing sent ahead and skips
// the fire times it spans; a resume goes on from then; a delete stops it
// for good, also across a restart.
func TestPauseResumeDelete(t *testing.T) {
	g := newRig(t)
	if _, err := g.r.Create(Schedule{ID: "s", Topic: "t", Cron: "* * * * *"}); err != nil {
		t.Fatal(err)
	}
	m0 := start.Truncate(time.Minute)
	g.advance(25 * time.Second) // 10:00:55: 10:01 is sent ahead
	// advance waits for Settled, which counts fire times, not sends ahead:
	// wait for the runner's loop to have sent 10:01 (it wakes at the
	// advance; the pause raced it in about 1 run of 300 under load).
	var ahead string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if in, err := g.r.Get("s"); err == nil && in.LastID != "" {
			ahead = in.LastID
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("10:01 was not sent ahead at 10:00:55")
		}
	}
	info, err := g.r.Pause("s")
	if err != nil || !info.Paused || len(info.Next) != 0 {
		t.Fatalf("pause: %+v, %v", info, err)
	}
	// The cancelled firing is no longer the last one (issue 30 item 7: a
	// resume showed a "last" later than its "next"); none was sent before.
	if info.LastFire != 0 || info.LastID != "" {
		t.Fatalf("after the pause the last firing is %d %q, want none", info.LastFire, info.LastID)
	}
	if id, err := message.ParseID(ahead); err != nil {
		t.Fatalf("no firing was sent ahead before the pause (%q)", ahead)
	} else if in, err := g.eng.Inspect(id); err != nil || in.State != engine.StateCancelled {
		t.Fatalf("the firing sent ahead is %+v (%v), want cancelled", in, err)
	}
	g.advance(3 * time.Minute) // 10:03:55, paused
	if got := g.visible("t"); len(got) != 0 {
		t.Fatalf("a paused schedule fired: %s", fmtMs(got))
	}
	if info, err = g.r.Resume("s"); err != nil || info.Paused || info.Next[0] != m0.Add(4*time.Minute).UnixMilli() {
		t.Fatalf("resume: %+v, %v", info, err)
	}
	g.advance(time.Minute) // 10:04:55
	if got, want := g.visible("t"), minutesAfter(m0, 4); !equal(got, want) {
		t.Fatalf("after the resume visible %s, want %s", fmtMs(got), fmtMs(want))
	}
	if _, err := g.r.Delete("s"); err != nil {
		t.Fatal(err)
	}
	g.restartRunner(0)
	g.advance(3 * time.Minute)
	if got, want := g.visible("t"), minutesAfter(m0, 4); !equal(got, want) {
		t.Fatalf("after the delete visible %s, want %s", fmtMs(got), fmtMs(want))
	}
	if _, err := g.r.Get("s"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
}

// TestPausedAcrossRestart: pause and progress survive a restart of the
// whole broker.
func TestPausedAcrossRestart(t *testing.T) {
	g := newRig(t)
	for _, id := range []string{"a", "b"} {
		if _, err := g.r.Create(Schedule{ID: id, Topic: "t", Cron: "@every 1m"}); err != nil {
			t.Fatal(err)
		}
	}
	g.advance(2 * time.Minute)
	if _, err := g.r.Pause("b"); err != nil {
		t.Fatal(err)
	}
	before, _ := g.r.Get("a")
	g.r.Close()
	g.eng.Close()
	g.openEngine()
	g.openRunner()
	a, _ := g.r.Get("a")
	b, _ := g.r.Get("b")
	if !b.Paused || a.Paused || a.LastFire != before.LastFire || a.LastID != before.LastID || a.Created != start.UnixMilli() {
		t.Fatalf("after a restart a=%+v b=%+v (a before: %+v)", a, b, before)
	}
}

func TestCreateValidates(t *testing.T) {
	g := newRig(t)
	if _, err := g.r.Create(Schedule{ID: "ok", Topic: "t", Cron: "0 9 * * *", TZ: "Europe/Berlin", Key: "report"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    Schedule
		code errs.Code
		want string
	}{
		{Schedule{ID: "a", Topic: "t", Cron: "61 * * * *"}, errs.InvalidArgument, "above maximum"},
		{Schedule{ID: "a", Topic: "t", Cron: "0 9 * * *", TZ: "Europe/Nowhere"}, errs.InvalidArgument, "time zone"},
		{Schedule{ID: "a", Topic: "t", Cron: "@hourly", CatchUp: "sometimes"}, errs.InvalidArgument, "catch_up"},
		{Schedule{ID: "a/b", Topic: "t", Cron: "@hourly"}, errs.InvalidArgument, "schedule id"},
		{Schedule{ID: "a", Topic: "", Cron: "@hourly"}, errs.InvalidArgument, "topic"},
		{Schedule{ID: "a", Topic: "t", Cron: "@hourly", Properties: map[string]string{PropSchedule: "x"}}, errs.InvalidArgument, "set by the broker"},
		{Schedule{ID: "a", Topic: "t", Cron: "@hourly", Body: make([]byte, 5<<20)}, errs.TooLarge, "would be refused"},
		{Schedule{ID: "ok", Topic: "u", Cron: "@hourly"}, errs.AlreadyExists, "already exists"},
		{Schedule{ID: "other", Topic: "t", Cron: "@hourly", Key: "report"}, errs.AlreadyExists, "another key"},
	} {
		_, err := g.r.Create(c.s)
		if errs.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.want) {
			t.Errorf("create %+v: %v; want %s saying %q", c.s, err, c.code, c.want)
		}
	}
	if l := g.r.List(); len(l) != 1 || l[0].ID != "ok" || l[0].CatchUp != CatchUpOnce || l[0].TZ != "Europe/Berlin" {
		t.Fatalf("list after refused creates: %+v", l)
	}
}

// TestJumpSendsEveryFiring: a clock jump while the broker runs (here a
// virtual advance of an hour) is time passing: every fire time it passes
// is sent, many per batch, none twice.
func TestJumpSendsEveryFiring(t *testing.T) {
	g := newRig(t)
	if _, err := g.r.Create(Schedule{ID: "s", Topic: "t", Cron: "@every 1s"}); err != nil {
		t.Fatal(err)
	}
	g.advance(time.Hour)
	if n := len(g.visibleAll("t")); n != 3600 {
		t.Fatalf("%d firings visible after an hour of @every 1s, want 3600", n)
	}
}

// visibleAll returns the fire times of every visible message of topic,
// read from its queues, failing on a key seen twice.
func (g *rig) visibleAll(topic string) []int64 {
	g.t.Helper()
	seen := map[string]bool{}
	var out []int64
	for _, ti := range g.eng.Topics() {
		if ti.Name != topic {
			continue
		}
		for q := range ti.Queues {
			for from := uint64(0); ; {
				vs, err := g.eng.ReadQueue(topic, q, from, 1000)
				if err != nil {
					g.t.Fatal(err)
				}
				if len(vs) == 0 {
					break
				}
				for _, v := range vs {
					if seen[v.Message.Key] {
						g.t.Fatalf("key %s visible twice", v.Message.Key)
					}
					seen[v.Message.Key] = true
					out = append(out, v.Due)
				}
				from = vs[len(vs)-1].Offset + 1
			}
		}
	}
	return out
}

// TestPauseCancelsEveryFiringSentAhead: an @every 1s schedule has about
// twenty firings sent ahead (the runner's lead). A pause cancels all of
// them, a resume sends each again once, and a delete cancels all of them
// too. A review found 19 firings delivered while paused, and 19 twice
// after a resume, when only the last one sent was cancelled.
func TestPauseCancelsEveryFiringSentAhead(t *testing.T) {
	g := newRig(t)
	if _, err := g.r.Create(Schedule{ID: "s", Topic: "t", Cron: "@every 1s"}); err != nil {
		t.Fatal(err)
	}
	g.aheadSent()
	paused := g.clk.Now().UnixMilli()
	if _, err := g.r.Pause("s"); err != nil {
		t.Fatal(err)
	}
	g.advance(25 * time.Second)
	for _, ft := range g.visible("t") {
		if ft > paused {
			t.Fatalf("a firing at %d, after the pause at %d, was delivered", ft, paused)
		}
	}
	resumed := g.clk.Now().UnixMilli()
	if _, err := g.r.Resume("s"); err != nil {
		t.Fatal(err)
	}
	g.advance(25 * time.Second)
	after := 0
	for _, ft := range g.visible("t") { // fails on a key delivered twice
		if ft > paused && ft <= resumed {
			t.Fatalf("a firing at %d, in the pause [%d, %d], was delivered", ft, paused, resumed)
		}
		if ft > resumed {
			after++
		}
	}
	if after != 25 {
		t.Fatalf("%d firings in the 25 s after the resume, want 25", after)
	}
	g.aheadSent()
	deleted := g.clk.Now().UnixMilli()
	if _, err := g.r.Delete("s"); err != nil {
		t.Fatal(err)
	}
	g.advance(25 * time.Second)
	for _, ft := range g.visible("t") {
		if ft > deleted {
			t.Fatalf("a firing at %d, after the delete at %d, was delivered", ft, deleted)
		}
	}
}

// TestJournalFailureIsReported: a failed journal write stops every
// schedule (fail-stop), and says so: Err, and each schedule's LastError
// (a review found it silent: active, no error, fire times in the past).
func TestJournalFailureIsReported(t *testing.T) {
	g := newRig(t)
	r, ff := g.faultyRunner()
	if _, err := r.Create(Schedule{ID: "s", Topic: "t", Cron: "@every 1s"}); err != nil {
		t.Fatal(err)
	}
	ff.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpSync && strings.Contains(name, "schedules") {
			return syscall.ENOSPC
		}
		return nil
	})
	g.clk.AdvanceTo(g.clk.Now().Add(time.Minute))
	for deadline := time.Now().Add(10 * time.Second); r.Err() == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the journal's failed write was not reported by Err")
		}
	}
	if in, err := r.Get("s"); err != nil || !strings.Contains(in.LastError, "schedules stopped") {
		t.Fatalf("the schedule after the journal failed: %+v %v", in, err)
	}
}

// TestLastAtOrBeforeLooksBack: the catch-up's last missed fire time is the
// one a walk from the first finds, for crons of every density, after short
// and long downtimes.
func TestLastAtOrBeforeLooksBack(t *testing.T) {
	// walk steps fire time by fire time from t up to now: the reference.
	// The downtimes grow, so each walk goes on from where the one before
	// ended (Next depends on nothing but its arguments), and the dense
	// crons' 120 days are walked once, not five times.
	walk := func(s *Spec, t, now, anchor int64) int64 {
		for n := s.Next(t, anchor); n != 0 && n <= now; n = s.Next(t, anchor) {
			t = n
		}
		return t
	}
	base := start.UnixMilli()
	for _, cron := range []string{"* * * * *", "*/7 * * * *", "0 9 * * 1-5", "30 2 1 * *", "0 0 29 2 *", "15 10 * 1 *"} {
		s, err := ParseSpec(cron, "Europe/Berlin")
		if err != nil {
			t.Fatal(err)
		}
		first := s.Next(base, base)
		walked := first
		for _, down := range []time.Duration{time.Minute, 90 * time.Minute, 3 * 24 * time.Hour, 40 * 24 * time.Hour, 120 * 24 * time.Hour} {
			now := first + down.Milliseconds()
			walked = walk(s, walked, now, base)
			if got, want := lastAtOrBefore(s, first, now, base), walked; got != want {
				t.Errorf("%q down %v: %d, want %d", cron, down, got, want)
			}
		}
	}
}

// TestStoppedByAChangeIsReported: a journal stopped by a change (not by a
// firing's progress) is reported by Err too, even with no firing due.
func TestStoppedByAChangeIsReported(t *testing.T) {
	g := newRig(t)
	r, ff := g.faultyRunner()
	ff.FailAfter(vfs.OpSync, 0, syscall.EIO)
	if _, err := r.Create(Schedule{ID: "y", Topic: "t", Cron: "0 0 1 1 *"}); err == nil {
		t.Fatal("a create whose journal fsync failed succeeded")
	}
	if r.Err() == nil {
		t.Fatal("the stopped journal is not reported by Err")
	}
}

// faultyRunner reopens the rig's runner on a Faulty over its filesystem.
func (g *rig) faultyRunner() (*Runner, *vfs.Faulty) {
	g.t.Helper()
	g.r.Close()
	ff := vfs.NewFaulty(g.fs)
	r, err := Open(Options{Dir: "/data/schedules", FS: ff, Broker: g.eng, Clock: g.clk, Logger: quiet})
	if err != nil {
		g.t.Fatal(err)
	}
	g.r = r
	return r, ff
}

// TestScheduleBytesAreBounded: the schedules' messages together are
// bounded (MaxBytes), a delete gives the room back, and its topic and key
// can be used again; the count across a restart is the journal's.
func TestScheduleBytesAreBounded(t *testing.T) {
	g := newRig(t)
	g.r.Close()
	r, err := Open(Options{Dir: "/data/schedules", FS: g.fs, Broker: g.eng, Clock: g.clk, Logger: quiet, MaxBytes: 3<<20 + 1024})
	if err != nil {
		t.Fatal(err)
	}
	g.r = r
	body := make([]byte, 1<<20)
	for i := range 2 {
		if _, err := g.r.Create(Schedule{ID: fmt.Sprint("s", i), Topic: "t", Cron: "@hourly", Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = g.r.Create(Schedule{ID: "s2", Topic: "t", Cron: "@hourly", Body: append(body, make([]byte, 1<<20)...)})
	if errs.CodeOf(err) != errs.ResourceExhausted || !strings.Contains(err.Error(), "-max-schedule-bytes") {
		t.Fatalf("a create past the bytes limit: %v, want resource_exhausted naming the flag", err)
	}
	if _, err := g.r.Delete("s0"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.r.Create(Schedule{ID: "s2", Topic: "t", Cron: "@hourly", Key: "s0", Body: append(body, make([]byte, 1<<20)...)}); err != nil {
		t.Fatalf("after a delete, its room and its key: %v", err)
	}
	g.r.Close()
	if g.r, err = Open(Options{Dir: "/data/schedules", FS: g.fs, Broker: g.eng, Clock: g.clk, Logger: quiet, MaxBytes: 3<<20 + 1024}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.r.Create(Schedule{ID: "s3", Topic: "t", Cron: "@hourly", Body: make([]byte, 2000)}); errs.CodeOf(err) != errs.ResourceExhausted {
		t.Fatalf("after a restart the journal's schedules still count: %v", err)
	}
	if _, err := g.r.Create(Schedule{ID: "s4", Topic: "t", Cron: "@hourly", Key: "s1"}); errs.CodeOf(err) != errs.AlreadyExists {
		t.Fatalf("after a restart a key in use is still refused: %v", err)
	}
}

// TestFailingScheduleDoesNotHoldTheClock: a schedule whose topic is FIFO
// fails every send (a FIFO topic needs a message group); it says so in its
// last_error and is retried, and it does not keep the runner from being
// settled, which every virtual clock advance waits for; another schedule's
// firings still arrive. The topic is made FIFO before the schedule exists:
// made after, it raced the runner's first send ahead, which creates the
// topic as a plain one.
func TestFailingScheduleDoesNotHoldTheClock(t *testing.T) {
	g := newRig(t)
	if err := g.eng.CreateTopic("f", engine.TopicConfig{Queues: 1, FIFO: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.r.Create(Schedule{ID: "bad", Topic: "f", Cron: "@every 10s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.r.Create(Schedule{ID: "good", Topic: "t", Cron: "@every 10s"}); err != nil {
		t.Fatal(err)
	}
	g.advance(30 * time.Second) // fails after 10 s without the fix
	info, err := g.r.Get("bad")
	if err != nil || info.LastError == "" {
		t.Fatalf("the failing schedule: %+v %v, want a last_error", info, err)
	}
	if got := g.visible("t"); len(got) != 3 {
		t.Fatalf("the other schedule's firings: %d visible, want 3", len(got))
	}
}

// TestFiringsSayWhatBecameOfThem: the latest fire times, newest first,
// each with its message and state: sent ahead (pending), visible, and
// skipped while paused (not sent); after a pause the last firing is the
// latest sent, never later than the next.
func TestFiringsSayWhatBecameOfThem(t *testing.T) {
	g := newRig(t)
	if _, err := g.r.Create(Schedule{ID: "s", Topic: "t", Cron: "* * * * *", TZ: "Europe/Berlin"}); err != nil {
		t.Fatal(err)
	}
	m0 := start.Truncate(time.Minute)
	g.advance(2 * time.Minute) // 10:02:30: 10:01 and 10:02 fired
	if _, err := g.r.Pause("s"); err != nil {
		t.Fatal(err)
	}
	g.advance(2 * time.Minute) // 10:04:30: 10:03 and 10:04 skipped
	info, err := g.r.Resume("s")
	if err != nil {
		t.Fatal(err)
	}
	if info.LastFire != m0.Add(2*time.Minute).UnixMilli() || info.LastFire >= info.Next[0] {
		t.Fatalf("after pause and resume: last %d, next %v", info.LastFire, info.Next)
	}
	g.advance(40 * time.Second) // 10:05:10: 10:05 fired; 10:06 not yet sent ahead
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if in, _ := g.r.Get("s"); in.LastFire == m0.Add(6*time.Minute).UnixMilli() {
			break
		}
		g.clk.AdvanceTo(g.clk.Now().Add(time.Second)) // into the lead of 10:06
		if time.Now().After(deadline) {
			t.Fatal("10:06 was not sent ahead")
		}
	}
	fs, err := g.r.Firings("s", 5)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		min   int
		sent  bool
		ahead bool
		state engine.State
	}
	wants := []want{{6, true, true, engine.StatePending}, {5, true, false, engine.StateVisible}, {4, false, false, ""},
		{3, false, false, ""}, {2, true, false, engine.StateVisible}, {1, true, false, engine.StateVisible}}
	if len(fs) != len(wants) {
		t.Fatalf("%d firings, want %d: %+v", len(fs), len(wants), fs)
	}
	for i, w := range wants {
		f := fs[i]
		if f.Fire != m0.Add(time.Duration(w.min)*time.Minute).UnixMilli() || f.Sent != w.sent || f.Ahead != w.ahead || f.State != w.state {
			t.Errorf("firing %d: %+v, want 10:0%d sent %v ahead %v state %q", i, f, w.min, w.sent, w.ahead, w.state)
		}
	}
	if _, err := g.r.Firings("s", 0); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("n 0: %v", err)
	}
	if _, err := g.r.Firings("nope", 5); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("unknown schedule: %v", err)
	}
}
