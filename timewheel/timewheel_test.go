package timewheel

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// collect returns a fire callback that appends to *got.
func collect(got *[]int) func(*Timer[int]) {
	return func(tm *Timer[int]) { *got = append(*got, tm.Value) }
}

// TestFiresOnTime steps a fake clock by random increments over random
// deadlines spanning four levels and checks that every timer fires exactly
// once, at the first Advance whose now has reached its deadline rounded up
// to a tick.
func TestFiresOnTime(t *testing.T) {
	for _, tc := range []struct {
		tick  int64
		slots int
	}{{1, 64}, {1, 8}, {10, 16}, {7, 3}} {
		r := rand.New(rand.NewPCG(uint64(tc.tick), uint64(tc.slots)))
		start := int64(1_700_000_000_000)
		w := New[int](tc.tick, tc.slots, start)
		// Twice the reach of three levels: some timers need a fourth.
		span := 2 * int64(tc.slots) * int64(tc.slots) * int64(tc.slots) * tc.tick
		timers := make([]Timer[int], 5000)
		for i := range timers {
			timers[i].Value = i
			w.Add(&timers[i], start+1+r.Int64N(span))
		}
		firedAt := make([]int64, len(timers))
		prev, now := start, start
		for w.Len() > 0 {
			now += 1 + r.Int64N(3*tc.tick)
			w.Advance(now, func(tm *Timer[int]) {
				if firedAt[tm.Value] != 0 {
					t.Fatalf("timer %d fired twice", tm.Value)
				}
				firedAt[tm.Value] = now
				due := ceilDiv(tm.Deadline(), tc.tick) * tc.tick
				if due > now || due <= prev {
					t.Fatalf("tick %d: timer with deadline %d (due %d) fired at Advance(%d), previous Advance(%d)",
						tc.tick, tm.Deadline(), due, now, prev)
				}
			})
			prev = now
		}
		for i, at := range firedAt {
			if at == 0 {
				t.Fatalf("timer %d never fired", i)
			}
		}
		if len(w.levels) < 4 {
			t.Fatalf("slots %d: only %d levels used; the test should span four", tc.slots, len(w.levels))
		}
	}
}

func TestFireOrderByTick(t *testing.T) {
	w := New[int](1, 4, 0)
	r := rand.New(rand.NewPCG(3, 3))
	timers := make([]Timer[int], 2000)
	for i := range timers {
		timers[i].Value = i
		w.Add(&timers[i], 1+r.Int64N(100_000))
	}
	last := int64(math.MinInt64)
	w.Advance(100_000, func(tm *Timer[int]) {
		if tm.Deadline() < last {
			t.Fatalf("deadline %d fired after %d", tm.Deadline(), last)
		}
		last = tm.Deadline()
	})
	if w.Len() != 0 || last == math.MinInt64 {
		t.Fatalf("Len %d after advancing past every deadline, last fired %d", w.Len(), last)
	}
}

func TestPastDeadlineFiresAtNextAdvance(t *testing.T) {
	w := New[int](10, 8, 1000)
	var a, b, c, d Timer[int]
	a.Value, b.Value, c.Value, d.Value = 1, 2, 3, 4
	w.Add(&a, 1000)          // exactly now
	w.Add(&b, 995)           // before now, in the current tick
	w.Add(&c, math.MinInt64) // long ago
	w.Add(&d, 1001)          // after now: rounds up to 1010
	if next, ok := w.NextDeadline(); !ok || next != 1000 {
		t.Fatalf("NextDeadline = %d, %v; want the clock 1000 while timers are due", next, ok)
	}
	var got []int
	w.Advance(1000, collect(&got)) // the clock does not even move
	if len(got) != 3 || w.Len() != 1 {
		t.Fatalf("fired %v, Len %d; want the three past-due timers", got, w.Len())
	}
	got = got[:0]
	w.Advance(1009, collect(&got))
	if len(got) != 0 {
		t.Fatalf("fired %v at 1009, before the tick boundary 1010", got)
	}
	w.Advance(1010, collect(&got))
	if len(got) != 1 || got[0] != 4 {
		t.Fatalf("fired %v at 1010, want [4]", got)
	}
}

func TestBackwardAdvanceKeepsClock(t *testing.T) {
	w := New[int](1, 8, 100)
	var a, b Timer[int]
	w.Add(&a, 150)
	var got []int
	w.Advance(50, collect(&got))
	if w.Now() != 100 || len(got) != 0 {
		t.Fatalf("after Advance(50): Now %d, fired %v", w.Now(), got)
	}
	w.Add(&b, 90) // past due relative to the clock, which stayed at 100
	w.Advance(60, collect(&got))
	if len(got) != 1 || !a.Scheduled() {
		t.Fatalf("after Advance(60): fired %v, a scheduled %v", got, a.Scheduled())
	}
}

func TestCancel(t *testing.T) {
	w := New[int](1, 16, 0)
	timers := make([]Timer[int], 1000)
	for i := range timers {
		timers[i].Value = i
		w.Add(&timers[i], int64(1+i*37))
	}
	for i := 0; i < len(timers); i += 3 {
		if !w.Cancel(&timers[i]) {
			t.Fatalf("Cancel(%d) = false for a scheduled timer", i)
		}
		if w.Cancel(&timers[i]) {
			t.Fatalf("second Cancel(%d) = true", i)
		}
	}
	var got []int
	w.Advance(math.MaxInt64, collect(&got))
	if len(got) != len(timers)-(len(timers)+2)/3 {
		t.Fatalf("%d fired, want %d", len(got), len(timers)-(len(timers)+2)/3)
	}
	for _, id := range got {
		if id%3 == 0 {
			t.Fatalf("cancelled timer %d fired", id)
		}
	}
	if next, ok := w.NextDeadline(); ok {
		t.Fatalf("NextDeadline = %d, true on an empty wheel", next)
	}
}

// TestCancelFromFire cancels, from a fire callback, a timer that is due in
// the same batch and one that is due later in the same Advance.
func TestCancelFromFire(t *testing.T) {
	w := New[int](1, 4, 0)
	timers := make([]Timer[int], 3)
	for i := range timers {
		timers[i].Value = i
	}
	w.Add(&timers[0], 5)
	w.Add(&timers[1], 5)
	w.Add(&timers[2], 50)
	var got []int
	w.Advance(100, func(tm *Timer[int]) {
		got = append(got, tm.Value)
		other := &timers[1-tm.Value]
		if !w.Cancel(other) || !w.Cancel(&timers[2]) {
			t.Fatalf("Cancel from fire of %d reported not scheduled", tm.Value)
		}
	})
	if len(got) != 1 || w.Len() != 0 {
		t.Fatalf("fired %v, Len %d; want exactly one of the pair", got, w.Len())
	}
}

// TestReAddFromFire runs a periodic timer that reschedules itself from its
// own fire callback, and a callback that adds a timer in the past.
func TestReAddFromFire(t *testing.T) {
	w := New[int](1, 8, 0)
	var periodic, late Timer[int]
	const period = 300 // crosses levels with 8 slots
	var firedAt []int64
	var now int64
	fire := func(tm *Timer[int]) {
		if tm == &periodic {
			firedAt = append(firedAt, now)
			w.Add(tm, tm.Deadline()+period)
			if len(firedAt) == 2 {
				w.Add(&late, tm.Deadline()-1)
			}
		}
	}
	w.Add(&periodic, period)
	for now = 1; now <= 10*period; now++ {
		w.Advance(now, fire)
		if len(firedAt) == 2 && now == 2*period && !late.Scheduled() {
			t.Fatal("timer added in the past from fire was fired in the same Advance")
		}
	}
	for i, at := range firedAt {
		if at != int64(i+1)*period {
			t.Fatalf("firing %d at %d, want %d", i, at, int64(i+1)*period)
		}
	}
	if len(firedAt) != 10 || late.Scheduled() {
		t.Fatalf("periodic fired %d times, late still scheduled %v", len(firedAt), late.Scheduled())
	}
}

// TestLongIdleJump puts a few timers up to 400 days out at 1 ms ticks and
// checks that jumping there costs a handful of bucket visits, not one per
// tick, both when the owner sleeps on NextDeadline and in one big Advance.
func TestLongIdleJump(t *testing.T) {
	const day = 24 * 3600 * 1000
	start := int64(1_700_000_000_000)
	deadlines := []int64{start + 400*day, start + 17*day + 5, start + 3*day + 1, start + 1}
	for _, sleep := range []bool{true, false} {
		w := New[int](1, 512, start)
		timers := make([]Timer[int], len(deadlines))
		for i, d := range deadlines {
			timers[i].Value = i
			w.Add(&timers[i], d)
		}
		var firedAt []int64
		wakeups := 0
		if sleep {
			for {
				next, ok := w.NextDeadline()
				if !ok {
					break
				}
				wakeups++
				w.Advance(next, func(tm *Timer[int]) {
					if next != tm.Deadline() {
						t.Fatalf("timer due %d fired at %d", tm.Deadline(), next)
					}
					firedAt = append(firedAt, next)
				})
			}
			// Each timer moves down at most once per level.
			if limit := len(deadlines) * len(w.levels); wakeups > limit {
				t.Fatalf("%d wake-ups for %d timers on %d levels", wakeups, len(deadlines), len(w.levels))
			}
		} else {
			w.Advance(start+500*day, func(tm *Timer[int]) { firedAt = append(firedAt, tm.Deadline()) })
		}
		if len(firedAt) != len(deadlines) {
			t.Fatalf("sleep=%v: fired %v", sleep, firedAt)
		}
		for i := range firedAt {
			if firedAt[i] != deadlines[len(deadlines)-1-i] {
				t.Fatalf("sleep=%v: fired %v, want deadlines in order", sleep, firedAt)
			}
		}
	}
}

// TestExtremeTimes uses clocks and deadlines at both ends of int64.
func TestExtremeTimes(t *testing.T) {
	for _, tick := range []int64{1, 7, math.MaxInt64} {
		w := New[int](tick, 2, math.MinInt64)
		var far, near Timer[int]
		w.Add(&far, math.MaxInt64)
		w.Add(&near, math.MinInt64+1)
		next, ok := w.NextDeadline()
		if !ok || next > math.MinInt64+tick {
			t.Fatalf("tick %d: NextDeadline = %d, %v", tick, next, ok)
		}
		var got []*Timer[int]
		fire := func(tm *Timer[int]) { got = append(got, tm) }
		w.Advance(math.MaxInt64-1, fire)
		if len(got) != 1 || got[0] != &near || !far.Scheduled() {
			t.Fatalf("tick %d: Advance(MaxInt64-1) fired %d timers, far scheduled %v", tick, len(got), far.Scheduled())
		}
		w.Advance(math.MaxInt64, fire)
		if len(got) != 2 || got[1] != &far || w.Len() != 0 {
			t.Fatalf("tick %d: Advance(MaxInt64) fired %d timers, Len %d", tick, len(got), w.Len())
		}
	}
}

// TestFirePanic checks that a panicking callback leaves the wheel usable
// and the rest of the due timers fire at the next Advance.
func TestFirePanic(t *testing.T) {
	w := New[int](1, 8, 0)
	timers := make([]Timer[int], 10)
	for i := range timers {
		timers[i].Value = i
		w.Add(&timers[i], 5)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic in fire was not propagated")
			}
		}()
		w.Advance(5, func(*Timer[int]) { panic("boom") })
	}()
	if w.Len() != 9 || w.Now() != 5 {
		t.Fatalf("Len %d, Now %d after one timer fired and panicked, want 9, 5", w.Len(), w.Now())
	}
	var later Timer[int]
	later.Value = 100
	w.Add(&later, 6)
	var got []int
	w.Advance(5, collect(&got))
	if len(got) != 9 || w.Len() != 1 {
		t.Fatalf("after recovery fired %v, Len %d; want the 9 left, not the one due at 6", got, w.Len())
	}
	checkInvariants(t, w)
}

func expectPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if s, _ := r.(string); !strings.Contains(s, want) {
			t.Fatalf("panic %v, want one mentioning %q", r, want)
		}
	}()
	f()
}

func TestMisusePanics(t *testing.T) {
	expectPanic(t, "tick", func() { New[int](0, 8, 0) })
	expectPanic(t, "slots", func() { New[int](1, 1, 0) })

	w, other := New[int](1, 8, 0), New[int](1, 8, 0)
	var tm Timer[int]
	w.Add(&tm, 10)
	expectPanic(t, "already scheduled", func() { w.Add(&tm, 20) })
	expectPanic(t, "already scheduled", func() { other.Add(&tm, 20) })
	expectPanic(t, "another wheel", func() { other.Cancel(&tm) })
	if !tm.Scheduled() || tm.Deadline() != 10 || w.Len() != 1 || other.Len() != 0 {
		t.Fatalf("misuse changed state: scheduled %v deadline %d lens %d %d",
			tm.Scheduled(), tm.Deadline(), w.Len(), other.Len())
	}
	expectPanic(t, "inside a fire callback", func() {
		w.Advance(10, func(*Timer[int]) { w.Advance(11, func(*Timer[int]) {}) })
	})
	// The outer Advance unwound; the wheel must still accept calls.
	w.Add(&tm, 30)
	var got []int
	w.Advance(30, collect(&got))
	if len(got) != 1 {
		t.Fatalf("after the re-entrancy panic fired %v", got)
	}
}

// TestNoAllocs checks that adding, cancelling and firing pre-allocated
// timers allocates nothing once the wheel's levels and queue have grown,
// whether the owner advances with Advance or with chains of AdvanceN.
func TestNoAllocs(t *testing.T) {
	chain := func(w *Wheel[int], now int64, fire func(*Timer[int])) {
		for _, more := w.AdvanceN(now, 100, fire); more; _, more = w.AdvanceN(now, 100, fire) {
		}
	}
	for name, advance := range map[string]func(*Wheel[int], int64, func(*Timer[int])){
		"Advance":  (*Wheel[int]).Advance,
		"AdvanceN": chain,
	} {
		w := New[int](1, 64, 0)
		timers := make([]Timer[int], 4096)
		r := rand.New(rand.NewPCG(9, 9))
		offsets := make([]int64, len(timers))
		for i := range offsets {
			offsets[i] = 1 + r.Int64N(64*64*64*4) // four levels
		}
		fired := 0
		fire := func(*Timer[int]) { fired++ }
		var now int64
		round := func() {
			for i := range timers {
				w.Add(&timers[i], now+offsets[i])
			}
			for i := 0; i < len(timers); i += 2 {
				w.Cancel(&timers[i])
			}
			for w.Len() > 0 {
				next, _ := w.NextDeadline()
				now = next
				advance(w, now, fire)
			}
		}
		round() // grow levels and the bucket queue
		fired = 0
		if allocs := testing.AllocsPerRun(20, round); allocs != 0 {
			t.Fatalf("%s: %v allocations per round of %d timers", name, allocs, len(timers))
		}
		if fired != 21*len(timers)/2 {
			t.Fatalf("%s: %d timers fired in 21 rounds, want %d", name, fired, 21*len(timers)/2)
		}
	}
}
