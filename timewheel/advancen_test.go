package timewheel

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// firing is one fire as an owner sees it: which timer, and the clock then.
type firing struct {
	value int
	now   int64
}

// twin drives a wheel with a seeded generator. Two twins with the same seed
// make the same calls as long as their wheels fire the same timers in the
// same order, which is what TestAdvanceNEqualsAdvance checks.
type twin struct {
	r      *rand.Rand
	w      *Wheel[int]
	timers []Timer[int]
	fired  []firing
}

func newTwin(seed uint64) *twin {
	tw := &twin{r: rand.New(rand.NewPCG(seed, 1)), w: New[int](1, 8, 0), timers: make([]Timer[int], 300)}
	for i := range tw.timers {
		tw.timers[i].Value = i
	}
	return tw
}

// add (re)schedules timer i at now plus a random offset spread over three
// levels, sometimes in the past.
func (tw *twin) add(i int, now int64) {
	tw.w.Cancel(&tw.timers[i])
	tw.w.Add(&tw.timers[i], now-3+tw.r.Int64N(600))
}

// fire records the fire and re-enters the wheel as the engine does:
// reschedules the timer (perhaps in the past), or cancels another one.
func (tw *twin) fire(tm *Timer[int]) {
	tw.fired = append(tw.fired, firing{tm.Value, tw.w.Now()})
	switch tw.r.IntN(4) {
	case 0:
		tw.add(tm.Value, tw.w.Now())
	case 1:
		tw.w.Cancel(&tw.timers[tw.r.IntN(len(tw.timers))])
	}
}

// TestAdvanceNEqualsAdvance checks that a chain of AdvanceN calls with a
// random budget fires the same timers in the same order, at the same clock
// readings, as one Advance, with fire callbacks that add and cancel timers
// and NextDeadline called between the calls; and that both wheels agree on
// Now, Len and NextDeadline after every chain.
func TestAdvanceNEqualsAdvance(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		one, chain := newTwin(seed), newTwin(seed)
		var now int64
		calls := 0
		for round := 0; round < 200; round++ {
			for range 20 {
				i := one.r.IntN(len(one.timers))
				chain.r.IntN(len(chain.timers))
				one.add(i, now)
				chain.add(i, now)
			}
			now += one.r.Int64N(300)
			chain.r.Int64N(300)
			one.w.Advance(now, one.fire)
			limit := 1 + int(seed%7)
			for more := true; more; calls++ {
				_, more = chain.w.AdvanceN(now, limit, chain.fire)
				// Only looked at: NextDeadline drops emptied buckets, which
				// must not change what the chain does next.
				if _, ok := chain.w.NextDeadline(); ok != (chain.w.Len() > 0) {
					t.Fatalf("seed %d: NextDeadline ok %v with Len %d", seed, ok, chain.w.Len())
				}
			}
			if !slices.Equal(one.fired, chain.fired) {
				t.Fatalf("seed %d round %d: Advance fired %v, the chain %v", seed, round, one.fired, chain.fired)
			}
			n1, ok1 := one.w.NextDeadline()
			n2, ok2 := chain.w.NextDeadline()
			if one.w.Now() != chain.w.Now() || one.w.Len() != chain.w.Len() || n1 != n2 || ok1 != ok2 {
				t.Fatalf("seed %d: after the chain Now %d/%d Len %d/%d NextDeadline %d,%v/%d,%v",
					seed, one.w.Now(), chain.w.Now(), one.w.Len(), chain.w.Len(), n1, ok1, n2, ok2)
			}
		}
		if len(one.fired) < 3000 || calls < 2*200 {
			t.Fatalf("seed %d: only %d fires in %d calls; the comparison is too weak", seed, len(one.fired), calls)
		}
	}
}

// TestAdvanceNBetweenCalls checks the owner's view between two calls of a
// chain: a timer cancelled there does not fire, a timer added there that is
// due by the chain's now fires later in the chain, one added past due fires
// in the next chain, and the clock waits at the tick it has reached.
func TestAdvanceNBetweenCalls(t *testing.T) {
	w := New[int](1, 8, 0)
	timers := make([]Timer[int], 10)
	for i := range timers {
		timers[i].Value = i
		w.Add(&timers[i], 5)
	}
	var got []int
	n, more := w.AdvanceN(20, 3, collect(&got))
	if n != 3 || !more || !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("first call fired %d %v, more %v; want 0 1 2 and more", n, got, more)
	}
	if w.Now() != 5 {
		t.Fatalf("Now %d between calls, want 5, the tick still firing", w.Now())
	}
	if next, ok := w.NextDeadline(); !ok || next != 5 {
		t.Fatalf("NextDeadline %d, %v between calls, want 5", next, ok)
	}
	w.Cancel(&timers[3])
	var late, past Timer[int]
	late.Value, past.Value = 100, 200
	w.Add(&late, 12) // after Now, before the chain's now
	w.Add(&past, 4)  // past due: waits for the next chain
	for more {
		_, more = w.AdvanceN(20, 3, collect(&got))
	}
	want := []int{0, 1, 2, 4, 5, 6, 7, 8, 9, 100}
	if !slices.Equal(got, want) || w.Now() != 20 || w.Len() != 1 {
		t.Fatalf("chain fired %v, Now %d, Len %d; want %v, 20, 1", got, w.Now(), w.Len(), want)
	}
	got = got[:0]
	if n, more := w.AdvanceN(20, 3, collect(&got)); n != 1 || more || got[0] != 200 {
		t.Fatalf("next chain fired %v, more %v; want the past-due timer", got, more)
	}
	checkInvariants(t, w)
}

// herd adds n timers due at deadline to w and returns them.
func herd(w *Wheel[int], n int, deadline int64) []Timer[int] {
	timers := make([]Timer[int], n)
	for i := range timers {
		timers[i].Value = i
		w.Add(&timers[i], deadline)
	}
	return timers
}

// drainHerd advances w to now with AdvanceN(max) until done. It checks
// that every call stays within max units of work, that the herd fires in
// the order it was added and not before tick due, and returns the number
// of calls.
func drainHerd(t *testing.T, w *Wheel[int], now, due int64, max int) int {
	t.Helper()
	next := 0
	fire := func(tm *Timer[int]) {
		if tm.Value != next || w.Now() < due {
			t.Fatalf("timer %d fired at %d, want timer %d at %d or later", tm.Value, w.Now(), next, due)
		}
		next++
	}
	calls := 0
	for more := true; more; calls++ {
		work := w.work
		var n int
		n, more = w.AdvanceN(now, max, fire)
		if n > max || w.work-work > uint64(max) {
			t.Fatalf("call %d fired %d and did %d units of work, over the budget %d", calls, n, w.work-work, max)
		}
	}
	return calls
}

// TestAdvanceNHerd expires a herd of a million timers due at one tick with
// a budget of 4096 a call: it takes ceil(1M/4096) calls, each firing a full
// budget but the last, in the order the timers were added.
func TestAdvanceNHerd(t *testing.T) {
	const size, max = 1_000_000, 4096
	w := New[int](1, 512, 0)
	timers := herd(w, size, 100) // on level 0
	calls := drainHerd(t, w, 100, 100, max)
	if want := (size + max - 1) / max; calls != want || w.Len() != 0 || w.Now() != 100 {
		t.Fatalf("herd of %d took %d calls, Len %d, Now %d; want %d calls", size, calls, w.Len(), w.Now(), want)
	}
	if timers[size-1].Scheduled() {
		t.Fatal("last timer of the herd still scheduled")
	}
}

// TestAdvanceNHerdCascade puts the herd in a coarse bucket, so that it
// must move down a level before it fires: moving is bounded by the budget
// too, happens when the clock reaches the coarse bucket (before the herd is
// due), and a timer due between the bucket's start and the herd's tick
// fires after the move and before the herd.
func TestAdvanceNHerdCascade(t *testing.T) {
	const size, max = 1_000_000, 4096
	w := New[int](1, 512, 0)
	herd(w, size, 1000) // level 1, bucket [512, 1024)
	var other Timer[int]
	other.Value = -1
	w.Add(&other, 600) // level 1 too, same bucket
	perCall := (size + max - 1) / max

	var got []int
	calls := 0
	for more := true; more; calls++ {
		work := w.work
		var n int
		n, more = w.AdvanceN(700, max, collect(&got))
		if n > 1 || w.work-work > max || (more && w.Now() != 512) {
			t.Fatalf("call %d towards 700: fired %d, %d units of work, Now %d", calls, n, w.work-work, w.Now())
		}
	}
	if !slices.Equal(got, []int{-1}) || calls > perCall+1 {
		t.Fatalf("moving the herd down took %d calls and fired %v; want at most %d calls and the timer at 600",
			calls, got, perCall+1)
	}
	if calls = drainHerd(t, w, 1000, 1000, max); calls != perCall || w.Len() != 0 {
		t.Fatalf("firing the moved herd took %d calls, Len %d; want %d calls", calls, w.Len(), perCall)
	}
}

// TestTieOrder pins down the order of timers due at one tick: the order
// they were added, for timers on the lowest level, past-due timers and a
// herd that moved down as one; and the documented exception, a timer that
// waited on a higher level coming after timers of its tick added later to
// the lower one.
func TestTieOrder(t *testing.T) {
	run := func(w *Wheel[int], now int64) []int {
		var got []int
		w.Advance(now, collect(&got))
		return got
	}
	inOrder := []int{0, 1, 2, 3, 4, 5}
	for _, tc := range []struct {
		name     string
		deadline int64
		start    int64
	}{
		{"lowest level", 5, 0},
		{"past due", 5, 10},
		{"due at a coarse bucket's start", 56, 0},
		{"moved down", 57, 0},
	} {
		w := New[int](1, 8, tc.start)
		herd(w, 6, tc.deadline)
		if got := run(w, max(tc.deadline, tc.start+1)); !slices.Equal(got, inOrder) {
			t.Errorf("%s: fired %v, want %v", tc.name, got, inOrder)
		}
	}
	// Buckets with the same start on two levels: the higher one goes
	// first, since its timers were added earlier. The timer at 50 leaves
	// the lower bucket at the top of the queue once it has fired.
	w := New[int](1, 8, 0)
	herd(w, 3, 56) // level 1, bucket [56, 64)
	run(w, 49)
	var at50 Timer[int]
	at50.Value = -1
	w.Add(&at50, 50)
	late := herd(w, 3, 56) // level 0
	for i := range late {
		late[i].Value += 3
	}
	if got := run(w, 56); !slices.Equal(got, []int{-1, 0, 1, 2, 3, 4, 5}) {
		t.Errorf("one start on two levels: fired %v, want the timer at 50 and then the order of adding", got)
	}

	w = New[int](1, 8, 0)
	early := herd(w, 3, 60) // level 1 until the clock reaches 56
	run(w, 53)
	late = herd(w, 3, 60) // level 0
	for i := range late {
		late[i].Value += len(early)
	}
	if got := run(w, 60); !slices.Equal(got, []int{3, 4, 5, 0, 1, 2}) {
		t.Errorf("mixed levels: fired %v, want the later ones first, each group in order", got)
	}
}

func TestAdvanceNMisuse(t *testing.T) {
	w := New[int](1, 8, 0)
	expectPanic(t, "max must be at least 1", func() { w.AdvanceN(10, 0, func(*Timer[int]) {}) })
	var tm Timer[int]
	w.Add(&tm, 5)
	expectPanic(t, "inside a fire callback", func() {
		w.AdvanceN(10, 5, func(*Timer[int]) { w.AdvanceN(11, 5, func(*Timer[int]) {}) })
	})
	if _, more := w.AdvanceN(math.MaxInt64, 1, func(*Timer[int]) {}); more || w.Len() != 0 {
		t.Fatalf("after the panics: more %v, Len %d", more, w.Len())
	}
}
