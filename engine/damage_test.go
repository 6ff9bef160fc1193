package engine

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/message"
)

// damageRecord overwrites 4 bytes inside the payload of the n-th message
// record of the log's first (sealed) segment, with the engine closed, and
// returns the record's position and its segment's file name.
func (h *harness) damageRecord(n int, at int) (uint64, string) {
	h.t.Helper()
	dir := path.Join(h.opt.Dir, "log")
	var segName string
	var base commitlog.Pos
	var target commitlog.Pos
	seen := 0
	rep, err := commitlog.Verify(h.fs, dir, func(p commitlog.Pos, rec commitlog.Record) error {
		if rec.Type == recMessage && seen <= n {
			if seen == n {
				target = p
			}
			seen++
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	if len(rep.Segments) < 2 || seen <= n {
		h.t.Fatalf("want a sealed segment with %d messages: %d segments, %d messages", n+1, len(rep.Segments), seen)
	}
	for _, s := range rep.Segments {
		if s.Base <= target && target < s.End {
			segName, base = s.Name, s.Base
		}
	}
	if segName == rep.Segments[len(rep.Segments)-1].Name {
		h.t.Fatalf("message %d at %d is in the active segment", n, target)
	}
	f, err := h.fs.Open(path.Join(dir, segName))
	if err != nil {
		h.t.Fatal(err)
	}
	defer f.Close()
	off := commitlog.HeaderSize + int64(target-base) + int64(at)
	if _, err := f.WriteAt([]byte{0xde, 0xad, 0xbe, 0xef}, off); err != nil {
		h.t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		h.t.Fatal(err)
	}
	return uint64(target), segName
}

// crashImage is a harness, not yet opened, on a crash image of h's disk
// (what was synced; no final checkpoint). Its engine closes when the test
// ends.
func (h *harness) crashImage() *harness {
	c := &harness{t: h.t, fs: h.fs.Crash(nil), clk: h.clk, opt: h.opt}
	c.opt.FS = c.fs
	h.t.Cleanup(func() {
		if c.e != nil {
			c.e.Close()
		}
	})
	return c
}

// drainDamaged receives and acks topic t for group g until a receive
// returns nothing, and returns the IDs received and the data_loss errors
// met on the way.
func (h *harness) drainDamaged(grp string) (map[message.ID]bool, []error) {
	h.t.Helper()
	got := map[message.ID]bool{}
	var losses []error
	for i := 0; i < 1000; i++ {
		rs, err := h.e.Receive(context.Background(), ReceiveRequest{Topic: "t", Group: grp, Max: 7, Invisible: time.Hour})
		if errs.CodeOf(err) == errs.DataLoss {
			losses = append(losses, err)
			continue
		}
		if err != nil {
			h.t.Fatalf("receive after %d messages: %v", len(got), err)
		}
		if len(rs) == 0 {
			return got, losses
		}
		for _, r := range rs {
			if got[r.ID] {
				h.t.Fatalf("%v received twice", r.ID)
			}
			got[r.ID] = true
			if err := h.e.Ack(context.Background(), "t", grp, r.Receipt); err != nil {
				h.t.Fatal(err)
			}
		}
	}
	h.t.Fatal("the group never drained")
	return nil, nil
}

// TestDamagedSealedRecordIsSetAside is issue 29's defect 1: 4 bytes
// overwritten inside a message record of a sealed segment. Before, the
// broker served the topic until a receive's batch met the record, and from
// then on every receive of the group answered unavailable ("checksum
// mismatch") for ever. Now the receive that meets it answers data_loss
// naming its position, the record is set aside (listed by Damage), and the
// group gets every other message; a restart does not meet it again.
func TestDamagedSealedRecordIsSetAside(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   int // where in the record the 4 bytes go
	}{{"body", 40}, {"length", 0}, {"checksum", 4}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(o *Options) { o.SegmentBytes = 4096 })
			const n = 200
			h.sendVisible("t", n)
			h.restart() // a checkpoint past the damage: the start does not replay it
			if err := h.e.Close(); err != nil {
				t.Fatal(err)
			}
			pos, seg := h.damageRecord(10, tc.at)
			h.open()

			got, losses := h.drainDamaged("g")
			if len(got) != n-1 {
				t.Fatalf("received %d messages, want %d (all but the damaged one)", len(got), n-1)
			}
			if len(losses) != 1 {
				t.Fatalf("data_loss answered %d times, want once: %v", len(losses), losses)
			}
			if msg := losses[0].Error(); !strings.Contains(msg, fmt.Sprintf("log position %d", pos)) {
				t.Fatalf("data_loss does not name position %d: %s", pos, msg)
			}
			d := h.e.Damage()
			if d.SetAsideTotal != 1 || d.SetAside[0].Pos != pos || d.SetAside[0].Group != "g" || d.SetAside[0].Segment != "log/"+seg {
				t.Fatalf("damage report %+v, want the record at %d in %s set aside for g", d, pos, seg)
			}
			// Another group meets it too, once.
			if got, losses := h.drainDamaged("other"); len(got) != n-1 || len(losses) != 1 {
				t.Fatalf("second group: %d messages, %d data_loss", len(got), len(losses))
			}
			h.restart()
			if got, losses := h.drainDamaged("g"); len(got) != 0 || len(losses) != 0 {
				t.Fatalf("after a restart the group got %d messages and %d data_loss, want none", len(got), len(losses))
			}
		})
	}
}

// TestSetAsideSurvivesCrash: the set-aside record is replayed after a
// kill -9 (no checkpoint after it): the group does not meet the damage
// again, and the report lists it.
func TestSetAsideSurvivesCrash(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.SegmentBytes = 4096 })
	h.sendVisible("t", 100)
	if err := h.e.Close(); err != nil {
		t.Fatal(err)
	}
	pos, _ := h.damageRecord(5, 30)
	h.open()
	got, losses := h.drainDamaged("g")
	if len(got) != 99 || len(losses) != 1 {
		t.Fatalf("%d messages, %d data_loss", len(got), len(losses))
	}
	c := h.crashOpen()
	if d := c.e.Damage(); d.SetAsideTotal != 1 || d.SetAside[0].Pos != pos {
		t.Fatalf("after a crash the report is %+v, want the record at %d", d, pos)
	}
	// History, not news: /healthz is not degraded by a replayed set-aside
	// (the scrub finds the damage again if it is still there).
	if deg := c.e.Degraded(); len(deg) != 0 {
		t.Fatalf("degraded by a replayed set-aside: %q", deg)
	}
	if got, losses := c.drainDamaged("g"); len(got) != 0 || len(losses) != 0 {
		t.Fatalf("after a crash the group got %d messages and %d data_loss, want none", len(got), len(losses))
	}
}

// TestDamageWithAcksRestoresThem: a receive that carries acks and meets a
// damaged record answers data_loss and acks nothing (its receipts stay
// valid), as a read error does.
func TestDamageWithAcksRestoresThem(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.SegmentBytes = 4096 })
	h.sendVisible("t", 60)
	if err := h.e.Close(); err != nil {
		t.Fatal(err)
	}
	h.damageRecord(30, 30)
	h.open()
	var first []Received
	for len(first) == 0 {
		rs, err := h.e.Receive(context.Background(), ReceiveRequest{Topic: "t", Group: "g", Max: 1, Invisible: time.Hour})
		if err != nil && errs.CodeOf(err) != errs.DataLoss {
			t.Fatal(err)
		}
		first = rs
	}
	var lossErr error
	for lossErr == nil {
		rs, err := h.e.Receive(context.Background(), ReceiveRequest{Topic: "t", Group: "g", Max: 1000, Invisible: time.Hour, Ack: receipts(first)})
		if err != nil {
			lossErr = err
			break
		}
		if len(rs) == 0 {
			t.Fatal("the damaged record was never met")
		}
		first = rs
	}
	if !errors.Is(lossErr, errs.ErrDataLoss) {
		t.Fatalf("receive with acks over damage: %v, want data_loss", lossErr)
	}
	if err := h.e.Ack(context.Background(), "t", "g", first[0].Receipt); err != nil {
		t.Fatalf("the receipts of a receive answered data_loss must stay valid: %v", err)
	}
}

// TestCheckListsSetAside: hourglass check reports the damage as a problem
// and lists the set-aside message at its segment and offset.
func TestCheckListsSetAside(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.SegmentBytes = 4096 })
	h.sendVisible("t", 50)
	if err := h.e.Close(); err != nil {
		t.Fatal(err)
	}
	pos, seg := h.damageRecord(7, 30)
	h.open()
	if _, losses := h.drainDamaged("g"); len(losses) != 1 {
		t.Fatalf("data_loss answered %d times", len(losses))
	}
	if err := h.e.Close(); err != nil {
		t.Fatal(err)
	}
	h.e = nil
	rep, err := Check(h.fs, h.opt.Dir, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.SetAside) != 1 || rep.SetAside[0].File != "log/"+seg || !strings.Contains(rep.SetAside[0].What, fmt.Sprintf("position %d", pos)) ||
		!strings.Contains(rep.SetAside[0].What, `group "g"`) {
		t.Fatalf("set aside %+v, want the message at %d in %s for group g", rep.SetAside, pos, seg)
	}
	if rep.OK() || !strings.Contains(rep.Problems[0].What, fmt.Sprintf("at position %d", pos)) {
		t.Fatalf("the damage itself must stay a problem: %+v", rep.Problems)
	}
}

// TestDamageInReplayRefusesUntilRepair: damage in a sealed segment after
// the checkpoint (here a crash image: no checkpoint at all) is in records
// recovery must apply, so the broker refuses to start, naming the segment
// and position and saying to run repair; nothing is changed. After
// hourglass repair (commitlog.Repair: a skip frame over the damage) it
// starts, the damaged message is answered data_loss once and set aside,
// and every other message is delivered.
func TestDamageInReplayRefusesUntilRepair(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.SegmentBytes = 4096 })
	h.sendVisible("t", 50)
	c := h.crashImage()
	pos, seg := c.damageRecord(7, 30)
	_, err := Open(c.opt)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("log/%s holds damage at log position %d", seg, pos)) ||
		!strings.Contains(err.Error(), "hourglass repair --data-dir") {
		t.Fatalf("open over damage in the replay range: %v", err)
	}
	rep, err := commitlog.Repair(commitlog.Options{FS: c.fs, Dir: path.Join(c.opt.Dir, "log")}, commitlog.RepairSalvage)
	if err != nil || len(rep.Ranges) != 1 || rep.Ranges[0].Pos != commitlog.Pos(pos) {
		t.Fatalf("repair: %+v, %v", rep, err)
	}
	c.open()
	got, losses := c.drainDamaged("g")
	if len(got) != 49 || len(losses) != 1 || !strings.Contains(losses[0].Error(), fmt.Sprintf("log position %d", pos)) {
		t.Fatalf("after repair: %d messages, data_loss %v", len(got), losses)
	}
}

// TestRepairedMessageWithCancel: a cancel whose message's record repair
// quarantined is passed over at replay (with a warning), not a reason to
// refuse to start for ever.
func TestRepairedMessageWithCancel(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.SegmentBytes = 4096 })
	r := h.send("t", "k", message.When{Delay: time.Hour})
	if err := h.e.Cancel(context.Background(), r.ID); err != nil {
		t.Fatal(err)
	}
	h.sendVisible("t", 60)
	c := h.crashImage()
	if pos, _ := c.damageRecord(0, 30); pos != r.ID.Pos {
		t.Fatalf("damaged %d, want the cancelled message at %d", pos, r.ID.Pos)
	}
	if _, err := commitlog.Repair(commitlog.Options{FS: c.fs, Dir: path.Join(c.opt.Dir, "log")}, commitlog.RepairSalvage); err != nil {
		t.Fatal(err)
	}
	c.open()
	if got, losses := c.drainDamaged("g"); len(got) != 60 || len(losses) != 0 {
		t.Fatalf("after repair: %d messages, data_loss %v", len(got), losses)
	}
}

// TestDamagedPendingMessageFiresAsDataLoss: a pending message whose record
// is damaged fires at its time (its timer is in the timer index) and the
// receive that meets it answers data_loss; the group goes on.
func TestDamagedPendingMessageFiresAsDataLoss(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.SegmentBytes = 4096 })
	r := h.send("t", "late", message.When{Delay: time.Hour})
	h.sendVisible("t", 60)
	if err := h.e.Close(); err != nil {
		t.Fatal(err)
	}
	if pos, _ := h.damageRecord(0, 30); pos != r.ID.Pos {
		t.Fatalf("damaged %d, want the pending message at %d", pos, r.ID.Pos)
	}
	h.open()
	if got, losses := h.drainDamaged("g"); len(got) != 60 || len(losses) != 0 {
		t.Fatalf("before its time: %d messages, data_loss %v", len(got), losses)
	}
	h.clk.Advance(time.Hour)
	deadline := time.Now().Add(5 * time.Second)
	for n := 0; n != 61 && time.Now().Before(deadline); {
		n = 0
		for _, ti := range h.e.Topics() {
			for _, l := range ti.Lengths {
				n += int(l)
			}
		}
		time.Sleep(time.Millisecond)
	}
	// ReadQueue passes over the damaged record: 60 readable, and the
	// report lists the one passed over (no group).
	if n := len(h.visible("t")); n != 60 {
		t.Fatalf("an offset read gave %d messages, want 60", n)
	}
	if d := h.e.Damage(); d.SetAsideTotal != 1 || d.SetAside[0].Pos != r.ID.Pos || d.SetAside[0].Group != "" {
		t.Fatalf("the offset read's pass over %d is not reported: %+v", r.ID.Pos, d)
	}
	got, losses := h.drainDamaged("g")
	if len(got) != 0 || len(losses) != 1 || !strings.Contains(losses[0].Error(), fmt.Sprintf("log position %d", r.ID.Pos)) {
		t.Fatalf("after its time: %d messages, data_loss %v", len(got), losses)
	}
}

// TestDamagedDeadLetterIsSetAside: a message whose record is damaged
// after it was received, then given up by its consumer (DeadLetter), has
// nothing to copy to the dead-letter topic: it is set aside instead of
// being retried for ever, and the call succeeds.
func TestDamagedDeadLetterIsSetAside(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.SegmentBytes = 4096 })
	r := h.send("t", "k", message.When{})
	for range 60 {
		h.send("t", "", message.When{})
	}
	h.waitVisible("t", 61)
	rs := h.receiveN("t", "g", 61, time.Hour)
	var mine Received
	for _, x := range rs {
		if x.ID == r.ID {
			mine = x
		}
	}
	// The engine is open: the damage comes after the receive, as bit rot would.
	if pos, _ := h.damageRecord(0, 30); pos != r.ID.Pos {
		t.Fatalf("damaged %d, want %d", pos, r.ID.Pos)
	}
	if err := h.e.DeadLetterAttempts(context.Background(), "t", "g", mine.Receipt, 0); err != nil {
		t.Fatalf("dead-lettering a damaged message: %v", err)
	}
	if d := h.e.Damage(); d.SetAsideTotal != 1 || d.SetAside[0].Pos != r.ID.Pos || d.SetAside[0].Group != "g" {
		t.Fatalf("damage report %+v", d)
	}
	if g := groupInfo(h, "t", "g"); g.DeadLettered != 0 {
		t.Fatalf("dead-lettered %d, want none (nothing to copy)", g.DeadLettered)
	}
}
