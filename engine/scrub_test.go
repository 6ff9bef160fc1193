package engine

import (
	"context"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/hourglass-mq/hourglass/commitlog"
)

// TestScrubFindsDamageBeforeAConsumer: the scrub finds 4 bytes overwritten
// in a sealed segment while no consumer has read it, and the damage report,
// Degraded (what /healthz says) and the scrub's counts show it, naming the
// segment and position. After repair, a pass finds nothing.
func TestScrubFindsDamageBeforeAConsumer(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.SegmentBytes = 4096; o.ScrubRate = 1 << 40 })
	h.sendVisible("t", 200)
	if err := h.e.Close(); err != nil {
		t.Fatal(err)
	}
	pos, seg := h.damageRecord(10, 40)
	h.open()
	if d := h.e.Damage(); d.Damaged() {
		t.Fatalf("damage known before any scrub or read: %+v", d)
	}
	if err := h.e.ScrubNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := h.e.Damage()
	if len(d.Ranges) != 1 || d.Ranges[0].Pos != commitlog.Pos(pos) || d.Ranges[0].Segment != seg || d.SetAsideTotal != 0 {
		t.Fatalf("damage after a scrub: %+v, want a range at %d in %s", d, pos, seg)
	}
	deg := h.e.Degraded()
	if len(deg) != 1 || !strings.Contains(deg[0], seg) || !strings.Contains(deg[0], fmt.Sprintf("at position %d", pos)) {
		t.Fatalf("degraded: %q", deg)
	}
	st := h.e.Scrub()
	if st.Passes != 1 || st.LastPass != h.e.Now() || st.Bytes < 4096 || !st.Enabled {
		t.Fatalf("scrub status %+v", st)
	}
	if err := h.e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := commitlog.Repair(commitlog.Options{FS: h.fs, Dir: path.Join(h.opt.Dir, "log")}, commitlog.RepairSalvage); err != nil {
		t.Fatal(err)
	}
	h.open()
	if err := h.e.ScrubNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := h.e.Damage(); d.Damaged() || len(h.e.Degraded()) != 0 {
		t.Fatalf("after repair: %+v %q", d, h.e.Degraded())
	}
}

// TestScrubPace: a pass reads no faster than its rate (the first read is
// not held): 5 reads of 256 KiB at 10 MiB/s take at least 100 ms.
func TestScrubPace(t *testing.T) {
	p := pacer{rate: 10 << 20, start: time.Now(), ctx: context.Background(), done: make(chan struct{})}
	for range 5 {
		if err := p.pace(256 << 10); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(p.start); d < 100*time.Millisecond {
		t.Fatalf("1 MiB past the first read at 10 MiB/s took %v", d)
	}
	done := make(chan struct{})
	close(done)
	q := pacer{rate: 1, start: time.Now(), read: 1 << 20, ctx: context.Background(), done: done}
	if err := q.pace(1); err != errScrubStopped {
		t.Fatalf("a pace on a closing engine: %v", err)
	}
}
