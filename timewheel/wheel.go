package timewheel

import (
	"fmt"
	"math"
)

// Timer is one scheduled callback target. The caller allocates it (it may
// embed it in its own struct or keep a pool) and passes its address to Add;
// the wheel links it into its lists through the unexported fields, which is
// why the wheel itself allocates nothing per timer.
//
// A Timer must not be copied while it is scheduled: the wheel holds pointers
// to it. The zero value is an unscheduled timer.
type Timer[T any] struct {
	// Value is the caller's payload; the wheel never reads or writes it.
	Value T

	prev, next *Timer[T]
	bucket     *bucket[T] // nil exactly when the timer is not scheduled
	deadline   int64      // as given to Add
	expiry     uint64     // deadline in ticks, rounded up, relative to Wheel.origin
}

// Scheduled reports whether t is in a wheel: added and neither fired nor
// cancelled. Inside the fire callback the fired timer is no longer
// scheduled, so the callback may Add it again.
func (t *Timer[T]) Scheduled() bool { return t.bucket != nil }

// Deadline returns the deadline t was last added with. It keeps that value
// after t fires or is cancelled, so a fire callback can tell how late it is.
func (t *Timer[T]) Deadline() int64 { return t.deadline }

// level is one ring of the hierarchy. Level i has unit slots^i ticks per
// bucket.
type level[T any] struct {
	buckets []bucket[T]
	unit    uint64 // ticks per bucket
	cur     uint64 // Wheel.cur / unit: the bucket number the clock is in
}

// Wheel is a hierarchical timing wheel of Timers carrying a T. It is not
// safe for concurrent use. Create it with New.
type Wheel[T any] struct {
	tick   int64
	slots  uint64
	origin int64 // floor(start/tick): absolute tick that relative tick 0 is
	now    int64 // latest time given to New or Advance
	cur    uint64
	levels []level[T]
	queue  bucketQueue[T]
	n      int

	// ready holds, in the order they were added, the timers added with a
	// deadline at or before the clock. Those up to and including fence are
	// due in the current chain of calls (see AdvanceN); the rest were added
	// during the chain and wait for the next one. The fence keeps a fire
	// callback that re-adds a timer in the past from looping a chain
	// forever, and makes a chain do exactly what one Advance does. fence
	// is nil when no timer in ready is due in the chain; a Cancel or fire
	// of the fence timer moves it to the timer before.
	ready *bucket[T]
	fence *Timer[T]
	// cascade is the bucket the clock is in while AdvanceN works through
	// it: popped from the queue, its timers fire (those due at cur) or
	// move down a level one at a time, so a herd in one bucket is spread
	// over as many calls as the budget asks. While it holds timers the
	// clock stays at its exp. nil when there is none.
	cascade *bucket[T]
	// pending: the last AdvanceN stopped on its budget, so the next call
	// continues the chain rather than starting one.
	pending   bool
	advancing bool
	// work counts the units of work AdvanceN has done (timers fired,
	// timers moved down, empty buckets dropped); tests read it to check
	// that one call stays within its budget.
	work uint64
}

// New returns an empty wheel whose clock reads now.
//
// tick is the width of the smallest bucket in the caller's time unit: the
// resolution of the wheel, and the most a timer can fire late relative to
// its deadline when Advance is called with every tick. slots is the number
// of buckets per level; with tick 1 ms, 512 slots keep timers up to 512 ms
// on the first level and up to 512² ms (about 4 min) on the second. New
// panics if tick < 1 or slots < 2.
func New[T any](tick int64, slots int, now int64) *Wheel[T] {
	if tick < 1 {
		panic(fmt.Sprintf("timewheel: tick must be at least 1, got %d", tick))
	}
	if slots < 2 {
		panic(fmt.Sprintf("timewheel: slots must be at least 2, got %d", slots))
	}
	w := &Wheel[T]{
		tick:   tick,
		slots:  uint64(slots),
		origin: clockTick(now, tick),
		now:    now,
	}
	w.ready = &bucket[T]{wheel: w, index: -1, level: -1}
	w.addLevel()
	return w
}

// Len returns the number of scheduled timers, including those that are
// due and wait for the next Advance or AdvanceN.
func (w *Wheel[T]) Len() int { return w.n }

// Now returns the wheel's clock: the latest time given to New, Advance or
// an AdvanceN that reported no more work. Inside a fire callback, and
// after an AdvanceN that stopped on its budget (more true), it is the start
// of the tick the wheel has reached: at or before the now passed, and never
// past the tick of a timer that is still scheduled, apart from timers added
// already past due.
func (w *Wheel[T]) Now() int64 { return w.now }

// Add schedules t to fire at the first Advance whose now is at or after
// deadline rounded up to a multiple of tick (or math.MaxInt64 if rounding
// up leaves the int64 range: Advance(math.MaxInt64) fires every timer). A
// deadline at or before the wheel's clock (Now) fires at the next Advance,
// whatever the tick. Add panics if t is already scheduled, in this wheel or
// another; Cancel it first to reschedule.
//
// Add may be called from inside the fire callback of Advance, where Now is
// the start of the tick being fired. A timer so added fires within the same
// Advance if its deadline is after Now and at or before the now passed to
// Advance, and at the next Advance if its deadline is at or before Now.
func (w *Wheel[T]) Add(t *Timer[T], deadline int64) {
	if t.bucket != nil {
		panic("timewheel: Add of a timer that is already scheduled; Cancel it first")
	}
	t.deadline = deadline
	w.n++
	if deadline <= w.now {
		// Checked on the time, not the tick: with tick > 1 a deadline
		// just before now can still round up past the current tick.
		t.expiry = w.cur
		w.ready.push(t)
		return
	}
	// deadline > now implies ceilDiv(deadline) > clockTick(now) = origin+cur,
	// so the true difference is in [1, 2^64) even when the int64
	// subtraction would overflow; uint64 wrap-around arithmetic gives
	// exactly that difference, and it is after cur as place requires.
	t.expiry = uint64(ceilDiv(deadline, w.tick)) - uint64(w.origin)
	w.place(t)
}

// place links t, whose expiry is after w.cur, into the lowest level whose
// range reaches its expiry.
//
// Invariant that makes buckets reusable: a timer goes to level i only when
// level i-1 cannot hold it, which implies its bucket number v on level i is
// greater than level i's current bucket number; and only when v is less
// than that number plus slots. So the buckets a level holds at any time have
// distinct numbers modulo slots, none is the bucket the clock is in, and
// every queued bucket starts after w.cur. In particular place never adds to
// the cascade bucket, which AdvanceN has popped and whose exp is w.cur: a
// timer in its range with an expiry after w.cur always fits the level below.
func (w *Wheel[T]) place(t *Timer[T]) {
	e := t.expiry
	for i := 0; ; i++ {
		if i == len(w.levels) {
			w.addLevel()
		}
		lv := &w.levels[i]
		v := e / lv.unit
		// On the top level unit*slots exceeds 2^64, so v < slots and the
		// test always passes: the loop ends by the top level at the latest.
		if v-lv.cur < w.slots {
			b := &lv.buckets[v%w.slots]
			if b.index < 0 {
				b.exp = v * lv.unit
				w.queue.push(b)
			}
			b.push(t)
			return
		}
	}
}

// addLevel appends the next overflow wheel. The caller only asks for it
// when the current top level cannot hold an expiry, which means the top
// level's unit*slots still fits in a uint64.
func (w *Wheel[T]) addLevel() {
	unit := uint64(1)
	if n := len(w.levels); n > 0 {
		unit = w.levels[n-1].unit * w.slots
	}
	lv := level[T]{
		buckets: make([]bucket[T], w.slots),
		unit:    unit,
		cur:     w.cur / unit,
	}
	for i := range lv.buckets {
		lv.buckets[i].wheel = w
		lv.buckets[i].index = -1
		lv.buckets[i].level = len(w.levels)
	}
	w.levels = append(w.levels, lv)
}

// Cancel unschedules t and reports whether it was scheduled. A cancelled
// timer never fires, even if it was due and waiting for Advance. Cancel
// panics if t is scheduled in a different wheel.
//
// A bucket emptied by Cancel stays in the bucket queue until Advance or
// NextDeadline reaches it; that keeps Cancel O(1).
func (w *Wheel[T]) Cancel(t *Timer[T]) bool {
	b := t.bucket
	if b == nil {
		return false
	}
	if b.wheel != w {
		panic("timewheel: Cancel of a timer scheduled in another wheel")
	}
	if t == w.fence {
		w.fence = t.prev
	}
	b.remove(t)
	w.n--
	return true
}

// Advance moves the wheel's clock to now and calls fire, on the calling
// goroutine, for every timer that is due: those whose deadline rounded up to
// a tick is at or before now, and those added after their deadline. Each
// timer is unscheduled just before fire is called with it. It is AdvanceN
// without a limit, so it also finishes a chain AdvanceN left unfinished.
//
// A now before the wheel's clock does not move the clock back; timers added
// after their deadline still fire.
//
// fire may call Add and Cancel on w; cancelling a timer that is due but not
// yet fired stops it from firing. fire must not call Advance or AdvanceN:
// that panics. If fire panics, the wheel stays consistent and the timers
// that were due but not fired yet fire at the next Advance.
func (w *Wheel[T]) Advance(now int64, fire func(*Timer[T])) {
	w.AdvanceN(now, math.MaxInt, fire)
}

// AdvanceN is Advance in bounded steps: it does at most max units of work
// towards now, calling fire for at most max due timers, and reports in n
// how many it fired and in more whether work towards now remains. A unit
// is firing a timer, moving a timer from a coarse bucket down a level, or
// dropping a bucket that Cancel emptied; so a herd of timers due at one
// tick, however large, costs a caller's lock at most max timers per call.
//
// Calls from the first one to the one that reports more false form a
// chain, and a chain does exactly what one Advance(now, fire) does: the
// same timers fire, in the same order, none early and none twice. Between
// two calls of a chain the owner may Add and Cancel: a cancelled timer does
// not fire; a timer added with a deadline after Now and at or before now
// fires later in the chain; one added at or before Now (past due) fires in
// the next chain, like one a fire callback adds. A call may pass a
// different now than the one before; each call works towards its own.
//
// While more is true the clock has not reached now and has not passed any
// scheduled timer: Now is the start of the tick the wheel has reached (or
// the clock as the call found it, if it did not move). NextDeadline then
// returns Now while timers of that tick are still to fire or to move down,
// and otherwise the start of the next bucket with timers, which is at or
// before now unless Cancel emptied every bucket left before now; so an
// owner that sleeps until NextDeadline calls again at once. When more is
// false, Now is now (or the clock, if now is before it).
// more true promises at least one unit of work to the next call, though
// maybe no fire: moving a herd down a level fires nothing.
//
// AdvanceN panics if max < 1. fire is called as for Advance.
func (w *Wheel[T]) AdvanceN(now int64, max int, fire func(*Timer[T])) (n int, more bool) {
	if w.advancing {
		panic("timewheel: Advance called from inside a fire callback")
	}
	if max < 1 {
		panic(fmt.Sprintf("timewheel: AdvanceN max must be at least 1, got %d", max))
	}
	w.advancing = true
	defer func() { w.advancing = false }()
	if !w.pending {
		// A new chain: every past-due timer added so far is due in it.
		w.fence = w.ready.tail
	}
	// Cleared until the call ends on its budget, so that after a fire
	// callback panics the next call starts a new chain, as the next
	// Advance did before there were chains.
	w.pending = false
	target := w.cur
	if now > w.now {
		target = uint64(clockTick(now, w.tick)) - uint64(w.origin)
	}
	budget := max
	for {
		t := w.nextTimer()
		if t == nil {
			if len(w.queue) == 0 || w.queue[0].exp > target {
				break
			}
			if budget == 0 {
				w.pending = true
				return n, true
			}
			b := w.queue.pop()
			if b.head == nil {
				// Emptied by Cancel: dropping it is a unit of work.
				w.work++
				budget--
				continue
			}
			// Free of charge: a bucket with timers is popped only with
			// budget left, and its first timer takes a unit.
			w.setClock(b.exp)
			// Keep now in step with the clock, so that Add in a fire
			// callback, a fire callback that panics and an owner between
			// calls all see a consistent wheel.
			w.now = w.timeOf(b.exp)
			w.cascade = b
			continue
		}
		if budget == 0 {
			w.pending = true
			return n, true
		}
		budget--
		w.work++
		if t == w.fence {
			w.fence = t.prev
		}
		t.bucket.remove(t)
		if t.expiry > w.cur {
			// From a coarse bucket and not due yet: its expiry is after
			// the clock, so place puts it on a lower level.
			w.place(t)
			continue
		}
		w.n--
		n++
		fire(t)
	}
	if now > w.now {
		w.setClock(target)
		w.now = now
	}
	return n, false
}

// nextTimer returns the timer the current chain handles next at the
// clock's tick, or nil: first past-due timers up to the fence, then the
// timers of the bucket the clock is in.
func (w *Wheel[T]) nextTimer() *Timer[T] {
	if w.fence != nil {
		return w.ready.head
	}
	if w.cascade != nil {
		if t := w.cascade.head; t != nil {
			return t
		}
		// Emptied: forget it before the clock moves, because its slot
		// may then receive timers of a later range.
		w.cascade = nil
	}
	return nil
}

// setClock sets the current tick on every level.
func (w *Wheel[T]) setClock(c uint64) {
	w.cur = c
	for i := range w.levels {
		w.levels[i].cur = c / w.levels[i].unit
	}
}

// NextDeadline returns the earliest time at which Advance has work to do:
// fire a timer, or move the timers of a higher-level bucket down a level
// (which fires nothing, after which NextDeadline returns a later time). The
// owner can sleep until then. If some timer is already due, or a chain of
// AdvanceN calls still has timers of the current tick to fire or move, it
// returns the wheel's clock (Now); if no timer is scheduled it returns
// false.
func (w *Wheel[T]) NextDeadline() (int64, bool) {
	if w.ready.head != nil || (w.cascade != nil && w.cascade.head != nil) {
		return w.now, true
	}
	// Drop buckets emptied by Cancel so that they do not cause a wake-up
	// with nothing to do. There are at most levels*slots of them, since a
	// bucket is queued at most once.
	for len(w.queue) > 0 && w.queue[0].head == nil {
		w.queue.pop()
	}
	if len(w.queue) == 0 {
		return 0, false
	}
	return w.timeOf(w.queue[0].exp), true
}

// timeOf returns the time at which relative tick c starts. c is at most a
// timer's ceilDiv(deadline) minus origin, so origin+c fits; the product may
// not, for the tick that only Advance(math.MaxInt64) reaches, which is
// reported as math.MaxInt64.
func (w *Wheel[T]) timeOf(c uint64) int64 {
	abs := w.origin + int64(c)
	if abs > math.MaxInt64/w.tick {
		return math.MaxInt64
	}
	return abs * w.tick
}

// clockTick returns the tick the clock is in at time now. The end of time
// is special: rounding a deadline near math.MaxInt64 up to a tick boundary
// may leave the int64 range, so no now would ever reach its tick; reading
// math.MaxInt64 as the tick after it makes Advance(math.MaxInt64) fire
// every timer, and it is never early, since no deadline is later.
func clockTick(now, tick int64) int64 {
	if now == math.MaxInt64 {
		return ceilDiv(now, tick)
	}
	return floorDiv(now, tick)
}

// floorDiv returns floor(a/b) for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// ceilDiv returns ceil(a/b) for b > 0. It cannot overflow: when b == 1
// there is no remainder, and when b >= 2 the quotient is at most half the
// int64 range.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a > 0 {
		q++
	}
	return q
}
