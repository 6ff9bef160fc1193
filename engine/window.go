package engine

import (
	"math/bits"

	"github.com/hourglass-mq/hourglass/message"
)

// Tolerance windows. A message may say "deliver at T, or at any time up to
// T+w" (message.When.Window, stored as Stored.Window). The broker uses the
// freedom to spread a herd: each windowed message gets its own fire time
//
//	fireAt = T + floor(frac(nonce * φ) * (w' + 1)),  w' = min(w, deadline - T)
//
// where φ is the golden ratio's fraction (a Weyl sequence over the nonce):
// never before T, never after T+w (nor after the deadline), and, because a
// herd's nonces are consecutive draws of one counter, the fire times of a
// herd with one T and w fall evenly over the window, one after another
// wherever they are in it, not in random clumps. The time is a pure
// function of the record, so the timer buckets (a cache) are rebuilt to the
// same times, and nothing new is stored.
//
// The timer of a windowed message is at fireAt and has kind kindWindowed in
// its bucket. A fire of one becomes visible later than T+w only when the
// dispatcher falls behind (the dispatch rate, a downtime): fire counts them
// (Stats.WindowMissed, hourglass_window_missed_total), reading the record
// of a windowed message only when it fires late at all.
//
// A reschedule sets an exact time: the moved message fires at its new due
// time, without a window.

// kindWindowed marks the timer of a message with a tolerance window.
const kindWindowed uint8 = 2

// golden is 2^64 divided by the golden ratio, odd: the step of the Weyl
// sequence that spreads windowed messages.
const golden = 0x9E3779B97F4A7C15

// fireAt is when the timer of the message s falls due, its reschedules
// aside.
func fireAt(s *message.Stored) int64 {
	w := windowEnd(s) - s.Due
	if w <= 0 {
		return s.Due
	}
	off, _ := bits.Mul64(s.Nonce*golden, uint64(w)+1)
	return s.Due + int64(off)
}

// windowEnd is the latest time the message s may become visible within
// its window: due plus window, or its deadline if that is earlier.
func windowEnd(s *message.Stored) int64 {
	end := s.Due + s.Window
	if s.Deadline != 0 {
		end = min(end, s.Deadline)
	}
	return end
}

// messageRef is the timer of a message s at pos in topic t, its
// reschedules aside.
func messageRef(pos uint64, s *message.Stored, t *topic) timerRef {
	return timerRef{pos: pos, due: fireAt(s), topic: t.id, queue: uint16(s.Queue), windowed: s.Window > 0}
}

// timerKind is the bucket entry kind of a message timer.
func (r timerRef) timerKind() uint8 {
	if r.windowed {
		return kindWindowed
	}
	return kindMessage
}
