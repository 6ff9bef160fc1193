package engine

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/vfs"
)

// FlushPolicy says when a write is acknowledged: after fdatasync
// (FlushSync, the zero value) or after the write, with fdatasync every
// FlushInterval (FlushAsync). It is the engine's own type, so that the
// broker, the CLI and library users spell the policy without importing
// the commit log; the engine maps it onto the log's (logPolicy).
type FlushPolicy uint8

// The flush policies.
const (
	// FlushSync acknowledges a write once it is durable (fdatasync).
	FlushSync FlushPolicy = iota
	// FlushAsync acknowledges a write once it is in the page cache; a
	// power loss may lose up to one FlushInterval of acknowledged writes,
	// a process crash loses none.
	FlushAsync
)

// String returns "sync" or "async", the spelling ParseFlushPolicy reads.
func (p FlushPolicy) String() string {
	switch p {
	case FlushSync:
		return "sync"
	case FlushAsync:
		return "async"
	}
	return fmt.Sprintf("FlushPolicy(%d)", uint8(p))
}

// ParseFlushPolicy reads "sync" or "async"; anything else is an error that
// names the two.
func ParseFlushPolicy(s string) (FlushPolicy, error) {
	switch s {
	case "sync":
		return FlushSync, nil
	case "async":
		return FlushAsync, nil
	}
	return 0, fmt.Errorf("flush policy %q is not sync or async", s)
}

// logPolicy is p as the commit log spells it (Options.validate refused
// any other value before).
func (p FlushPolicy) logPolicy() commitlog.FlushPolicy {
	if p == FlushAsync {
		return commitlog.FlushAsync
	}
	return commitlog.FlushSync
}

// DefaultMaxBatch is MaxBatch when it is not set.
const DefaultMaxBatch = 1000

// DefaultMaxGroups is MaxGroups when it is not set.
const DefaultMaxGroups = 10000

// Options configure an Engine. The zero value of every field means its
// default, so NewOptions() and Options{Dir: d} behave the same.
type Options struct {
	// Dir is the data directory. Required.
	Dir string
	// FS is the filesystem; default vfs.OS. Tests pass vfs.NewMem().
	FS vfs.FS
	// Clock is the time source; default the system clock.
	Clock clock.Clock
	// Logger receives structured logs; default slog.Default().
	Logger *slog.Logger

	// Flush is the flush policy: FlushSync (default) acknowledges a send
	// after fdatasync; FlushAsync acknowledges after the write and syncs
	// every FlushInterval, so a power loss may lose up to one interval of
	// acknowledged sends. A process crash (kill -9) loses nothing under
	// either policy: the data is in the page cache.
	Flush FlushPolicy
	// FlushInterval is the async sync period; default 10ms.
	FlushInterval time.Duration
	// SegmentBytes is the commit-log segment size; default 64 MiB.
	SegmentBytes int64
	// Preallocate writes the commit log's segments over preallocated
	// zeros (commitlog's preallocation): an append then does not grow its
	// file, which spares its fdatasync a journal commit on ext4. It costs
	// up to two segments of disk beyond the records (the active segment is
	// SegmentBytes long from its start, and a spare of that size waits
	// beside it), and on a full disk sends then fail only once that space
	// is used. False, the zero value and NewOptions's, creates segments as
	// they are needed, for embedded use that counts its disk; the broker
	// turns it on (-preallocate).
	Preallocate bool

	// Limits bound message inputs (body size, maximum delay, delay levels).
	Limits message.Limits
	// DefaultQueues is the queue count of an auto-created topic; default 4.
	DefaultQueues int
	// MaxQueues bounds the queues of one topic; default 256.
	MaxQueues int
	// MaxTopics bounds the number of topics; default 10,000. Dead-letter
	// topics do not count: there is at most one a group, and MaxGroups
	// bounds those, so a group's dead letters always have somewhere to go.
	MaxTopics int
	// MaxGroups bounds the number of consumer groups, of all topics
	// together; default 10,000. Every checkpoint captures every group's
	// progress under the engine's lock, so their number sets that pause.
	MaxGroups int
	// NoAutoCreate makes sends to an unknown topic fail instead of creating it.
	NoAutoCreate bool
	// MaxBatch bounds the messages of one SendBatch; default
	// DefaultMaxBatch. Protocol adapters are given the same bound by the
	// composition root, so that they refuse a larger batch in their own
	// protocol's terms before it reaches the engine.
	MaxBatch int

	// BucketWidth is the span of one on-disk timer bucket; default 1 minute.
	// It must not change for an existing data directory.
	BucketWidth time.Duration
	// Lookahead is how long before its start a bucket is loaded into the
	// in-memory wheel; default half a bucket width.
	Lookahead time.Duration
	// DispatchRate bounds how many due messages per second become visible,
	// so that a herd (or what fell due while the broker was down) reaches
	// consumers at a bounded rate; default 500,000. Negative means unbounded.
	// It is a token bucket 100 ms deep (at least DispatchBatch): after a
	// quieter spell that many fire at once, so a herd of up to a tenth of
	// the rate is not spread out; any span of t ms fires at most
	// rate*(t+100ms) messages.
	DispatchRate int
	// DispatchBatch bounds the messages made visible by one fire record;
	// default 4,096, at most 1,048,576.
	DispatchBatch int

	// CheckpointInterval is how often the checkpoint is written; it bounds
	// the log replayed at recovery. Default 5s.
	CheckpointInterval time.Duration
	// CheckpointBytes asks for a checkpoint as soon as this many bytes of
	// log were written since the last one, as well as every
	// CheckpointInterval: it bounds the log replayed at recovery after a
	// crash whatever the send rate. Default 16 MiB; negative means only
	// the interval.
	CheckpointBytes int64
	// Retention is how long a segment whose messages are all visible (and
	// none pending) is kept for consumers before deletion; default 72h.
	Retention time.Duration
	// CompactMaxPending is the most pending messages retention copies to
	// the head of the log to free an old segment they alone keep;
	// default 10,000. Negative disables compaction.
	CompactMaxPending int
	// MaxUnackedSpan bounds how far past a group queue's oldest unfinished
	// message Receive hands out messages; default 65,536. It bounds the
	// group's per-queue state behind a stuck message (RocketMQ bounds its
	// consume-offset span the same way).
	MaxUnackedSpan int
	// ClockJumpThreshold is the wall-clock step, relative to the monotonic
	// clock, that is logged and counted as a jump; default 1s.
	ClockJumpThreshold time.Duration
	// ScrubRate bounds the background scrub's reads of sealed log
	// segments, in bytes per second (scrub.go); default 8 MiB/s.
	// Negative turns the background scrub off.
	ScrubRate int64
	// ScrubInterval is the pause between the end of a scrub pass and the
	// start of the next; default 1 h.
	ScrubInterval time.Duration
	// ScrubDelay is the wait between Open and the first scrub pass;
	// default a minute, which keeps a library user's short-lived engines
	// (and this package's tests) from scrubbing. `serve` sets it to a
	// second: a broker restarted on a damaged log should say so soon.
	ScrubDelay time.Duration

	// Dedup is the idempotent-send policy of every topic not in
	// DedupTopics (dedup.go); the zero value is a 24 h window.
	Dedup DedupPolicy
	// DedupTopics overrides Dedup per topic name.
	DedupTopics map[string]DedupPolicy

	// recountGate, when not nil, holds the forecast's count after Open
	// (forecastrecount.go) until it is closed: tests that count the reads
	// of the timer index use it to keep the count's reads out.
	recountGate chan struct{}
}

// NewOptions returns the defaults for dir.
func NewOptions(dir string) Options {
	o := Options{Dir: dir}
	o.setDefaults()
	return o
}

func (o *Options) setDefaults() {
	if o.FS == nil {
		o.FS = vfs.OS
	}
	if o.Clock == nil {
		o.Clock = clock.NewReal()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = 10 * time.Millisecond
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = 64 << 20
	}
	o.Limits = o.Limits.Defaults()
	if o.DefaultQueues == 0 {
		o.DefaultQueues = 4
	}
	if o.MaxQueues == 0 {
		o.MaxQueues = 256
	}
	if o.MaxTopics == 0 {
		o.MaxTopics = 10000
	}
	if o.MaxGroups == 0 {
		o.MaxGroups = DefaultMaxGroups
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.BucketWidth == 0 {
		o.BucketWidth = time.Minute
	}
	if o.Lookahead == 0 {
		o.Lookahead = o.BucketWidth / 2
	}
	if o.DispatchRate == 0 {
		o.DispatchRate = 500_000
	}
	if o.DispatchBatch == 0 {
		o.DispatchBatch = 4096
	}
	if o.CheckpointInterval == 0 {
		o.CheckpointInterval = 5 * time.Second
	}
	if o.CheckpointBytes == 0 {
		o.CheckpointBytes = DefaultCheckpointBytes
	}
	if o.Retention == 0 {
		o.Retention = 72 * time.Hour
	}
	if o.CompactMaxPending == 0 {
		o.CompactMaxPending = DefaultCompactMaxPending
	}
	if o.MaxUnackedSpan == 0 {
		o.MaxUnackedSpan = 1 << 16
	}
	if o.ClockJumpThreshold == 0 {
		o.ClockJumpThreshold = time.Second
	}
	if o.ScrubRate == 0 {
		o.ScrubRate = DefaultScrubRate
	}
	if o.ScrubInterval == 0 {
		o.ScrubInterval = DefaultScrubInterval
	}
	if o.ScrubDelay == 0 {
		o.ScrubDelay = DefaultScrubDelay
	}
	if o.Dedup.Window == 0 {
		o.Dedup.Window = DefaultDedupWindow
	}
}

func (o *Options) validate() error {
	switch {
	case o.Dir == "":
		return fmt.Errorf("engine: Options.Dir is required")
	case o.Flush != FlushSync && o.Flush != FlushAsync:
		return fmt.Errorf("engine: Flush %v is not FlushSync or FlushAsync", o.Flush)
	case o.BucketWidth < time.Millisecond:
		return fmt.Errorf("engine: BucketWidth %v is below 1ms", o.BucketWidth)
	case o.DefaultQueues < 1 || o.DefaultQueues > o.MaxQueues:
		return fmt.Errorf("engine: DefaultQueues %d is not in [1, %d]", o.DefaultQueues, o.MaxQueues)
	case o.MaxQueues > 65535:
		return fmt.Errorf("engine: MaxQueues %d is above 65535", o.MaxQueues)
	case o.ScrubInterval < 0:
		return fmt.Errorf("engine: ScrubInterval %v is negative", o.ScrubInterval)
	case o.ScrubDelay < 0:
		return fmt.Errorf("engine: ScrubDelay %v is negative", o.ScrubDelay)
	case o.MaxUnackedSpan < 1:
		return fmt.Errorf("engine: MaxUnackedSpan %d must be positive", o.MaxUnackedSpan)
	case o.DispatchBatch < 1 || o.DispatchBatch > maxDispatchBatch:
		return fmt.Errorf("engine: DispatchBatch %d is not in [1, %d]", o.DispatchBatch, maxDispatchBatch)
	case o.Limits.MaxBodyBytes < 0 || o.Limits.MaxDelay < 0:
		return fmt.Errorf("engine: negative limits")
	}
	for i, d := range o.Limits.DelayLevels {
		if d <= 0 || d > o.Limits.MaxDelay {
			return fmt.Errorf("engine: delay level %d is %v; levels must be positive and within the maximum delay %v", i+1, d, o.Limits.MaxDelay)
		}
	}
	return nil
}
