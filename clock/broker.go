package clock

import (
	"sync"
	"time"
)

// Broker is the broker's clock in Unix milliseconds. It follows the wall
// clock, because clients state due times in wall-clock time, but it never
// runs backwards: after a backward step of the wall clock it holds still
// until the wall clock catches up, so nothing becomes visible early; a
// forward step makes what it skipped due at once.
//
// Never running backwards must hold across restarts too, or a broker
// restarted with its wall clock behind would hand out due times earlier
// than ones it already made visible. The owner therefore persists a
// high-water mark (the engine derives it from its checkpoint and the
// timestamps of the records it replays) and calls Raise with it before the
// first Now.
//
// Steps of the wall clock larger than the threshold, measured against the
// source's monotonic clock, are reported to onJump.
type Broker struct {
	src       Clock
	threshold int64 // ms
	onJump    func(by time.Duration)

	mu       sync.Mutex
	lastWall int64         // wall clock at the last reading, Unix ms
	lastMono time.Duration // monotonic clock at the last reading
	t        int64         // the broker time: never decreases
}

// NewBroker returns a broker clock reading src. threshold is the wall-clock
// step (relative to the monotonic clock) reported as a jump; onJump may be
// nil.
func NewBroker(src Clock, threshold time.Duration, onJump func(by time.Duration)) *Broker {
	b := &Broker{src: src, threshold: threshold.Milliseconds(), onJump: onJump}
	b.lastWall = src.Now().UnixMilli()
	b.lastMono = src.Since()
	b.t = b.lastWall
	return b
}

// Now returns the broker time in Unix milliseconds: max(wall clock, every
// value returned before, every value passed to Raise).
func (b *Broker) Now() int64 {
	now, _ := b.NowWall()
	return now
}

// NowWall returns the broker time, as Now, and the wall clock (Unix ms,
// rounded down) of the same reading. wall < now while the broker clock
// holds after a backward step of the wall clock, or after a restart with
// the wall clock behind the time the broker had reached: an absolute time
// in (wall, now] is then still ahead by the wall clock and already past
// by the broker's (message.Limits.DueAtHeld).
func (b *Broker) NowWall() (now, wall int64) {
	wall = b.src.Now().UnixMilli()
	mono := b.src.Since()
	b.mu.Lock()
	expect := b.lastWall + (mono - b.lastMono).Milliseconds()
	d := wall - expect
	b.lastWall, b.lastMono = wall, mono
	if wall > b.t {
		b.t = wall
	}
	t := b.t
	b.mu.Unlock()
	if (d > b.threshold || -d > b.threshold) && b.onJump != nil {
		b.onJump(time.Duration(d) * time.Millisecond)
	}
	return t, wall
}

// Raise makes the broker time at least t. It never lowers it.
func (b *Broker) Raise(t int64) {
	b.mu.Lock()
	if t > b.t {
		b.t = t
	}
	b.mu.Unlock()
}

// Behind reports how far the wall clock is behind the broker time, in
// milliseconds (0 when it is not): while it is positive the broker clock
// stands still.
func (b *Broker) Behind() int64 {
	wall := b.src.Now().UnixMilli()
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(0, b.t-wall)
}
