package engine

import (
	"errors"
	"fmt"
	"path"
	"syscall"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/sortedrun"
	"github.com/hourglass-mq/hourglass/timerstore"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestTimerDamageWithAFailedMarkIsRebuilt: as
// TestTimerDamageFoundAfterOpenIsRebuilt, on a disk too full for the
// damage mark. The count after Open finds the damage and stops the
// engine; the next start must not open the damaged run from its tail
// again (and stop again, at every start): it rebuilds the index from the
// log, with every message.
func TestTimerDamageWithAFailedMarkIsRebuilt(t *testing.T) {
	mem := vfs.NewMem()
	ff := vfs.NewFaulty(mem)
	h := newHarness(t, func(o *Options) { o.FS = ff })
	const n = 700 // five blocks of 170 timers
	for i := range n {
		h.send("t", fmt.Sprintf("k%d", i), message.When{Delay: time.Hour + time.Duration(i)*time.Second})
	}
	h.restart()
	h.e.Close()
	damageTheRun(t, mem, "data/timers", 2*4096+100) // block 2 of 5
	refuseDamageMarks(ff)
	h.open()
	select {
	case <-h.e.Failed():
	case <-time.After(time.Minute):
		t.Fatal("the count after Open did not find the damage")
	}
	if !errors.Is(h.e.Err(), timerstore.ErrCorrupt) {
		t.Fatalf("stopped by %v, want the timer index's damage", h.e.Err())
	}
	h.e.Close()
	h.open()
	if n := h.e.Stats().CacheRebuilds.Load(); n != 1 {
		t.Fatalf("%d rebuilds at the start after the damage was found, want 1", n)
	}
	select {
	case <-h.e.Failed():
		t.Fatalf("the start after the rebuild stopped: %v", h.e.Err())
	default:
	}
	if total := sum(h.forecastCounts("", 120)); total != n || h.e.Stats().Pending.Load() != n {
		t.Fatalf("after the rebuild: forecast %d, pending %d, want %d", total, h.e.Stats().Pending.Load(), n)
	}
}

// TestKeyIndexDamageWithAFailedMarkIsRebuilt: as
// TestKeyIndexDamageFoundByScrubIsRebuilt, on a disk too full for the
// damage mark: the next start still rebuilds the key index from the log
// rather than trust the damaged run's tail again.
func TestKeyIndexDamageWithAFailedMarkIsRebuilt(t *testing.T) {
	mem := vfs.NewMem()
	ff := vfs.NewFaulty(mem)
	h := newHarness(t, func(o *Options) { o.FS = ff })
	var ids []message.ID
	for i := range 900 { // four blocks of 255 keys
		ids = append(ids, h.send("t", fmt.Sprintf("k%d", i), message.When{Delay: time.Hour}).ID)
	}
	h.restart()
	h.e.Close()
	damageTheRun(t, mem, "data/keys", 4096+40) // block 1 of 4
	refuseDamageMarks(ff)
	h.open()
	if err := h.e.ScrubNow(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.restart()
	if n := h.e.Stats().CacheRebuilds.Load(); n != 1 {
		t.Fatalf("%d rebuilds after the scrub found damage, want 1", n)
	}
	for i, id := range ids {
		if got, err := h.e.LookupKey("t", fmt.Sprintf("k%d", i)); err != nil || got != id {
			t.Fatalf("key k%d: %v %v, want %v", i, got, err, id)
		}
	}
}

// TestTimerDamageMetByALoadIsRebuilt: the forecast's count after Open has
// not reached the damaged run yet (held here; at 10 M pending it reads for
// seconds) when the dispatcher loads a bucket whose block is damaged: the
// load stops the engine, and the next start must rebuild the index from
// the log rather than open the run from its tail again and stop again at
// the same load, at every start. After the rebuild every message fires.
func TestTimerDamageMetByALoadIsRebuilt(t *testing.T) {
	h := newHarness(t, nil)
	const n = 700 // five blocks of 170 timers
	for i := range n {
		h.send("t", fmt.Sprintf("k%d", i), message.When{Delay: time.Hour + time.Duration(i)*time.Second})
	}
	h.restart()
	h.e.Close()
	damageTheRun(t, h.fs, "data/timers", 2*4096+100) // block 2 of 5: timers 340 to 509
	gate := make(chan struct{})
	defer close(gate)
	h.opt.recountGate = gate
	h.open()
	h.clk.Advance(time.Hour + 600*time.Second)
	select {
	case <-h.e.Failed():
	case <-time.After(time.Minute):
		t.Fatal("the bucket load did not meet the damage")
	}
	if !errors.Is(h.e.Err(), timerstore.ErrCorrupt) {
		t.Fatalf("stopped by %v, want the timer index's damage", h.e.Err())
	}
	h.e.Close()
	h.open()
	if n := h.e.Stats().CacheRebuilds.Load(); n != 1 {
		t.Fatalf("%d rebuilds at the start after a load met damage, want 1", n)
	}
	h.clk.Advance(100 * time.Second) // past the last, due at 1h+699s
	h.waitVisible("t", n)
	select {
	case <-h.e.Failed():
		t.Fatalf("the start after the rebuild stopped: %v", h.e.Err())
	default:
	}
}

// damageTheRun writes two bytes at off of the one run file of dir.
func damageTheRun(t *testing.T, mem *vfs.Mem, dir string, off int64) {
	t.Helper()
	names, err := mem.List(dir)
	if err != nil || len(names) != 1 {
		t.Fatalf("runs of %s: %v (%v): the test needs one", dir, names, err)
	}
	f, err := mem.Open(dir + "/" + names[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{0xde, 0xad}, off); err != nil {
		t.Fatal(err)
	}
}

// refuseDamageMarks makes ff refuse to create a damage mark, as a full
// disk does.
func refuseDamageMarks(ff *vfs.Faulty) {
	ff.Inject(func(op vfs.Op, name string) error {
		if op == vfs.OpCreate && path.Base(name) == sortedrun.DamageMark {
			return syscall.ENOSPC
		}
		return nil
	})
}
