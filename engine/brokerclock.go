package engine

import (
	"time"

	"github.com/hourglass-mq/hourglass/clock"
)

// newBrokerClock starts the broker clock at the wall clock; recovery
// raises it to the durable high-water mark. Jumps are counted and logged.
func newBrokerClock(opts *Options, stats *Stats) *clock.Broker {
	return clock.NewBroker(opts.Clock, opts.ClockJumpThreshold, func(by time.Duration) {
		stats.ClockJumps.Add(1)
		opts.Logger.Warn("wall clock jumped", "by", by)
	})
}

// Now returns the broker's time in Unix milliseconds. It follows the wall
// clock but never runs backwards, across restarts too: after a backward
// step it holds still until the wall clock catches up, so nothing becomes
// visible early; a forward step makes what it skipped due at once, at the
// dispatch rate. Steps larger than ClockJumpThreshold relative to the
// monotonic clock are logged and counted.
func (e *Engine) Now() int64 { return e.clock.Now() }

// ClockHeld returns how far the broker's time is ahead of the wall clock:
// while it is positive the broker clock holds still (after a backward step
// of the wall clock, or a restart with it behind), and an absolute time
// within that interval is due only when the broker clock moves again
// (message.Limits.DueAtHeld). 0 when the clocks agree.
func (e *Engine) ClockHeld() time.Duration {
	return time.Duration(e.clock.Behind()) * time.Millisecond
}
