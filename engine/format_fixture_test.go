package engine

import (
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// The format fixture is a data directory written by data-directory format 2,
// committed under testdata/format2: data/ is the directory, manifest.json
// names every message in it (its ID, key and expected state) and the
// engine time it was written at. Regenerate it, only while the format is
// still 2, with
//
//	go test ./engine -run TestWriteFormatFixture -update
//
// TestOpenFormatFixture opens a copy with the current code. It must keep
// passing for every later format change: a newer hourglass reads this
// directory or migrates it in a crash-safe step. Never regenerate the
// fixture to make a newer format pass; add a fixture of the new format
// beside it (testdata/format3) and keep this one.
var updateFixture = flag.Bool("update", false, "rewrite testdata/format2 with the current code (TestWriteFormatFixture)")

const fixtureDir = "testdata/format2"

// fixtureTime is the engine time the fixture was written at: the fake clock
// did not move while it was written.
var fixtureTime = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// fixtureMessage is one message of the fixture and its state when written.
type fixtureMessage struct {
	// Role says what the fixture exercises with it.
	Role  string `json:"role"`
	ID    string `json:"id"`
	Topic string `json:"topic"`
	Key   string `json:"key"`
	Body  string `json:"body"`
	State State  `json:"state"`
	// Due is the effective due time in Unix ms, after any reschedule.
	Due int64 `json:"due"`
}

type fixtureManifest struct {
	Format   int              `json:"format"`
	Now      int64            `json:"now"`
	Group    string           `json:"group"`
	Messages []fixtureMessage `json:"messages"`
}

// fixtureOptions opens dir on the real filesystem with clk, as the fixture
// was written and is read.
func fixtureOptions(dir string, clk *clock.Fake) Options {
	return Options{Dir: dir, FS: vfs.OS, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		CheckpointInterval: time.Hour, SegmentBytes: 1 << 16}
}

// settleFixture waits until e has dispatched everything due at its time.
func settleFixture(t *testing.T, e *Engine) {
	t.Helper()
	if !waitSettled(e, e.Now(), 5*time.Second) {
		t.Fatalf("engine did not settle: %s", engineState(e))
	}
}

// TestWriteFormatFixture rewrites testdata/format2 with -update; without it
// it checks that the committed fixture was written by the format it claims.
func TestWriteFormatFixture(t *testing.T) {
	if !*updateFixture {
		checkFixtureIsFormat2(t)
		return
	}
	if DataFormat != 2 {
		t.Fatalf("this hourglass writes format %d: keep testdata/format2 and add a fixture for format %d beside it", DataFormat, DataFormat)
	}
	dataDir := filepath.Join(fixtureDir, "data")
	if err := os.RemoveAll(dataDir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(fixtureTime)
	e, err := Open(fixtureOptions(dataDir, clk))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	man := fixtureManifest{Format: DataFormat, Now: fixtureTime.UnixMilli(), Group: "billing"}
	// send returns the index of the message's manifest entry (the slice
	// grows, so no pointer into it is kept across sends).
	send := func(role, key string, w message.When, props map[string]string) int {
		t.Helper()
		m := message.Message{Topic: "orders", Key: key, Tag: "fixture", Properties: props, Body: []byte("body of " + key)}
		r, err := e.Send(ctx, m, w)
		if err != nil {
			t.Fatalf("send %s: %v", key, err)
		}
		man.Messages = append(man.Messages, fixtureMessage{Role: role, ID: r.ID.String(), Topic: m.Topic, Key: key,
			Body: string(m.Body), State: StatePending, Due: r.Due})
		return len(man.Messages) - 1
	}
	send("pending, due in 1h", "order-1", message.When{Delay: time.Hour}, nil)
	send("pending with properties, due in 2h", "order-2", message.When{Delay: 2 * time.Hour}, map[string]string{"customer": "c-42"})
	send("pending in an on-disk timer bucket, due in 30 days", "order-3", message.When{Delay: 30 * 24 * time.Hour}, nil)
	ci := send("cancelled", "order-4", message.When{Delay: time.Hour}, nil)
	ri := send("rescheduled from 1h to 3h", "order-5", message.When{Delay: time.Hour}, nil)
	ai := send("visible, received by billing and acked", "seen-acked", message.When{}, nil)
	li := send("visible, received by billing, lease in flight when closed", "seen-leased", message.When{}, nil)
	c, r, acked := &man.Messages[ci], &man.Messages[ri], &man.Messages[ai]
	acked.State, man.Messages[li].State = StateVisible, StateVisible

	id, _ := message.ParseID(c.ID)
	if err := e.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	c.State = StateCancelled
	id, _ = message.ParseID(r.ID)
	if r.Due, err = e.Reschedule(ctx, id, message.When{Delay: 3 * time.Hour}, 0); err != nil {
		t.Fatal(err)
	}
	settleFixture(t, e)
	got, err := e.Receive(ctx, ReceiveRequest{Topic: "orders", Group: man.Group, Max: 10, Invisible: 10 * time.Minute})
	if err != nil || len(got) != 2 {
		t.Fatalf("receive: %d messages, %v", len(got), err)
	}
	for _, g := range got {
		if g.Message.Key == acked.Key {
			if err := e.Ack(ctx, "orders", man.Group, g.Receipt); err != nil {
				t.Fatal(err)
			}
		}
	}
	fi := send("visible, never received", "unseen", message.When{}, nil)
	man.Messages[fi].State = StateVisible
	settleFixture(t, e)
	for _, m := range man.Messages {
		id, _ := message.ParseID(m.ID)
		if info, err := e.Inspect(id); err != nil || info.State != m.State || info.Due != m.Due {
			t.Fatalf("%s: %+v %v, want state %s due %d", m.Key, info, err, m.State, m.Due)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	writeFixtureManifest(t, man)
}

// checkFixtureIsFormat2 checks that the fixture's data directory is
// stamped as format 2.
func checkFixtureIsFormat2(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, "data", identityFile))
	if err != nil {
		t.Fatal(err)
	}
	id, err := decodeIdentity(b)
	if err != nil || id.format != 2 {
		t.Fatalf("%s/data is not a format-2 directory: %+v %v", fixtureDir, id, err)
	}
}

// writeFixtureManifest writes man as the fixture's manifest.json.
func writeFixtureManifest(t *testing.T, man fixtureManifest) {
	t.Helper()
	b, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fixtureDir, "manifest.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOpenFormatFixture opens a copy of the format-2 fixture with the
// current code: every message is where the manifest says, the group's ack
// and its in-flight lease survived, and delivery goes on from there as the
// fake clock advances. It must pass for every later format (see above).
func TestOpenFormatFixture(t *testing.T) {
	man := readFixtureManifest(t)
	dir := t.TempDir()
	// Opening writes (a checkpoint, and any migration): work on a copy.
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(fixtureDir, "data"))); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.UnixMilli(man.Now))
	e, err := Open(fixtureOptions(dir, clk))
	if err != nil {
		t.Fatalf("the current hourglass does not open a format-%d directory: %v", man.Format, err)
	}
	defer func() {
		if err := e.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	ctx := t.Context()
	settleFixture(t, e)

	byKey, lastPos := checkFixtureMessages(t, e, man)

	// receive returns the keys delivered to the group now, after the
	// engine settled, and acks them; attempts maps key to attempt.
	receive := func(step string, want map[string]int) {
		t.Helper()
		settleFixture(t, e)
		got, err := e.Receive(ctx, ReceiveRequest{Topic: "orders", Group: man.Group, Max: 10})
		if err != nil {
			t.Fatalf("%s: receive: %v", step, err)
		}
		seen := map[string]int{}
		for _, g := range got {
			seen[g.Message.Key] = g.Attempt
			if m, ok := byKey[g.Message.Key]; ok && (g.Visible.Visible < m.Due || string(g.Message.Body) != m.Body) {
				t.Errorf("%s: %s visible at %d, due %d, body %q", step, g.Message.Key, g.Visible.Visible, m.Due, g.Message.Body)
			}
			if err := e.Ack(ctx, "orders", man.Group, g.Receipt); err != nil {
				t.Fatalf("%s: ack %s: %v", step, g.Message.Key, err)
			}
		}
		if len(seen) != len(want) || len(got) != len(want) {
			t.Fatalf("%s: received %v, want %v", step, seen, want)
		}
		for k, a := range want {
			if seen[k] != a {
				t.Fatalf("%s: received %v, want %v (key: attempt)", step, seen, want)
			}
		}
	}
	advance := func(d time.Duration) {
		waitParked(e, clk)
		clk.Advance(d)
	}

	// Leases are not durable: the one in flight is handed out again at
	// once with its attempt raised; the acked one never comes back.
	receive("at open", map[string]int{"seen-leased": 2, "unseen": 1})
	receive("again at open", map[string]int{})
	advance(time.Hour)
	receive("after 1h", map[string]int{"order-1": 1}) // not order-4 (cancelled) nor order-5 (moved)
	advance(2 * time.Hour)
	receive("after 3h", map[string]int{"order-2": 1, "order-5": 1})
	advance(30 * 24 * time.Hour)
	receive("after 30 days", map[string]int{"order-3": 1})
	if info, err := e.InspectKey("orders", "order-4"); err != nil || info.State != StateCancelled {
		t.Fatalf("order-4 after 30 days: %+v %v, want still cancelled", info, err)
	}

	// New sends go on after the fixture's log, with IDs of their own.
	r, err := e.Send(ctx, message.Message{Topic: "orders", Key: "after-upgrade", Body: []byte("new")}, message.When{})
	if err != nil {
		t.Fatal(err)
	}
	if r.ID.Pos <= lastPos || slices.ContainsFunc(man.Messages, func(m fixtureMessage) bool { return m.ID == r.ID.String() }) {
		t.Fatalf("send after open: ID %s at %d, not after the fixture's last message at %d", r.ID, r.ID.Pos, lastPos)
	}
	receive("a send after open", map[string]int{"after-upgrade": 1})
}

// readFixtureManifest reads the fixture's manifest and checks that it
// describes a format-2 directory with its 8 messages.
func readFixtureManifest(t *testing.T) fixtureManifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var man fixtureManifest
	if err := json.Unmarshal(b, &man); err != nil {
		t.Fatal(err)
	}
	if man.Format != 2 || len(man.Messages) != 8 {
		t.Fatalf("manifest: format %d with %d messages", man.Format, len(man.Messages))
	}
	return man
}

// checkFixtureMessages checks every message of the manifest by ID and by
// key in the opened fixture, and order-2's properties. It returns the
// messages by key and the last message's log position.
func checkFixtureMessages(t *testing.T, e *Engine, man fixtureManifest) (byKey map[string]fixtureMessage, lastPos uint64) {
	t.Helper()
	byKey = map[string]fixtureMessage{}
	for _, m := range man.Messages {
		byKey[m.Key] = m
		id, err := message.ParseID(m.ID)
		if err != nil {
			t.Fatalf("%s: %v", m.Key, err)
		}
		lastPos = max(lastPos, id.Pos)
		info, err := e.Inspect(id)
		if err != nil {
			t.Fatalf("%s (%s): inspect: %v", m.Key, m.Role, err)
		}
		if info.State != m.State || info.Due != m.Due || info.Topic != m.Topic || info.Key != m.Key || info.BodyBytes != len(m.Body) {
			t.Errorf("%s (%s): %+v, want state %s, due %d, %d body bytes", m.Key, m.Role, info, m.State, m.Due, len(m.Body))
		}
		if byK, err := e.InspectKey(m.Topic, m.Key); err != nil || byK.ID != id {
			t.Errorf("%s: by key %+v %v, want ID %s", m.Key, byK.ID, err, m.ID)
		}
	}
	if info, _ := e.InspectKey("orders", "order-2"); info.Properties["customer"] != "c-42" {
		t.Errorf("order-2 lost its properties: %v", info.Properties)
	}
	return byKey, lastPos
}

// TestFormat1Refused: a directory of format 1 (an INCARNATION file, no
// IDENTITY) is refused at open with the documented advice, every time.
func TestFormat1Refused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "INCARNATION"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(fixtureOptions(dir, clock.NewFake(fixtureTime)))
	if !errors.Is(err, ErrOldFormat) {
		t.Fatalf("open of a format-1 directory: %v, want ErrOldFormat", err)
	}
	for _, want := range []string{"format 1", "let the old version deliver what is pending, then start on an empty directory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// Refusing must not turn it into a new directory: a second start
	// would then open it as an empty format-2 directory.
	if _, err := os.Stat(filepath.Join(dir, identityFile)); !os.IsNotExist(err) {
		t.Errorf("the refused directory got an %s file: %v", identityFile, err)
	}
	if _, err := Open(fixtureOptions(dir, clock.NewFake(fixtureTime))); !errors.Is(err, ErrOldFormat) {
		t.Errorf("second open of a format-1 directory: %v, want ErrOldFormat", err)
	}
}

// TestNewerFormatRefused: a directory of a format newer than this binary's
// (after a downgrade) is refused with the advice to run the version that
// wrote it, not read as if it were this format.
func TestNewerFormatRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(fixtureDir, "data"))); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, identityFile))
	if err != nil {
		t.Fatal(err)
	}
	id, err := decodeIdentity(b)
	if err != nil {
		t.Fatal(err)
	}
	id.format = DataFormat + 1
	if err := os.WriteFile(filepath.Join(dir, identityFile), encodeIdentity(id), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(fixtureOptions(dir, clock.NewFake(fixtureTime)))
	if !errors.Is(err, ErrOldFormat) || !strings.Contains(err.Error(), "run the hourglass version that wrote it") {
		t.Fatalf("open of a format-%d directory: %v", DataFormat+1, err)
	}
}
