package engine

import (
	"math"
	"sync/atomic"
)

// Histogram is a fixed-bucket histogram safe for concurrent use, shaped
// like a Prometheus histogram so the metrics layer exports it as one.
type Histogram struct {
	// Bounds are the inclusive upper bounds of the buckets, ascending.
	Bounds []float64
	counts []atomic.Uint64 // len(Bounds)+1, the last is +Inf
	sum    atomic.Uint64   // float64 bits
	n      atomic.Uint64
}

// NewHistogram returns a histogram with the given ascending upper bounds.
func NewHistogram(bounds ...float64) *Histogram {
	return &Histogram{Bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe records one value.
func (h *Histogram) Observe(v float64) {
	i := 0
	for i < len(h.Bounds) && v > h.Bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.n.Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Snapshot returns the per-bucket counts (not cumulative; the last is
// +Inf), the count and the sum.
func (h *Histogram) Snapshot() (counts []uint64, n uint64, sum float64) {
	counts = make([]uint64, len(h.counts))
	for i := range h.counts {
		counts[i] = h.counts[i].Load()
	}
	return counts, h.n.Load(), math.Float64frombits(h.sum.Load())
}

// Quantile estimates the q-quantile (0..1) as the upper bound of the
// bucket that holds it; +Inf if it is in the last bucket.
func (h *Histogram) Quantile(q float64) float64 {
	counts, n, _ := h.Snapshot()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	var acc uint64
	for i, c := range counts {
		acc += c
		if acc >= rank {
			if i < len(h.Bounds) {
				return h.Bounds[i]
			}
			return math.Inf(1)
		}
	}
	return math.Inf(1)
}

// Stats is the engine's instrumentation, read by the metrics exporter.
// Counters only grow; gauges move both ways.
type Stats struct {
	Sent, Fired, Cancelled, Rescheduled atomic.Uint64
	// Pending is a gauge: messages accepted and not yet visible or cancelled.
	Pending atomic.Int64
	// Lateness observes visible time minus due time, in seconds.
	Lateness *Histogram
	// FsyncSeconds observes the duration of each commit-log fdatasync.
	FsyncSeconds *Histogram
	// CheckpointSeconds observes the duration of each checkpoint.
	CheckpointSeconds *Histogram
	// CheckpointGateWaitSeconds observes how long each checkpoint waited
	// for the appends in flight to apply before its capture (new appends
	// wait meanwhile), and CheckpointCaptureSeconds how long the capture
	// then held mu (appends may run meanwhile, their apply waits).
	CheckpointGateWaitSeconds, CheckpointCaptureSeconds *Histogram
	// RecoverySeconds is the float64 bits of the last recovery's duration.
	RecoverySeconds atomic.Uint64
	// Replayed is the number of log records replayed at the last
	// recovery, and ReplayedBytes the log they took: everything written
	// after the last checkpoint (Options.CheckpointBytes bounds it).
	Replayed, ReplayedBytes                  atomic.Uint64
	ClockJumps, Checkpoints, SegmentsDeleted atomic.Uint64
	FireErrors, TimerLoadErrors              atomic.Uint64
	CheckpointErrors                         atomic.Uint64
	// ReadErrors counts message reads that failed with an I/O error while
	// delivering; the messages stayed in place.
	ReadErrors atomic.Uint64
	// PreallocErrors counts failed preallocations of the commit log's
	// next segment (Options.Preallocate): nothing failed with them, but
	// segments are then created as needed, and a full disk is near.
	PreallocErrors atomic.Uint64
	// RetentionSkipped counts messages a group was about to receive whose
	// records retention had already removed: skipped, not delivered.
	RetentionSkipped atomic.Uint64
	// Failed is set when the engine stopped after a storage failure.
	Failed atomic.Bool
	// CacheRebuilds counts caches found damaged at recovery and rebuilt
	// from the log.
	CacheRebuilds atomic.Uint64
	// Compacted counts pending messages moved out of old segments.
	Compacted atomic.Uint64
	// DedupHits counts sends answered as repeats of an earlier dedup ID;
	// DedupConflicts those refused as conflicting with it (dedup.go).
	DedupHits, DedupConflicts atomic.Uint64
	// Expired counts messages dead-lettered because their deadline passed
	// before delivery; WindowMissed those made visible after their
	// tolerance window ended (expire.go).
	Expired, WindowMissed atomic.Uint64
	// ScrubBytes counts the log bytes the scrub read (scrub.go).
	ScrubBytes atomic.Uint64
}

// LatenessBounds are the lateness histogram's buckets, in seconds: fine
// below 10 ms, where the published bound lives.
var LatenessBounds = []float64{0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

func newStats() *Stats {
	return &Stats{
		Lateness:                  NewHistogram(LatenessBounds...),
		FsyncSeconds:              NewHistogram(0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
		CheckpointSeconds:         NewHistogram(0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60),
		CheckpointGateWaitSeconds: NewHistogram(0.0001, 0.001, 0.002, 0.005, 0.01, 0.05, 0.1, 1),
		CheckpointCaptureSeconds:  NewHistogram(0.0001, 0.001, 0.002, 0.005, 0.01, 0.05, 0.1, 1),
	}
}

// Stats returns the engine's live instrumentation.
func (e *Engine) Stats() *Stats { return e.stats }

// RecoveryDuration returns how long the last Open took to recover, in seconds.
func (s *Stats) RecoveryDuration() float64 { return math.Float64frombits(s.RecoverySeconds.Load()) }
