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
	"github.com/hourglass-mq/hourglass/vfs"
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
		t.Logf("-short: %d damaged logs, not 150; `make test-durability` (CI) runs the full size", cases)
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
	// A fire record is answered before its fdatasync ends (E21): wait for
	// it, so that every record scanned is in the image.
	if err := r.e.Sync(); err != nil {
		t.Fatalf("case %d: sync: %v", seed, err)
	}
	recs := scanLog(t, r.e)
	image := r.mem.Crash(nil) // sync flush: every acknowledged record is in it
	if err := r.e.Close(); err != nil {
		t.Fatalf("case %d: close: %v", seed, err)
	}
	if len(recs) == 0 {
		return
	}
	tail := openTornTail(t, seed, image, recs[len(recs)-1].end)
	defer tail.f.Close()
	mode, c := tail.damage(t, seed, rng)
	st.modes[mode]++

	clk := clock.NewFake(time.UnixMilli(now))
	opts := plOptions(image, clk)
	if mode == "before-checkpoint" {
		e, err := Open(opts)
		if err == nil {
			e.Close()
			t.Fatalf("case %d: a log cut at %d, before the checkpoint's position %d, was opened", seed, c, tail.ckptPos)
		}
		if !strings.Contains(err.Error(), "checkpoint") {
			t.Fatalf("case %d: refusal does not say why: %v", seed, err)
		}
		st.refused++
		return
	}
	first := tail.head // the first lost record
	for _, rec := range recs {
		if rec.end > c {
			first = rec.pos
			break
		}
	}
	events := survivingEvents(r.events, recs, first)
	countTornLosses(st, r.events, recs, first, len(events))

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
		t.Fatalf("case %d (%s at %d, checkpoint at %d): open: %v", seed, mode, c, tail.ckptPos, err)
	}
	v := &tornVerify{t: t, seed: seed, mode: mode, c: c, ckptPos: tail.ckptPos, first: first, opts: opts, clk: clk, e: e}
	defer func() { v.e.Close() }()
	v.recovered(r.events, events, rng, now)
	st.checked++
}

// tornTail is the last log segment of a crash image, opened for damage.
type tornTail struct {
	f       vfs.File
	base    uint64 // the segment's first log position
	ckptPos uint64 // the checkpoint's log position (base when there is none)
	head    uint64 // the end of the last record
}

// openTornTail opens the last log segment of image and reads the
// checkpoint's log position; head is the end of the last record.
func openTornTail(t *testing.T, seed int, image vfs.FS, head uint64) *tornTail {
	t.Helper()
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
	return &tornTail{f: f, base: base, ckptPos: ckptPos, head: head}
}

// offset is the file offset of log position pos in the segment.
func (tt *tornTail) offset(pos uint64) int64 { return int64(pos-tt.base) + commitlog.HeaderSize }

// damage picks a damage mode at random (cut, flip, zero, garbage or a cut
// before the checkpoint), applies it to the segment and syncs it. c is the
// log position where the damage starts.
func (tt *tornTail) damage(t *testing.T, seed int, rng *rand.Rand) (mode string, c uint64) {
	t.Helper()
	f, base, ckptPos, head := tt.f, tt.base, tt.ckptPos, tt.head
	mode = []string{"cut", "flip", "zero", "garbage", "before-checkpoint"}[rng.IntN(5)]
	if mode == "before-checkpoint" && ckptPos <= base {
		mode = "cut"
	}
	if ckptPos >= head && mode != "before-checkpoint" {
		mode = "garbage" // nothing after the checkpoint in this segment
	}
	c = head
	var err error
	switch mode {
	case "cut":
		c = ckptPos + rng.Uint64N(head-ckptPos+1)
		err = f.Truncate(tt.offset(c))
	case "flip":
		c = ckptPos + rng.Uint64N(head-ckptPos)
		var b [1]byte
		if _, err = f.ReadAt(b[:], tt.offset(c)); err == nil {
			b[0] ^= byte(1 + rng.IntN(255))
			_, err = f.WriteAt(b[:], tt.offset(c))
		}
	case "zero":
		c = ckptPos + rng.Uint64N(head-ckptPos)
		old := make([]byte, head-c)
		if _, err = f.ReadAt(old, tt.offset(c)); err == nil {
			_, err = f.WriteAt(make([]byte, head-c), tt.offset(c))
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
		_, err = f.WriteAt(junk, tt.offset(head))
	case "before-checkpoint":
		c = base + rng.Uint64N(ckptPos-base)
		err = f.Truncate(tt.offset(c))
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		t.Fatalf("case %d: damage: %v", seed, err)
	}
	return mode, c
}

// countTornLosses adds to st the records from first on and the
// acknowledged events that did not survive (surviving of them did).
func countTornLosses(st *tornStats, all []event, recs []logRecord, first uint64, surviving int) {
	for _, rec := range recs {
		if rec.pos >= first {
			st.recordsLost++
		}
	}
	for _, ev := range all {
		if ev.state == evAcked && ev.kind != evSeen {
			st.acksLost++
		}
	}
	st.acksLost -= surviving
}

// tornVerify checks an engine reopened over a damaged log.
type tornVerify struct {
	t       *testing.T
	seed    int
	mode    string
	c       uint64 // where the damage starts
	ckptPos uint64
	first   uint64 // the first lost record
	opts    Options
	clk     *clock.Fake
	e       *Engine
}

// check waits until the engine settles at at and compares it with the
// model of events.
func (v *tornVerify) check(events []event, step string, at int64) {
	v.t.Helper()
	if !waitSettled(v.e, at, 5*time.Second) {
		v.t.Fatalf("case %d (%s at %d) %s: engine did not settle at %d: %s", v.seed, v.mode, v.c, step, at, engineState(v.e))
	}
	m := buildModel(events)
	m.retiredBefore = at - v.opts.Retention.Milliseconds()
	if rep := checkEngine(v.e, m, at); rep.failures() > 0 {
		v.t.Fatalf("case %d (%s at %d, checkpoint at %d, first lost record %d) %s: %s", v.seed, v.mode, v.c, v.ckptPos, v.first, step, rep)
	}
}

// recovered checks that the log was cut at the first damaged record, that
// nothing acknowledged after it is found, that the surviving events match,
// and that the engine keeps accepting and delivering sends, across another
// restart too.
func (v *tornVerify) recovered(all, events []event, rng *rand.Rand, now int64) {
	t, seed, e := v.t, v.seed, v.e
	if got := uint64(e.clog.Recovery().TruncatedAt); got != v.first {
		t.Fatalf("case %d (%s at %d): the log was cut at %d, want %d (the first record ending after the damage): %+v",
			seed, v.mode, v.c, got, v.first, e.clog.Recovery())
	}
	for _, ev := range all {
		if ev.kind == evSend && ev.state == evAcked && ev.id.Pos >= v.first {
			if _, err := e.Inspect(ev.id); !IsNotFound(err) {
				t.Fatalf("case %d: %v was after the damage, yet inspect gives %v", seed, ev.id, err)
			}
		}
	}
	v.check(events, "at reopening", now)

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
	waitParked(e, v.clk)
	v.clk.Advance(time.Duration(h-now) * time.Millisecond)
	v.check(events, "after every due time", h)
	if err := e.Close(); err != nil {
		t.Fatalf("case %d: close after recovery: %v", seed, err)
	}
	var err error
	if v.e, err = Open(v.opts); err != nil {
		t.Fatalf("case %d: reopen after recovery: %v", seed, err)
	}
	v.check(events, "after another restart", h)
}
