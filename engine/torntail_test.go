package engine

import (
	"errors"
	"math/rand/v2"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/message"
)

// What the torn-tail test can claim. It damages the last commit-log
// segment of a stopped engine's disk at a random position c at or after
// the last checkpoint's log position: cuts the file there, flips a byte
// there, zeroes everything from there, or appends garbage after the last
// record. Then, on reopening:
//
//   - every record that ends at or before c is intact: its send, cancel or
//     reschedule takes effect as acknowledged; the log's head is exactly the
//     start of the first record that ends after c;
//   - that record and every later one are lost: their sends do not exist
//     (NotFound, never visible), their cancels and reschedules never
//     happened, and what their fire records made visible is made visible
//     again from the timers;
//   - nothing else is lost, nothing is served twice, early or corrupt, and
//     the engine keeps accepting and delivering messages, also after
//     another restart.
//
// A power loss under sync flush can only tear unacknowledged bytes, so in
// production the records after c were never acknowledged. Damage before
// the checkpoint's position is beyond what a crash can do: the engine then
// refuses to open rather than serve a state that lacks records the
// checkpoint says it has, and the test checks that refusal too.

// logRecord is one record of the log and where it ends.
type logRecord struct {
	pos, end uint64
	typ      commitlog.Type
	target   uint64 // cancel and reschedule: the message's position
}

func scanLog(t *testing.T, e *Engine) []logRecord {
	t.Helper()
	var out []logRecord
	err := e.clog.Scan(e.clog.Start(), func(pos commitlog.Pos, rec commitlog.Record) error {
		lr := logRecord{pos: uint64(pos), end: uint64(pos) + uint64(commitlog.FrameHeaderSize+len(rec.Payload)), typ: rec.Type}
		if rec.Type == recCancel || rec.Type == recReschedule {
			p, _, err := decodePos(rec.Payload)
			if err != nil {
				return err
			}
			lr.target = p
		}
		out = append(out, lr)
		return nil
	})
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	return out
}

// survivingEvents keeps the ledger events whose records start before
// first, the position of the first lost record. Sends are records at their
// ID; the k-th acknowledged change of a message is its k-th change record
// (retention removes a message's changes together with the message, or
// later: so if any are gone, the first ones are).
// Consumer observations are dropped: a lost fire record may put a message
// at another offset when it fires again.
func survivingEvents(events []event, recs []logRecord, first uint64) []event {
	changes := map[uint64][]uint64{}
	for _, r := range recs {
		if r.typ == recCancel || r.typ == recReschedule {
			changes[r.target] = append(changes[r.target], r.pos)
		}
	}
	var out []event
	for _, ev := range events {
		switch {
		case ev.state != evAcked || ev.kind == evSeen:
			continue
		case ev.kind == evSend:
			if ev.id.Pos < first {
				out = append(out, ev)
			}
		default:
			// A change whose record retention removed (its message was
			// long delivered) counts as surviving.
			q := changes[ev.id.Pos]
			if len(q) == 0 || q[0] < first {
				out = append(out, ev)
			}
			if len(q) > 0 {
				changes[ev.id.Pos] = q[1:]
			}
		}
	}
	return out
}

type tornStats struct {
	modes            map[string]int
	recordsLost      int
	acksLost         int
	refused, checked int
}

func TestTornTail(t *testing.T) {
	cases := 150
	if testing.Short() {
		cases = 30
	}
	st := &tornStats{modes: map[string]int{}}
	for i := 0; i < cases; i++ {
		tornTailCase(t, i, st)
		if t.Failed() {
			break
		}
	}
	t.Logf("torn tail: %d damaged logs recovered and checked %v, %d records and %d acknowledged operations lost after the damage, %d damages before the checkpoint refused",
		st.checked, st.modes, st.recordsLost, st.acksLost, st.refused)
	if st.checked < cases/2 {
		t.Errorf("only %d of %d cases were checked", st.checked, cases)
	}
}

func tornTailCase(t *testing.T, seed int, st *tornStats) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x7a11))
	r := &plRun{t: t, id: 1000 + seed, rng: rand.New(rand.NewPCG(uint64(seed), 0xdead))}
	if !r.open() {
		return
	}
	r.steps(30 + rng.IntN(40))
	now := r.now()
	if !waitSettled(r.e, now, 5*time.Second) {
		t.Fatalf("case %d: engine did not settle: %s", seed, engineState(r.e))
	}
	recs := scanLog(t, r.e)
	image := r.mem.Crash(nil) // sync flush: every acknowledged record is in it
	if err := r.e.Close(); err != nil {
		t.Fatalf("case %d: close: %v", seed, err)
	}
	if len(recs) == 0 {
		return
	}
	head := recs[len(recs)-1].end

	// The last segment and the checkpoint's log position.
	logDir := path.Join("data", "log")
	names, err := image.List(logDir)
	if err != nil {
		t.Fatal(err)
	}
	last := names[len(names)-1]
	base := uint64(0)
	for _, c := range strings.TrimSuffix(last, ".log") {
		base = base*10 + uint64(c-'0')
	}
	ckptPos := base
	if b, err := readAll(image, path.Join("data", checkpointFile)); err == nil {
		cs, err := decodeCheckpoint(b)
		if err != nil {
			t.Fatalf("case %d: checkpoint: %v", seed, err)
		}
		ckptPos = max(cs.LogPos, base)
	}
	f, err := image.Open(path.Join(logDir, last))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	offset := func(pos uint64) int64 { return int64(pos-base) + commitlog.HeaderSize }

	// Damage.
	mode := []string{"cut", "flip", "zero", "garbage", "before-checkpoint"}[rng.IntN(5)]
	if mode == "before-checkpoint" && ckptPos <= base {
		mode = "cut"
	}
	if ckptPos >= head && mode != "before-checkpoint" {
		mode = "garbage" // nothing after the checkpoint in this segment
	}
	c := head
	switch mode {
	case "cut":
		c = ckptPos + rng.Uint64N(head-ckptPos+1)
		err = f.Truncate(offset(c))
	case "flip":
		c = ckptPos + rng.Uint64N(head-ckptPos)
		var b [1]byte
		if _, err = f.ReadAt(b[:], offset(c)); err == nil {
			b[0] ^= byte(1 + rng.IntN(255))
			_, err = f.WriteAt(b[:], offset(c))
		}
	case "zero":
		c = ckptPos + rng.Uint64N(head-ckptPos)
		old := make([]byte, head-c)
		if _, err = f.ReadAt(old, offset(c)); err == nil {
			_, err = f.WriteAt(make([]byte, head-c), offset(c))
		}
		// Bytes that were zero already are not damage (a fire record ends
		// in zeros): the damage starts at the first byte that changed.
		for len(old) > 0 && old[0] == 0 {
			old, c = old[1:], c+1
		}
	case "garbage":
		junk := make([]byte, 1+rng.IntN(100))
		for i := range junk {
			junk[i] = byte(rng.IntN(256))
		}
		_, err = f.WriteAt(junk, offset(head))
	case "before-checkpoint":
		c = base + rng.Uint64N(ckptPos-base)
		err = f.Truncate(offset(c))
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		t.Fatalf("case %d: damage: %v", seed, err)
	}
	st.modes[mode]++

	clk := clock.NewFake(time.UnixMilli(now))
	opts := plOptions(image, clk)
	if mode == "before-checkpoint" {
		e, err := Open(opts)
		if err == nil {
			e.Close()
			t.Fatalf("case %d: a log cut at %d, before the checkpoint's position %d, was opened", seed, c, ckptPos)
		}
		if !strings.Contains(err.Error(), "checkpoint") {
			t.Fatalf("case %d: refusal does not say why: %v", seed, err)
		}
		st.refused++
		return
	}
	first := head // the first lost record
	for _, rec := range recs {
		if rec.end > c {
			first = rec.pos
			break
		}
	}
	events := survivingEvents(r.events, recs, first)
	for _, rec := range recs {
		if rec.pos >= first {
			st.recordsLost++
		}
	}
	for _, ev := range r.events {
		if ev.state == evAcked && ev.kind != evSeen {
			st.acksLost++
		}
	}
	st.acksLost -= len(events)

	e, err := Open(opts)
	var damage *commitlog.DamageError
	if mode == "flip" && errors.As(err, &damage) {
		// A flipped bit followed by valid, acknowledged records is media
		// damage, not a torn write: the log refuses to cut them and says
		// to run repair (commitlog's own tests cover repair).
		if !strings.Contains(err.Error(), "repair") {
			t.Fatalf("case %d: refusal does not say what to do: %v", seed, err)
		}
		st.refused++
		return
	}
	if err != nil {
		t.Fatalf("case %d (%s at %d, checkpoint at %d): open: %v", seed, mode, c, ckptPos, err)
	}
	defer func() { e.Close() }()
	if got := uint64(e.clog.Recovery().TruncatedAt); got != first {
		t.Fatalf("case %d (%s at %d): the log was cut at %d, want %d (the first record ending after the damage): %+v",
			seed, mode, c, got, first, e.clog.Recovery())
	}
	for _, ev := range r.events {
		if ev.kind == evSend && ev.state == evAcked && ev.id.Pos >= first {
			if _, err := e.Inspect(ev.id); !IsNotFound(err) {
				t.Fatalf("case %d: %v was after the damage, yet inspect gives %v", seed, ev.id, err)
			}
		}
	}
	check := func(step string, at int64) {
		t.Helper()
		if !waitSettled(e, at, 5*time.Second) {
			t.Fatalf("case %d (%s at %d) %s: engine did not settle at %d: %s", seed, mode, c, step, at, engineState(e))
		}
		m := buildModel(events)
		m.retiredBefore = at - opts.Retention.Milliseconds()
		if rep := checkEngine(e, m, at); rep.failures() > 0 {
			t.Fatalf("case %d (%s at %d, checkpoint at %d, first lost record %d) %s: %s", seed, mode, c, ckptPos, first, step, rep)
		}
	}
	check("at reopening", now)

	// The engine keeps working: new sends are accepted and delivered.
	for i := 0; i < 3; i++ {
		body := "after-damage-" + string(rune('a'+i))
		rcpt, err := e.Send(t.Context(), message.Message{Topic: "pa", Body: []byte(body)}, message.When{Delay: time.Duration(rng.IntN(1000)) * time.Millisecond})
		if err != nil {
			t.Fatalf("case %d: send after recovery: %v", seed, err)
		}
		events = append(events, event{kind: evSend, state: evAcked, id: rcpt.ID, topic: "pa", body: body, due: rcpt.Due})
	}
	h := max(buildModel(events).horizon(), now) + 1
	waitParked(e, clk)
	clk.Advance(time.Duration(h-now) * time.Millisecond)
	check("after every due time", h)
	if err := e.Close(); err != nil {
		t.Fatalf("case %d: close after recovery: %v", seed, err)
	}
	if e, err = Open(opts); err != nil {
		t.Fatalf("case %d: reopen after recovery: %v", seed, err)
	}
	check("after another restart", h)
	st.checked++
}
