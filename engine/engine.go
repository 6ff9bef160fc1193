// Package engine is the broker core of hourglass on one machine: it accepts
// messages with a delivery time, keeps them durable in the commit log, and
// makes each one visible in its topic queue's index when it falls due.
//
// # Data flow
//
// Send validates, appends a message record to the commit log (group commit;
// in sync mode the call returns after fdatasync), then registers the timer:
// always in the on-disk timer index (timerstore, one file per time bucket),
// and also in the in-memory timing wheel when its bucket is in the near
// window. The dispatch loop advances the wheel up to stageAhead ahead of
// the clock; expired timers are staged in a dispatch heap per topic ordered
// by due time, from which batches of what is due leave at the configured rate:
// each batch is one fire record in the commit log, and after it is durable
// the batch's entries are appended to the queue indexes and consumers are
// woken. The body is never rewritten.
//
// # Durability invariants
//
//   - The log is the truth: the timer buckets, queue indexes and key index
//     are caches. A checkpoint records the log position L up to which they
//     are complete and synced, the fire frontier F (every timer due at or
//     before F, registered before L, is visible; never past the broker
//     clock, which recovery raises to F), and the small in-memory
//     state (topics, reschedule/cancel overlay, per-segment pending counts).
//   - Recovery truncates the caches (queue indexes, key index and timer
//     buckets) to the lengths the checkpoint recorded, replays the log from
//     L, and loads timer buckets from F on. Messages due after F may already
//     be visible (a herd cut by the dispatch rate): recovery reads each queue
//     index back to F and marks them fired. A message fires at most once per
//     fire record: fire records replayed after L mark what is already
//     visible, and overlay entries remember fired, cancelled or moved timers
//     so stale bucket entries are skipped.
//   - Checkpoint and every append+apply exclude each other through gate, so
//     a checkpoint never records L beyond a record whose effect is not yet
//     in the caches. The checkpoint releases gate once it has read L and
//     captures the rest under mu, which every apply needs.
//
// # Locks
//
// gate.serial (one checkpoint at a time) before gate (RWMutex) before mu
// (Mutex). Appenders hold gate shared from before their append
// until their effect is applied under mu; the checkpoint holds gate
// exclusively while it captures state. Methods named ...Locked expect mu
// held.
package engine

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/keyindex"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/queueindex"
	"github.com/hourglass-mq/hourglass/timerstore"
	"github.com/hourglass-mq/hourglass/timewheel"
)

// timerRef is what a wheel timer carries. kind says what the timer is
// for; message timers use pos, topic and queue, lease and retry timers use
// group, queue, offset and seq.
type timerRef struct {
	pos    uint64
	due    int64
	topic  uint32
	queue  uint16
	kind   uint8
	seq    uint32
	group  uint32
	offset uint64
	// windowed marks a message timer with a tolerance window (window.go).
	windowed bool
}

// Kinds of wheel timers.
const (
	refMessage uint8 = iota // a message falls due
	refLease                // a receive lease ends unacknowledged
	refRetry                // a redelivery backoff ends
)

type wheelTimer = timewheel.Timer[timerRef]

// overlayEntry remembers a message whose timer no longer matches its
// record: rescheduled, cancelled or already fired after a reschedule. It is
// kept while the message's record is retained, so that stale bucket entries
// are skipped and Inspect tells the truth.
type overlayEntry struct {
	Due       int64 // effective due time
	Cancelled bool
	Fired     bool
	Visible   int64 // when it became visible, if Fired
	// Changing is set while a cancel or reschedule of the message is
	// being written (control.go: from holdLocked until applyChangeLocked
	// or unholdLocked). No timer of the message may be scheduled then, and
	// no other change may start: never journaled.
	Changing bool
}

// topic is one topic and its queue indexes.
type topic struct {
	id     uint32
	name   string
	fifo   bool
	queues []*queueindex.Index
	rr     atomic.Uint32 // round robin for messages without key or group
	// Counters, under the engine's mu. pending survives restarts through
	// the checkpoint; the others count since the process started.
	pending                int64
	sent, fired, cancelled uint64
}

// Engine is the broker core. Its methods are safe for concurrent use.
type Engine struct {
	opts  Options
	clog  *commitlog.Log
	stats *Stats
	// clock is the broker clock: wall-clock time that never runs
	// backwards, across restarts too (recovery raises it to the durable
	// high-water mark before anything reads it).
	clock *clock.Broker
	ids   *idents         // seals IDs and receipts; immutable after Open
	keys  *keyindex.Index // hash(topic, key) -> pos of the latest message; its own lock
	life  *lifecycle      // closing, failure, wake-ups; see lifecycle
	gate  *ckptGate       // appenders against the checkpoint's capture; see ckptGate
	mu    sync.Mutex      // guards the state below
	cat   *catalog        // topics
	cons  *consumers      // consumer groups, leases, dead letters
	ovl   *overlayState   // rescheduled, cancelled, fired-after-reschedule messages
	segs  *segTable       // per-segment accounting and moved messages
	disp  *dispatcher     // timers: wheel, buckets, due heap, rate limit, in-flight fires
	side  *sideIndexes    // dedup claims and the forecast, each with its own lock
}

// idents seals message IDs and lease receipts. seal uses the directory's
// secret; receipts uses a key drawn per process, so that a receipt of an
// earlier process (leases are not durable) never matches.
type idents struct {
	incarn   uint32 // fingerprint of the directory's identity, in the checkpoint
	seal     *message.Sealer
	receipts *message.Sealer
	nonce    atomic.Uint64 // the last nonce given to a message
}

// lifecycle is the engine's run state. closed, failed and visibleCh are
// guarded by Engine.mu; the channels are made once at Open.
type lifecycle struct {
	closed    bool
	failed    error         // the fatal storage failure, if any (see fail.go)
	failedCh  chan struct{} // closed when failed is set
	visibleCh chan struct{} // closed and replaced when messages become visible
	kick      chan struct{} // wakes the dispatch loop
	ckptNow   chan struct{} // asks the checkpointer to run now
	done      chan struct{} // closed by Close
	loopDone  chan struct{}
	ckptDone  chan struct{}
	scrubDone chan struct{} // closed when the scrubber ends (at once if it is off)
	lock      io.Closer     // the data directory's lock, released by Close
}

// catalog holds the topics. Guarded by Engine.mu, except createMu, which
// serialises creation (of topics and groups) and is taken before gate, and
// byName, which is read without a lock.
type catalog struct {
	createMu sync.Mutex
	// byName holds the topics by name. It is written under mu
	// (installTopicLocked) and read without it, so that a send finds its
	// topic without queueing for the engine's lock a second time. A topic
	// is never removed: a topic found stays the topic of its name.
	byName      sync.Map // string -> *topic
	topicsByID  map[uint32]*topic
	nextTopicID uint32
}

// topic returns the topic called name, or nil; no lock needed.
func (c *catalog) topic(name string) *topic {
	if v, ok := c.byName.Load(name); ok {
		return v.(*topic)
	}
	return nil
}

// consumers holds the consumer groups and what they wait for. Guarded by
// Engine.mu, except that groups is read without it.
type consumers struct {
	// groups holds the groups by topic and name (groupKey). It is written
	// under mu (applyGroupLocked) and read without it, so that a receive
	// finds its group without queueing for the engine's lock once more. A
	// group is never removed: a group found stays the group of its name.
	groups          sync.Map // groupKey -> *group
	groupsByID      map[uint32]*group
	nextGroupID     uint32
	leaseSeq        uint32
	deadLetters     []deadLetter      // waiting to be moved by the loop
	deadLetterAfter int64             // no dead-lettering before this (after a failure)
	forGroup        map[uint64]uint32 // messages for one group falling due soon: position -> group (forgroup.go)
}

// group returns the group of topic and name, or nil; no lock needed.
func (c *consumers) group(topic, name string) *group {
	if v, ok := c.groups.Load(groupKey(topic, name)); ok {
		return v.(*group)
	}
	return nil
}

// overlayState remembers messages whose timer no longer matches their
// record, and journals every change (overlay.go). Guarded by Engine.mu.
type overlayState struct {
	entries map[uint64]*overlayEntry
	journal *overlayJournal
}

// segTable is the per-segment accounting retention decides by, and the
// map of moved messages (compact.go). Guarded by Engine.mu.
type segTable struct {
	pending map[uint64]int64  // segment base -> pending messages in it
	last    map[uint64]int64  // segment base -> latest visible time of its messages
	reloc   map[uint64]uint64 // moved messages: identity -> current copy
	bases   []uint64          // cached segment bases, ascending
	head    uint64            // log head when bases was read
}

// dispatcher owns everything between a timer and its fire record: the
// on-disk buckets, the in-memory wheel of the near window, the heap of due
// messages, the rate limiter and the batch being fired. Guarded by
// Engine.mu.
type dispatcher struct {
	timers      *timerstore.Store
	spillOff    bool                       // recovery stopped writing timers out (spillTimers)
	wheel       *timewheel.Wheel[timerRef] // message timers, expired up to stageAhead early
	leases      *timewheel.Wheel[timerRef] // lease and retry timers, expired at their time
	near        nearIndex                  // message timers in the wheel or staged, by pos (dueSet, near.go)
	taken       map[uint64]struct{}        // positions taken for the fire record being written (dueSet)
	free        []*wheelTimer              // recycled timers
	loadedUntil int64                      // buckets starting before this are in the wheel
	lastAdvance int64                      // message wheel time: every timer due <= this has left it
	advancing   bool                       // the last AdvanceN of the message wheel stopped on its budget
	leaseAt     int64                      // lease wheel time, never past the broker clock
	leasing     bool                       // the last AdvanceN of the lease wheel stopped on its budget
	due         dueSet                     // staged and due, waiting for a fire record, per topic
	load        *bucketLoad                // the bucket being loaded, if any (dispatch.go)
	loadRetryAt int64                      // no bucket load before this (after a read error)
	fireRetryAt int64                      // no fire before this (after a failed fire record)
	fireBackoff int64                      // ms, doubled by each failed fire in a row, 0 after one that succeeds
	inflight    []fireEntry                // in the fire record being written
	fires       sync.WaitGroup             // the fire in flight, if any (not under mu)
	batchRamp   int                        // the next fire batch's bound since the dispatcher was idle (batchSizeLocked)
	tokens      float64                    // dispatch rate limiter
	tokensAt    int64
	// Recovery filter: entries registered before recL and due at or
	// before recF are visible already; firedSince lists positions made
	// visible by fire records replayed after recL.
	recL         uint64
	recF         int64
	firedSince   map[uint64]bool
	firedSinceTo int64
	replayHWM    int64 // latest broker time a replayed record carries
}

// logRecordBound is the commit log's bound on a record: its format limit.
// Every record is bounded before it reaches the log: a message by the
// limits its send was checked against, the engine's own records by
// construction (at most DispatchBatch fire entries or MaxReceive progress
// items), a compaction's or a dead letter's copy by the message it copies,
// which may predate a lower limit. A bound taken from today's limits
// refused such copies, and the engine's fire records once the body limit
// was small.
const logRecordBound = commitlog.MaxPayloadLimit

// Open opens or creates the data directory, recovers, and starts the
// dispatch loop and the checkpointer.
func Open(opts Options) (*Engine, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	e := &Engine{
		opts:  opts,
		stats: newStats(),
		ids:   &idents{},
		gate:  &ckptGate{},
		side:  &sideIndexes{},
		life: &lifecycle{
			visibleCh: make(chan struct{}),
			kick:      make(chan struct{}, 1),
			ckptNow:   make(chan struct{}, 1),
			failedCh:  make(chan struct{}),
			done:      make(chan struct{}),
			loopDone:  make(chan struct{}),
			ckptDone:  make(chan struct{}),
			scrubDone: make(chan struct{}),
		},
		cat:  &catalog{topicsByID: map[uint32]*topic{}, nextTopicID: 1},
		cons: &consumers{groupsByID: map[uint32]*group{}, nextGroupID: 1},
		ovl:  &overlayState{entries: map[uint64]*overlayEntry{}},
		segs: &segTable{pending: map[uint64]int64{}, last: map[uint64]int64{}, reloc: map[uint64]uint64{}},
		disp: &dispatcher{near: newNearIndex(), taken: map[uint64]struct{}{}, firedSince: map[uint64]bool{}},
	}
	// The checkpoint syncs these directories, so they exist from the start.
	if err := e.opts.FS.MkdirAll(path.Join(opts.Dir, "queues")); err != nil {
		return nil, err
	}
	lock, err := lockDir(e.opts.FS, opts.Dir)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			lock.Close()
		}
	}()
	id, err := loadIdentity(e.opts.FS, opts.Dir)
	if err != nil {
		return nil, err
	}
	if err := e.initSeals(id); err != nil {
		return nil, err
	}
	e.clog, err = commitlog.Open(commitlog.Options{
		FS:             e.opts.FS,
		Dir:            path.Join(opts.Dir, "log"),
		SegmentBytes:   opts.SegmentBytes,
		Flush:          opts.Flush,
		FlushInterval:  opts.FlushInterval,
		MaxRecordBytes: logRecordBound,
		OnSync: func(d time.Duration, records, bytes int) {
			e.stats.FsyncSeconds.Observe(d.Seconds())
		},
	})
	if err != nil {
		return nil, fmt.Errorf("engine: open commit log: %w", err)
	}
	e.initClock()
	if err := e.recover(); err != nil {
		if e.disp.timers != nil {
			e.disp.timers.Close()
		}
		e.clog.Close()
		return nil, fmt.Errorf("engine: recovery: %w", err)
	}
	took := time.Since(start)
	e.stats.RecoverySeconds.Store(math.Float64bits(took.Seconds()))
	e.opts.Logger.Info("engine recovered", "dir", opts.Dir, "took", took,
		"log_start", e.clog.Start(), "log_head", e.clog.Head(),
		"pending", e.stats.Pending.Load(), "replayed", e.stats.Replayed.Load())
	e.life.lock, ok = lock, true
	e.startBackground()
	return e, nil
}

// initSeals sets up the sealers of IDs and receipts and the nonce
// sequence. Nonces start at a random point in every process: after a power
// loss reuses a log position, the new record's nonce differs from the lost
// one's (with probability 1 - 2^-64), so the lost message's ID does not
// verify against it.
func (e *Engine) initSeals(id *identity) error {
	var err error
	if e.ids.seal, err = message.NewSealer(id.key[:]); err != nil {
		return err
	}
	var b [message.SealKeySize + 8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	if e.ids.receipts, err = message.NewSealer(b[:message.SealKeySize]); err != nil {
		return err
	}
	e.ids.nonce.Store(binary.LittleEndian.Uint64(b[message.SealKeySize:]))
	e.ids.incarn = id.dirTag()
	return nil
}

// Close stops dispatching, writes a final checkpoint and closes the files.
// It is idempotent. Sends that race with Close fail with Unavailable.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.life.closed {
		e.mu.Unlock()
		return nil
	}
	e.life.closed = true
	e.mu.Unlock()
	close(e.life.done)
	<-e.life.loopDone
	<-e.life.ckptDone
	<-e.life.scrubDone
	err := e.checkpoint()
	e.mu.Lock()
	for _, t := range e.cat.topicsByID {
		for _, q := range t.queues {
			q.Close()
		}
	}
	if e.keys != nil {
		e.keys.Close()
	}
	if e.disp.timers != nil {
		e.disp.timers.Close()
	}
	e.mu.Unlock()
	if cerr := e.clog.Close(); err == nil {
		err = cerr
	}
	e.life.lock.Close() // last: nothing of this engine touches the directory after it
	return err
}

func (e *Engine) unavailableLocked() error {
	if e.life.failed != nil {
		return e.failedErrLocked()
	}
	if e.life.closed {
		return errs.New(errs.Unavailable, "broker is shutting down")
	}
	return nil
}

// kickLoop wakes the dispatch loop without blocking.
func (e *Engine) kickLoop() {
	select {
	case e.life.kick <- struct{}{}:
	default:
	}
}

// notifyVisibleLocked wakes every waiter of VisibleSignal.
func (e *Engine) notifyVisibleLocked() {
	close(e.life.visibleCh)
	e.life.visibleCh = make(chan struct{})
}

// VisibleSignal returns a channel that is closed the next time messages
// become visible; long-polling consumers wait on it.
func (e *Engine) VisibleSignal() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.life.visibleCh
}

// segOfLocked returns the base of the commit-log segment holding pos.
func (e *Engine) segOfLocked(pos uint64) uint64 {
	n := len(e.segs.bases)
	if n == 0 || pos >= e.segs.head {
		// pos may be in a segment created since the cache was made.
		e.segs.head = uint64(e.clog.Head())
		segs := e.clog.Segments()
		e.segs.bases = e.segs.bases[:0]
		for _, s := range segs {
			e.segs.bases = append(e.segs.bases, uint64(s.Base))
		}
		n = len(e.segs.bases)
	}
	lo, hi := 0, n
	for lo < hi {
		m := (lo + hi) / 2
		if e.segs.bases[m] <= pos {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0
	}
	return e.segs.bases[lo-1]
}
