package engine

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/timerstore"
	"github.com/hourglass-mq/hourglass/vfs"
)

// damageTimers removes or corrupts every timer bucket file of a closed
// engine's directory.
func damageTimers(t *testing.T, fs vfs.FS, dir string, remove bool) int {
	t.Helper()
	names, err := fs.List(path.Join(dir, "timers"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range names {
		p := path.Join(dir, "timers", name)
		if remove {
			if err := fs.Remove(p); err != nil {
				t.Fatal(err)
			}
		} else {
			f, err := fs.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte{0xff, 0xee}, 3); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		n++
	}
	return n
}

// TestDamagedTimerBucketsAreRebuilt: a missing or corrupt timer bucket
// used to be accepted silently, and its messages never fired while Inspect
// said they were visible. Recovery now checks every bucket against the
// checkpoint and rebuilds the index from the log.
func TestDamagedTimerBucketsAreRebuilt(t *testing.T) {
	for _, remove := range []bool{true, false} {
		h := newHarness(t, nil)
		far := h.send("t", "far", message.When{Delay: 30 * time.Minute})
		farther := h.send("t", "farther", message.When{Delay: 3 * time.Hour})
		cancelled := h.send("t", "c", message.When{Delay: 2 * time.Hour})
		if err := h.e.Cancel(t.Context(), cancelled.ID); err != nil {
			t.Fatal(err)
		}
		moved := h.send("t", "m", message.When{Delay: 4 * time.Hour})
		if _, err := h.e.Reschedule(t.Context(), moved.ID, message.When{Delay: time.Hour}, 0); err != nil {
			t.Fatal(err)
		}
		h.e.Close()
		if n := damageTimers(t, h.fs, "data", remove); n == 0 {
			t.Fatal("no timer bucket files: the test proves nothing")
		}
		h.open()
		if n := h.e.Stats().CacheRebuilds.Load(); n != 1 {
			t.Fatalf("remove=%v: %d rebuilds, want 1", remove, n)
		}
		for _, r := range []Receipt{far, farther, moved} {
			if info, err := h.e.Inspect(r.ID); err != nil || info.State != StatePending {
				t.Fatalf("remove=%v: %+v %v, want pending", remove, info, err)
			}
		}
		waitParked(h.e, h.clk)
		h.clk.Advance(5 * time.Hour)
		vs := h.settle("t", 3)
		got := map[message.ID]bool{}
		for _, v := range vs {
			got[v.ID] = true
		}
		if len(vs) != 3 || !got[far.ID] || !got[farther.ID] || !got[moved.ID] {
			t.Fatalf("remove=%v: visible %v, want far, farther and the rescheduled one", remove, vs)
		}
		h.e.Close()
		h.e = nil
	}
}

// TestTimerRebuildSpills: recovery writes the timers it rebuilds out as
// runs as it goes, rather than holding every retained message's timer in
// memory until the first checkpoint; nothing is lost by it, and the first
// checkpoint lists the runs (a restart after it rebuilds nothing).
func TestTimerRebuildSpills(t *testing.T) {
	old := timerSpillBytes
	timerSpillBytes = 50 * timerstore.EntrySize
	defer func() { timerSpillBytes = old }()
	h := newHarness(t, nil)
	const n = 400
	for i := range n {
		h.send("t", fmt.Sprint("k", i), message.When{Delay: time.Hour + time.Duration(i)*time.Minute})
	}
	h.e.Close()
	damageTimers(t, h.fs, "data", true)
	h.open()
	if got := h.e.Stats().CacheRebuilds.Load(); got != 1 {
		t.Fatalf("%d rebuilds, want 1", got)
	}
	h.e.mu.Lock()
	runs, buffered := h.e.disp.store().Runs(), h.e.disp.store().Buffered()
	h.e.mu.Unlock()
	if runs == 0 || buffered >= timerSpillBytes {
		t.Fatalf("after the rebuild: %d runs, %d bytes in memory; want runs and less than %d", runs, buffered, timerSpillBytes)
	}
	// The runs the spills merged away are gone already: no durable
	// checkpoint lists them.
	if files, err := h.fs.List("data/timers"); err != nil || len(files) != runs {
		t.Fatalf("after the rebuild: %d files for %d runs (%v)", len(files), runs, err)
	}
	if err := h.e.checkpoint(); err != nil {
		t.Fatal(err)
	}
	h.e.Close()
	h.open()
	if got := h.e.Stats().CacheRebuilds.Load(); got != 0 {
		t.Fatalf("a restart after the first checkpoint rebuilt the timers again (%d)", got)
	}
	waitParked(h.e, h.clk)
	h.clk.Advance(time.Hour + n*time.Minute)
	if vs := h.settle("t", n); len(vs) != n {
		t.Fatalf("%d visible, want %d", len(vs), n)
	}
}

// TestTimerSpillFailureKeepsRecovering: a recovery that cannot write its
// timers out (a full disk) still starts, with the timers in memory, and
// delivers every message; the first checkpoint with room writes them.
func TestTimerSpillFailureKeepsRecovering(t *testing.T) {
	old := timerSpillBytes
	timerSpillBytes = 50 * timerstore.EntrySize
	defer func() { timerSpillBytes = old }()
	ffs := vfs.NewFaulty(vfs.NewMem())
	h := newHarness(t, func(o *Options) { o.FS = ffs })
	const n = 300
	for i := range n {
		h.send("t", fmt.Sprint("k", i), message.When{Delay: time.Hour + time.Duration(i)*time.Minute})
	}
	h.e.Close()
	damageTimers(t, ffs, "data", true)
	full := errors.New("injected: no space") // wraps nothing: a failure the spill cannot tell from any other
	ffs.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpCreate && strings.HasPrefix(name, "data/timers/") {
			return full
		}
		return nil
	})
	h.open()
	if files, err := ffs.List("data/timers"); err != nil || len(files) != 0 {
		t.Fatalf("files after a recovery whose spills all failed: %v %v", files, err)
	}
	ffs.Inject(nil)
	if err := h.e.checkpoint(); err != nil {
		t.Fatal(err)
	}
	h.restart()
	waitParked(h.e, h.clk)
	h.clk.Advance(time.Hour + n*time.Minute)
	if vs := h.settle("t", n); len(vs) != n {
		t.Fatalf("%d visible, want %d", len(vs), n)
	}
}

// TestDamagedKeyIndexIsRebuilt: keys.idx had no checksum and was trusted
// blindly. A damaged key index run is now detected and rebuilt from the log.
func TestDamagedKeyIndexIsRebuilt(t *testing.T) {
	h := newHarness(t, nil)
	var rs []Receipt
	for _, k := range []string{"a", "b", "c"} {
		rs = append(rs, h.send("t", k, message.When{Delay: time.Hour}))
	}
	h.e.Close()
	names, err := h.fs.List("data/keys")
	if err != nil || len(names) == 0 {
		t.Fatalf("no key index runs (%v): the test proves nothing", err)
	}
	f, err := h.fs.Open("data/keys/" + names[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 24), 24); err != nil { // zero an entry
		t.Fatal(err)
	}
	f.Close()
	h.open()
	if n := h.e.Stats().CacheRebuilds.Load(); n != 1 {
		t.Fatalf("%d rebuilds, want 1", n)
	}
	for i, k := range []string{"a", "b", "c"} {
		if id, err := h.e.LookupKey("t", k); err != nil || id != rs[i].ID {
			t.Fatalf("key %s: %v %v, want %v", k, id, err, rs[i].ID)
		}
	}
}

// TestKeyIndexDamageFoundByScrubIsRebuilt: recovery opens key runs from
// their tails and reads only their first and last blocks, so damage in a
// middle block is not seen at Open. The scrub checks the rest; what it
// finds makes the next start rebuild the index from the log, and every
// key then answers its message.
func TestKeyIndexDamageFoundByScrubIsRebuilt(t *testing.T) {
	h := newHarness(t, nil)
	var keys []string
	var ids []message.ID
	for i := range 900 { // four blocks of 255 keys
		k := fmt.Sprintf("k%d", i)
		keys = append(keys, k)
		ids = append(ids, h.send("t", k, message.When{Delay: time.Hour}).ID)
	}
	h.restart()
	names, err := h.fs.List("data/keys")
	if err != nil || len(names) != 1 {
		t.Fatalf("key index runs %v (%v): the test needs one", names, err)
	}
	h.e.Close()
	f, err := h.fs.Open("data/keys/" + names[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xde, 0xad}, 4096+40); err != nil { // block 1 of 4
		t.Fatal(err)
	}
	f.Close()
	h.open()
	if n := h.e.Stats().CacheRebuilds.Load(); n != 0 {
		t.Fatalf("%d rebuilds at Open: the damage is in a block Open does not read", n)
	}
	if err := h.e.ScrubNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.restart()
	if n := h.e.Stats().CacheRebuilds.Load(); n != 1 {
		t.Fatalf("%d rebuilds after the scrub found damage, want 1", n)
	}
	for i, k := range keys {
		if id, err := h.e.LookupKey("t", k); err != nil || id != ids[i] {
			t.Fatalf("key %s: %v %v, want %v", k, id, err, ids[i])
		}
	}
	h.restart()
	if n := h.e.Stats().CacheRebuilds.Load(); n != 0 {
		t.Fatalf("%d rebuilds at the start after the rebuild, want 0", n)
	}
}

// TestTimerDamageFoundAfterOpenIsRebuilt: Open opens timer runs from their
// tails and reads two blocks of each; the forecast's count, after Open,
// reads them whole and finds damage in another block: the engine stops,
// as a bucket load that meets damage stops it, and the next start
// rebuilds the index from the log, with every message and the forecast
// whole.
func TestTimerDamageFoundAfterOpenIsRebuilt(t *testing.T) {
	h := newHarness(t, nil)
	const n = 700 // five blocks of 170 timers
	for i := range n {
		h.send("t", fmt.Sprintf("k%d", i), message.When{Delay: time.Hour + time.Duration(i)*time.Second})
	}
	h.restart()
	names, err := h.fs.List("data/timers")
	if err != nil || len(names) != 1 {
		t.Fatalf("timer runs %v (%v): the test needs one", names, err)
	}
	if total := sum(h.forecastCounts("", 120)); total != n {
		t.Fatalf("forecast after a clean restart counts %d, want %d", total, n)
	}
	h.e.Close()
	f, err := h.fs.Open("data/timers/" + names[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xde, 0xad}, 2*4096+100); err != nil { // block 2 of 5
		t.Fatal(err)
	}
	f.Close()
	h.open()
	if n := h.e.Stats().CacheRebuilds.Load(); n != 0 {
		t.Fatalf("%d rebuilds at Open: the damage is in a block Open does not read", n)
	}
	select {
	case <-h.e.Failed():
	case <-time.After(time.Minute):
		t.Fatal("the count after Open did not find the damage")
	}
	if !errors.Is(h.e.Err(), timerstore.ErrCorrupt) {
		t.Fatalf("stopped by %v, want the timer index's damage", h.e.Err())
	}
	if _, err := h.e.Forecast("", 0, 60_000, time.Minute); err == nil {
		t.Fatal("a forecast from counts the damage cut short")
	}
	h.e.Close()
	h.open()
	if n := h.e.Stats().CacheRebuilds.Load(); n != 1 {
		t.Fatalf("%d rebuilds after the damage was found, want 1", n)
	}
	if total := sum(h.forecastCounts("", 120)); total != n || h.e.Stats().Pending.Load() != n {
		t.Fatalf("after the rebuild: forecast %d, pending %d, want %d", total, h.e.Stats().Pending.Load(), n)
	}
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}
