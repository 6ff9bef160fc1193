// Package timewheel is a hierarchical timing wheel: a data structure that
// holds many timers and hands back the expired ones when the caller moves
// time forward. The broker engine uses one for message due times, lease
// expiries and retry backoff; the package imports only the standard library
// and knows nothing about the broker.
//
// # Model
//
// Time is an abstract int64 (the engine uses Unix milliseconds) that moves
// only when the caller calls [Wheel.Advance] or [Wheel.AdvanceN]. There is
// no goroutine and no
// clock inside: whoever owns the wheel decides what "now" is, which makes
// tests deterministic and lets the engine drive the wheel from its monotonic
// clock.
//
// Timers are grouped into buckets of width one tick on the lowest level;
// level i has the same number of slots, each slots^i ticks wide, so a few
// levels cover any int64 deadline. Higher levels (overflow wheels) are
// created on first use. A timer on a higher level is moved down when the
// clock reaches the start of its bucket, until it lands on level 0 and
// fires. This is the scheme of Kafka's purgatory, with one change: deadlines
// are rounded up to a tick boundary, never down, so a timer is never handed
// out before its deadline.
//
// Only non-empty buckets are kept in a priority queue ordered by the time
// they need attention, so an idle wheel costs nothing, a jump over a long
// idle gap costs time proportional to the buckets it crosses that hold
// timers (not to the ticks it crosses), and [Wheel.NextDeadline] tells the
// owner how long it may sleep.
//
// # Guarantees
//
//   - A timer never fires before its deadline.
//   - A timer with deadline d fires at the first Advance whose now is at
//     least d rounded up to a multiple of tick; with tick 1 that is exactly
//     the first Advance with now >= d. A timer whose deadline has already
//     passed when it is added fires at the next Advance; it is never dropped.
//     Advance(math.MaxInt64) fires every timer, even one whose deadline
//     rounds up past the int64 range.
//   - Within one Advance, timers fire in non-decreasing order of the tick they
//     are due at (a timer added after its deadline counts as due at the tick
//     the wheel had reached when it was added). Timers due at one tick fire
//     in the order they were added, with one exception: a timer added while
//     its tick was too far ahead for a finer level waits in a coarser
//     bucket and joins its tick's bucket only when the clock reaches the
//     coarser bucket's start, behind the timers of that tick added to the
//     finer bucket in the meantime.
//   - Bounded work: [Wheel.AdvanceN] does what Advance does in steps of at
//     most max units of work (a timer fired, a timer moved down a level, or
//     an emptied bucket dropped), so a herd due at one tick, or a coarse
//     bucket holding one, never holds the caller's lock for more than max
//     timers. A chain of AdvanceN calls until it reports no more work is
//     exactly one Advance: the same timers in the same order. Between the
//     calls the clock (Now) stays at the start of the tick being worked on,
//     never past a scheduled timer, and Add and Cancel work as usual. No
//     other call does work that grows with a herd: Add and Cancel are O(1)
//     apart from a heap operation, and NextDeadline at most drops the
//     buckets Cancel emptied, of which there are at most levels*slots.
//   - Add and Cancel are O(1) apart from a heap operation on the small
//     queue of buckets (at most levels*slots entries) when a bucket goes
//     from empty to non-empty. The caller allocates the [Timer]s, so Add,
//     Cancel and firing allocate nothing in steady state.
//
// # Caveats
//
// A Wheel is not safe for concurrent use: its owner calls it from one
// goroutine or under its own lock. The fire callback runs on the goroutine
// that called Advance or AdvanceN and may call Add and Cancel (but not
// Advance or AdvanceN) on the same wheel.
//
// Adding a Timer that is already scheduled panics; Cancel it first. This
// catches a timer shared by two owners, which rescheduling would hide.
package timewheel
