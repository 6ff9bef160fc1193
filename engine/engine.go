// Package engine is the broker core of hourglass on one machine: it accepts
// messages with a delivery time, keeps them durable in the commit log, and
// makes each one visible in its topic queue's index when it falls due.
//
// # Data flow
//
// Send validates, appends a message record to the commit log (group commit;
// in sync mode the call returns after fdatasync), then registers the timer:
// always in the on-disk timer index (timerstore: sorted run files, one
// written a checkpoint, read a time bucket at a time), and also in the
// in-memory timing wheel when its bucket is in the near window. The dispatch
// loop advances the wheel up to stageAhead ahead of the clock; expired
// timers are staged in a dispatch heap per topic ordered by due time, from
// which batches of what is due leave at the configured rate: each batch is
// one fire record in the commit log, and after it is durable the batch's
// entries are appended to the queue indexes and consumers are woken. The
// body is never rewritten.
//
// # Invariants
//
// The invariants this package keeps are listed once, in
// docs/architecture.md, "Invariants" (E1 to E16), and cited by name where
// the code depends on one: among them the log is the truth and every other
// file a cache (E1), a checkpoint and an append+apply exclude each other
// (E2), and a message becomes visible at most once per fire record (E4).
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
	"math"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/keyindex"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/queueindex"
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
	ckpt  *checkpointer   // writes the checkpoints; see checkpointer
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
	}
	e.life = newLifecycle(&e.mu, e.stats, opts.Logger)
	e.ckpt = newCheckpointer(&e.opts, e.life)
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
	if err := e.ids.init(id); err != nil {
		return nil, err
	}
	e.clog, err = commitlog.Open(commitlog.Options{
		FS:             e.opts.FS,
		Dir:            path.Join(opts.Dir, "log"),
		SegmentBytes:   opts.SegmentBytes,
		Flush:          opts.Flush.logPolicy(),
		FlushInterval:  opts.FlushInterval,
		MaxRecordBytes: logRecordBound,
		NoPreallocate:  !opts.Preallocate,
		OnSync: func(d time.Duration, records, bytes int) {
			e.stats.FsyncSeconds.Observe(d.Seconds())
			e.ckpt.logSynced(bytes)
		},
		// A failed preallocation fails nothing: the log creates its next
		// segment as it would without one. It is worth a line.
		OnPreallocate: func(d time.Duration, err error) {
			if err != nil {
				e.stats.PreallocErrors.Add(1)
				e.opts.Logger.Warn("commit log: preallocating the next segment failed; segments are created as they are needed", "err", err, "took", d)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("engine: open commit log: %w", err)
	}
	if err := e.startParts(); err != nil {
		e.disp.closeStore()
		e.clog.Close()
		return nil, fmt.Errorf("engine: recovery: %w", err)
	}
	took := time.Since(start)
	e.stats.RecoverySeconds.Store(math.Float64bits(took.Seconds()))
	e.opts.Logger.Info("engine recovered", "dir", opts.Dir, "took", took,
		"log_start", e.clog.Start(), "log_head", e.clog.Head(),
		"pending", e.stats.Pending.Load(), "replayed", e.stats.Replayed.Load(), "replayed_bytes", e.stats.ReplayedBytes.Load())
	e.life.setLock(lock)
	ok = true
	var scrubber func()
	if e.opts.ScrubRate > 0 {
		scrubber = e.side.scrub.scrubber
	}
	e.life.startBackground(e.loop, e.ckpt.run, scrubber)
	return e, nil
}

// startParts makes the parts, each given what it uses and the parts below
// it (docs/architecture.md, "The engine's parts"), has recovery bring them
// to the state the checkpoint and the log describe, and then gives the
// parts that read the key index recovery opened their last pieces. The
// dispatcher exists even when it fails, for Open to close its store.
func (e *Engine) startParts() error {
	e.cat = newCatalog(&e.mu, e.gate, &e.opts, e.clog, e.life)
	e.segs = newSegTable(e.clog)
	e.ovl = newOverlayState(e.segs)
	e.clock = newBrokerClock(&e.opts, e.stats)
	e.side.scrub.init(&e.opts, e.clog, e.clock, e.stats, e.life, &e.side.dmg)
	e.disp = newDispatcher(&e.mu, &e.opts, e.clock, e.clog, e.stats, e.life, e.segs, e.ovl)
	e.cons = newConsumers(&e.mu, e.gate, &e.opts, e.clock, e.clog, e.stats, e.ids, e.life, e.cat, e.disp, e.segs, &e.side.dmg)
	r := newRecovery(&e.mu, &e.opts, e.clock, e.clog, e.stats, e.ids, &e.keys, e.side, e.cat, e.cons, e.disp, e.segs, e.ovl,
		replayApply{message: e.applyMessageLocked, fire: e.applyFireLocked, change: e.applyChangeLocked})
	if err := r.run(); err != nil {
		return err
	}
	r.startRecount()
	e.side.scrub.setKeys(e.keys)
	e.side.dedup.init(&e.mu, &e.opts, e.keys, e.ids, e.stats, e.clog, e.segs, e.ovl, e.disp)
	e.ckpt.init(&e.mu, e.gate, e.clock, e.clog, e.stats, e.ids, e.keys, &e.side.health, e.cat, e.cons, e.disp, e.segs, e.ovl)
	return nil
}

// initSeals sets up the sealers of IDs and receipts and the nonce
// sequence. Nonces start at a random point in every process: after a power
// loss reuses a log position, the new record's nonce differs from the lost
// one's (with probability 1 - 2^-64), so the lost message's ID does not
// verify against it.
func (ids *idents) init(id *identity) error {
	var err error
	if ids.seal, err = message.NewSealer(id.key[:]); err != nil {
		return err
	}
	var b [message.SealKeySize + 8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	if ids.receipts, err = message.NewSealer(b[:message.SealKeySize]); err != nil {
		return err
	}
	ids.nonce.Store(binary.LittleEndian.Uint64(b[message.SealKeySize:]))
	ids.incarn = id.dirTag()
	return nil
}

// Close stops dispatching, writes a final checkpoint and closes the files.
// It is idempotent. Sends that race with Close fail with Unavailable.
func (e *Engine) Close() error {
	e.mu.Lock()
	first := e.life.closeLocked()
	e.mu.Unlock()
	if !first {
		return nil
	}
	e.life.stopAndWait()
	<-e.side.fc.ready // a deferred count stops at its next read
	err := e.checkpoint()
	e.mu.Lock()
	for t := range e.cat.topicsLocked() {
		for _, q := range t.queues {
			q.Close()
		}
	}
	if e.keys != nil {
		e.keys.Close()
	}
	e.disp.closeStore()
	e.mu.Unlock()
	if cerr := e.clog.Close(); err == nil {
		err = cerr
	}
	e.life.releaseLock() // last: nothing of this engine touches the directory after it
	return err
}

// VisibleSignal returns a channel that is closed the next time messages
// become visible; long-polling consumers wait on it.
func (e *Engine) VisibleSignal() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.life.visibleLocked()
}
