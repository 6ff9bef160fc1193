package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/keyindex"
)

// The background scrub (issue 29): damage in a sealed segment used to be
// found only when a consumer's receive met it. The scrub reads every
// sealed segment at a bounded rate (Options.ScrubRate), validating each
// record and the segment's sum (commitlog.Log.Scrub), and records what it
// finds in the damage report, which /healthz, the metrics and the console
// show. It changes nothing: repair stays an operator's act on a stopped
// broker.
//
// Its pace and its pauses are in real time, not the engine's clock: the
// rate is a bound on the disk's work, and a test's fake clock must not
// see a waiter it did not ask for. The first pass starts
// Options.ScrubDelay after Open (a second under `serve`: the rate bound,
// not a long wait, keeps it from crowding a start's first requests, and a
// broker restarted on a damaged log reports it within seconds); then a
// pass starts ScrubInterval after the last ended.

// Scrub defaults.
const (
	DefaultScrubRate     = 8 << 20 // bytes per second
	DefaultScrubInterval = time.Hour
	DefaultScrubDelay    = time.Minute
)

// errScrubStopped ends a pass when the engine closes.
var errScrubStopped = errors.New("engine: closed during a scrub")

// ScrubStatus is the scrub's state, for the damage report and the metrics.
type ScrubStatus struct {
	// Enabled is false when Options.ScrubRate is negative.
	Enabled bool `json:"enabled"`
	// Rate is the bound in bytes per second; Interval the pause between
	// passes.
	Rate     int64         `json:"rate_bytes_per_second"`
	Interval time.Duration `json:"-"`
	// Passes counts the complete passes since the start, Bytes the record
	// bytes read by every pass.
	Passes uint64 `json:"passes"`
	Bytes  uint64 `json:"bytes"`
	// LastPass is when the last complete pass ended (broker ms; 0 before
	// the first).
	LastPass int64 `json:"last_pass_ms"`
	// LastError is the last read error a pass met ("" if none): a
	// segment that could not be read is scrubbed again at the next pass.
	LastError string `json:"last_error,omitempty"`
}

// scrubState is the scrub's own state, under its own lock; run serialises
// passes (the background one and ScrubNow).
type scrubState struct {
	// What it is given at Open (init): the engine's options (read-only
	// after Open), the log it scrubs, the broker clock, the stats, the
	// lifecycle that stops it, and the damage record it writes what it
	// finds to.
	opts     *Options
	log      *commitlog.Log
	clock    *clock.Broker
	stats    *Stats
	life     *lifecycle
	dmg      *damageState
	keys     *keyindex.Index // set once recovery opened it (setKeys)
	run      sync.Mutex
	mu       sync.Mutex
	passes   uint64
	lastPass int64
	lastErr  string
}

// init gives the scrub what it uses; Open calls it once the log and the
// clock are open, before anything scrubs.
func (s *scrubState) init(opts *Options, log *commitlog.Log, clk *clock.Broker, stats *Stats, life *lifecycle, dmg *damageState) {
	s.opts, s.log, s.clock, s.stats, s.life, s.dmg = opts, log, clk, stats, life, dmg
}

// Scrub returns the scrub's state.
func (e *Engine) Scrub() ScrubStatus {
	s := &e.side.scrub
	s.mu.Lock()
	defer s.mu.Unlock()
	return ScrubStatus{Enabled: e.opts.ScrubRate > 0, Rate: max(e.opts.ScrubRate, 0), Interval: e.opts.ScrubInterval,
		Passes: s.passes, Bytes: e.stats.ScrubBytes.Load(), LastPass: s.lastPass, LastError: s.lastErr}
}

// ScrubNow runs one scrub pass over every sealed segment at the
// configured rate and returns when it is done, or when ctx ends or the
// engine closes (with that error). It waits for a pass already running.
func (e *Engine) ScrubNow(ctx context.Context) error {
	return e.side.scrub.scrubPass(ctx)
}

// scrubber runs passes until the engine closes.
func (s *scrubState) scrubber() {
	defer s.life.scrubberExited()
	wait := s.opts.ScrubDelay
	for {
		t := time.NewTimer(wait)
		select {
		case <-s.life.stopping():
			t.Stop()
			return
		case <-t.C:
		}
		if err := s.scrubPass(context.Background()); errors.Is(err, errScrubStopped) {
			return
		}
		wait = s.opts.ScrubInterval
	}
}

// scrubPass scrubs every sealed segment once.
func (s *scrubState) scrubPass(ctx context.Context) error {
	s.run.Lock()
	defer s.run.Unlock()
	segs := s.log.Segments()
	s.dmg.dropBefore(s.log.Start())
	p := pacer{rate: s.opts.ScrubRate, start: time.Now(), ctx: ctx, done: s.life.stopping()}
	if err := s.scrubCaches(&p); err != nil {
		return err
	}
	var lastErr string
	for _, seg := range segs[:len(segs)-1] {
		res, err := s.log.Scrub(seg.Base, p.pace)
		s.stats.ScrubBytes.Add(uint64(res.Bytes))
		switch {
		case errors.Is(err, errScrubStopped), ctx.Err() != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		case errors.Is(err, commitlog.ErrOutOfRange), errors.Is(err, commitlog.ErrClosed):
			continue // deleted by retention meanwhile, or the log closed
		case err != nil:
			lastErr = err.Error()
			s.opts.Logger.Warn("scrub could not read a segment; it is tried again at the next pass", "segment", seg.Name, "err", err)
			continue
		}
		if len(res.Damage) > 0 {
			s.opts.Logger.Error("scrub found damage in a sealed log segment", "segment", res.Segment, "ranges", len(res.Damage),
				"first_pos", res.Damage[0].Pos, "reason", res.Damage[0].Reason)
		}
		s.dmg.setRanges(res.Segment, res.Damage)
	}
	s.mu.Lock()
	s.passes++
	s.lastPass = s.clock.Now()
	s.lastErr = lastErr
	s.mu.Unlock()
	return nil
}

// pacer holds a scrub pass to its rate: n bytes may be read once
// n/rate seconds of the pass have passed, less one read's worth (the
// first read is not held).
type pacer struct {
	rate  int64
	start time.Time
	read  int64
	ctx   context.Context
	done  <-chan struct{}
}

func (p *pacer) pace(n int64) error {
	if p.rate <= 0 {
		return nil // scrub disabled: ScrubNow runs unpaced
	}
	due := p.start.Add(time.Duration(float64(p.read) / float64(p.rate) * float64(time.Second)))
	p.read += n
	if d := time.Until(due); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-p.ctx.Done():
			return p.ctx.Err()
		case <-p.done:
			return errScrubStopped
		}
	}
	return nil
}

// scrubCaches checks whole, at the scrub's pace, the cache runs recovery
// opened from their tails without reading them (keyindex.Index.Verify):
// a start reads only what it needs, and the scrub reads the rest. Damage
// is logged; the index leaves a mark that makes the next start rebuild it
// from the log (invariant E13). It returns the pacer's error when the
// engine stops or ctx ends.
func (s *scrubState) scrubCaches(p *pacer) error {
	if s.keys == nil {
		return nil
	}
	err := s.keys.Verify(func(n int) error { return p.pace(int64(n)) })
	switch {
	case err == nil, errors.Is(err, keyindex.ErrClosed):
		return nil
	case errors.Is(err, errScrubStopped), p.ctx.Err() != nil:
		return err
	case errors.Is(err, keyindex.ErrCorrupt):
		s.opts.Logger.Error("scrub found damage in the key index; the next start rebuilds it from the log", "err", err)
	default:
		s.opts.Logger.Warn("scrub could not check the key index; it is tried again at the next pass", "err", err)
	}
	return nil
}

// setKeys gives the scrub the key index recovery opened; Open calls it
// before the scrubber starts.
func (s *scrubState) setKeys(x *keyindex.Index) { s.keys = x }
