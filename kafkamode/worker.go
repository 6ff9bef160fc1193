package kafkamode

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hourglass-mq/hourglass/engine"
)

// Stats are a worker's counters since it started. All fields are safe to
// read while the worker runs.
type Stats struct {
	RecordsRead     atomic.Int64 // delay records read (first reads only)
	SkippedByMarker atomic.Int64 // delay records read but already resolved by a marker
	// RecordsReread counts delay records the consumer delivered again
	// below the read position (ignored): a rewind, which an abort does
	// not make (rewindAfterAbort).
	RecordsReread    atomic.Int64
	Forwarded        atomic.Int64 // records forwarded in committed transactions
	DeadLettered     atomic.Int64 // records dead-lettered in committed transactions
	Cancelled        atomic.Int64 // pending records cancelled in committed transactions
	Committed        atomic.Int64 // transactions committed
	Aborted          atomic.Int64 // transactions aborted (a rebalance, an error)
	Refused          atomic.Int64 // outputs Kafka refused for good, dead-lettered instead
	Assigned         atomic.Int64 // partitions assigned, summed over rebalances
	Revoked          atomic.Int64 // partitions revoked or lost, summed
	BodiesLoaded     atomic.Int64 // bodies fetched again before their due time
	StateRecordsRead atomic.Int64 // state-topic records read at take-over
	Rejoins          atomic.Int64 // sessions rebuilt after a failed transaction
	// ForwardedWhileEnding counts forwards made, at least once, while the
	// transaction before them ended beside the loop (endBeside).
	ForwardedWhileEnding atomic.Int64
	MaxLatenessMs        atomic.Int64 // largest (forward time - due) seen
	// Lateness is the histogram of (forward time - due time), in seconds,
	// of records forwarded in committed transactions, with the embedded
	// engine's buckets. The forward time is the worker's clock when the
	// transaction began; a read_committed consumer sees the record after
	// the commit, later.
	Lateness     *engine.Histogram
	TxnMicros    atomic.Int64 // time spent in transactions, summed (µs)
	MaxTxnMicros atomic.Int64 // longest transaction (µs)
	// Stages splits the transactions' time into their steps (stages.go).
	Stages Stages
	// SettleFallbacks counts transaction ends after which the coordinator
	// could not be asked whether the end had completed, so the next
	// transaction waited the fixed txnGap instead (settle.go).
	SettleFallbacks atomic.Int64
	// Snapshots counts partition snapshots written in committed
	// transactions; TakeoverRecordsRead the delay records the consumer
	// delivered below each assigned partition's end offset at assignment
	// (what a take-over re-reads; bounded by the snapshot interval's
	// traffic, not by the longest delay); CopiedForward the records
	// copied forward before the delay topic's retention would delete them.
	Snapshots           atomic.Int64
	TakeoverRecordsRead atomic.Int64
	CopiedForward       atomic.Int64
	// CancelsDeferred counts cancels that waited for a copy forward of
	// this worker's to be read back (deferral.go).
	CancelsDeferred atomic.Int64
	// FencedDeparted counts the open transactions of departed workers
	// this worker aborted by fencing their transactional IDs at a
	// take-over (fenceDeparted).
	FencedDeparted atomic.Int64
	// Spilled is the number of pending entries in the local spill files
	// now (a gauge); SpillLoaded counts entries taken back into RAM;
	// SpillErrors counts entries kept in RAM because a spill write failed,
	// plus spill reads that failed (each ends the session).
	Spilled     atomic.Int64
	SpillLoaded atomic.Int64
	SpillErrors atomic.Int64
	// latenessByPartition holds one lateness histogram per delay
	// partition (same buckets and clock as Lateness), created on the
	// partition's first forward; read it with PartitionLateness.
	latenessMu          sync.Mutex
	latenessByPartition map[int32]*engine.Histogram
}

// PartitionLateness returns the lateness histogram of each delay partition
// this worker has forwarded from (since it started). The histograms are
// live: safe to read while the worker runs.
func (s *Stats) PartitionLateness() map[int32]*engine.Histogram {
	s.latenessMu.Lock()
	defer s.latenessMu.Unlock()
	out := make(map[int32]*engine.Histogram, len(s.latenessByPartition))
	for p, h := range s.latenessByPartition {
		out[p] = h
	}
	return out
}

// partitionLateness returns (creating it) the histogram of partition p.
func (s *Stats) partitionLateness(p int32) *engine.Histogram {
	s.latenessMu.Lock()
	defer s.latenessMu.Unlock()
	h := s.latenessByPartition[p]
	if h == nil {
		if s.latenessByPartition == nil {
			s.latenessByPartition = make(map[int32]*engine.Histogram)
		}
		h = engine.NewHistogram(engine.LatenessBounds...)
		s.latenessByPartition[p] = h
	}
	return h
}

// MaxBatchBytes is Kafka's default message.max.bytes (and topic
// max.message.bytes): the largest record batch a broker takes unless
// configured otherwise, and the largest the worker (and its HTTP API)
// produces.
const MaxBatchBytes = 1_048_588

// metadataMaxAge bounds how long a partition added to the delay topic goes
// unassigned (see sessionOptions).
const metadataMaxAge = 10 * time.Second

// Worker forwards due records from the delay topic to their business
// topics. Create it with New and run it with Run.
//
// It is three parts, each owning its fields (TestWorkerPartsOwnTheirFields):
//   - ses, the session: the group membership and the transactional
//     producer (session.go, settle.go, fence.go);
//   - parts, the per-partition progress under its mutex, shared by the
//     group callbacks and the loop (parttable.go);
//   - idx, the index of pending entries, owned by the loop goroutine
//     (loopIndex: loop.go, spillindex.go, deferral.go, query.go, warm.go).
type Worker struct {
	cfg   Config
	stats Stats

	ses   session
	parts partTable
	idx   loopIndex

	queries indexQueries // read-only questions for the loop (query.go)
}

// seededPart is a partition's snapshot entries, ready to index.
type seededPart struct {
	pp      *partProgress
	entries []snapEntry
}

// New checks cfg and returns a worker; it connects nothing yet.
func New(cfg Config) (*Worker, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg}
	w.idx = newLoopIndex(&w.cfg, &w.stats)
	w.parts.reset()
	w.stats.Lateness = engine.NewHistogram(engine.LatenessBounds...)
	w.stats.Stages = newStages()
	w.ses.init(&w.stats.Stages)
	return w, nil
}

// Stats returns the worker's counters.
func (w *Worker) Stats() *Stats { return &w.stats }

// Pending returns, for each delay partition this worker owns, the number
// of records read and not yet resolved (forwarded, dead-lettered,
// cancelled). Safe to call while the worker runs.
func (w *Worker) Pending() map[int32]int64 {
	return w.parts.pending()
}

// Run creates the topics that are missing, joins the group and forwards
// records until ctx is done. When a transaction fails (a broker restart, a
// coordinator move), it leaves the group, drops its index and joins again:
// the committed progress is all it needs. It returns an error only when it
// cannot start (no topics), when a setting is refused for good (a session
// or transaction timeout outside the brokers' range), or when another
// live worker fenced its transactional ID (two workers with one WorkerID,
// checkFenced). On return it has left the group; a transaction in
// progress is aborted.
func (w *Worker) Run(ctx context.Context) error {
	log := w.cfg.Logger
	cleanup, err := w.openSpill()
	if err != nil {
		return err
	}
	defer cleanup()
	if err := w.ses.dial(w.cfg.Brokers); err != nil {
		return err
	}
	defer w.ses.closeAdmin()
	if err := w.ensureTopics(ctx); err != nil {
		return err
	}
	if err := w.readRetention(ctx); err != nil {
		return err
	}
	if err := w.checkBrokerLimits(ctx); err != nil {
		return err
	}
	if err := w.checkStateTopic(ctx); err != nil {
		return err
	}
	// A short fetch long-poll: a partition the loader adds joins the next
	// fetch request only when the one in flight returns, and with the
	// default 5 s wait a request parked at a partition's end held a load
	// (and the records due behind it) for seconds.
	bodies, err := kgo.NewClient(kgo.SeedBrokers(w.cfg.Brokers...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(10*time.Millisecond))
	if err != nil {
		return err
	}
	defer bodies.Close()
	w.idx.setLoader(&bodyLoader{topic: w.cfg.DelayTopic, cl: bodies})
	if w.cfg.atLeastOnce() {
		if err := w.ses.dialForwarder(w.forwarderOptions()); err != nil {
			return err
		}
		defer w.ses.closeForwarder()
	}
	wctx, stopWarmer := context.WithCancel(ctx)
	warmerDone := make(chan struct{})
	go w.runWarmer(wctx, warmerDone)
	defer func() { stopWarmer(); <-warmerDone }()
	log.Info("kafka worker started", "brokers", w.cfg.Brokers, "delay_topic", w.cfg.DelayTopic,
		"group", w.cfg.Group, "worker_id", w.cfg.WorkerID)
	for {
		err := w.runSession(ctx)
		if ctx.Err() != nil {
			break
		}
		if permanent(err) {
			return err
		}
		w.stats.Rejoins.Add(1)
		log.Warn("session failed; leaving the group and joining again", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		if err := w.checkFenced(ctx, err); err != nil {
			return err
		}
	}
	log.Info("kafka worker stopping", "forwarded", w.stats.Forwarded.Load(), "dead_lettered", w.stats.DeadLettered.Load(),
		"cancelled", w.stats.Cancelled.Load(), "committed_txns", w.stats.Committed.Load(), "aborted_txns", w.stats.Aborted.Load(),
		"rejoins", w.stats.Rejoins.Load(), "assigned", w.stats.Assigned.Load(), "revoked", w.stats.Revoked.Load(),
		"records_read", w.stats.RecordsRead.Load(), "skipped_by_marker", w.stats.SkippedByMarker.Load(), "records_reread", w.stats.RecordsReread.Load(),
		"state_records_read", w.stats.StateRecordsRead.Load(), "bodies_loaded", w.stats.BodiesLoaded.Load(),
		"snapshots", w.stats.Snapshots.Load(), "takeover_records_read", w.stats.TakeoverRecordsRead.Load(),
		"copied_forward", w.stats.CopiedForward.Load(), "spill_loaded", w.stats.SpillLoaded.Load(), "spill_errors", w.stats.SpillErrors.Load(),
		"cancels_deferred", w.stats.CancelsDeferred.Load(), "fenced_departed", w.stats.FencedDeparted.Load(),
		"forwarded_while_ending", w.stats.ForwardedWhileEnding.Load(),
		"lateness_p50_ms", w.stats.Lateness.Quantile(0.5)*1000, "lateness_p99_ms", w.stats.Lateness.Quantile(0.99)*1000,
		"max_lateness_ms", w.stats.MaxLatenessMs.Load(), "txn_us_total", w.stats.TxnMicros.Load(), "txn_us_max", w.stats.MaxTxnMicros.Load())
	_, settled, _ := w.stats.Stages.Settle.Snapshot()
	log.Info("kafka worker transaction stages", append(w.stats.Stages.summary(),
		"settled", settled, "settle_fallbacks", w.stats.SettleFallbacks.Load())...)
	return nil
}

// runSession is one membership of the group: fence the previous
// incarnation, join, forward until ctx is done or a transaction fails.
// It starts from an empty index and leaves none behind.
func (w *Worker) runSession(ctx context.Context) error {
	w.resetIndex()
	sctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		// The settle watch ends with sctx.
		w.ses.waitSettled()
		w.idx.waitLoader()
	}()
	if err := w.fencePrevious(sctx); err != nil {
		return err
	}
	if err := w.ses.join(w.sessionOptions()); err != nil { // franz-go refuses the options: no retry helps
		return fmt.Errorf("%w: %w", errSetup, err)
	}
	defer w.ses.leave()
	for sctx.Err() == nil {
		w.answerQueries()
		w.poll(sctx)
		w.idx.takeBodies()
		now := time.Now().UnixMilli()
		w.idx.loadSpilled(now)
		w.idx.compactIndex()
		w.idx.requestBodies(sctx, now)
		if w.cfg.atLeastOnce() {
			w.forwardDue(sctx, now) // not held up by the last transaction
		}
		if !w.ses.settled() || !w.commitDue() {
			continue // the last transaction is still completing (settle.go), or at least once commits later
		}
		batch := append(w.idx.takeForwarded(), w.idx.collectDue(now)...)
		if err := w.idx.failure(); err != nil {
			return err
		}
		var snap []*partProgress
		if w.idx.snapshotDue(w.cfg.SnapshotInterval) {
			snap = w.parts.snapshotCandidates()
		}
		if len(batch) == 0 && len(snap) == 0 {
			continue
		}
		if err := w.transact(sctx, batch, snap, w.cfg.atLeastOnce()); err != nil && sctx.Err() == nil {
			return err
		} // else the stop aborted it: what it forwarded is committed below
	}
	w.endAtStop()
	return nil
}

// endAtStop ends the session's work when the worker stops (SIGTERM, a
// cancelled Run). A transaction the stop interrupted is still open: kgo's
// end returns at the cancelled context before its EndTxn, and leaving the
// group does not end it, so read_committed consumers of every business
// partition it wrote to would stall until the transaction timeout (or
// until a worker fences it). It is aborted here, with a context of its
// own; then, at least once, the forwards made are committed
// (commitForwardedAtStop).
func (w *Worker) endAtStop() {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := w.ses.abortOpen(ctx); err != nil {
		w.cfg.Logger.Warn("stopping: the transaction in progress could not be aborted; it ends at the transaction timeout", "err", err)
		return
	}
	if w.cfg.atLeastOnce() {
		w.commitForwardedAtStop(ctx)
	}
}

// stopTimeout bounds what a stopping worker does before it leaves the
// group (endAtStop).
const stopTimeout = 5 * time.Second

// heartbeatInterval is how often the worker heartbeats to the group
// coordinator: a third of the session timeout (Kafka's advice), at most
// maxHeartbeat. A survivor learns that a dead worker's session expired,
// and rejoins to take its partitions, at its next heartbeat; with kgo's
// default of 3 s that added up to 3 s to a take-over.
func heartbeatInterval(session time.Duration) time.Duration {
	return min(session/3, maxHeartbeat)
}

// maxHeartbeat bounds the heartbeat interval (heartbeatInterval).
const maxHeartbeat = 500 * time.Millisecond

// txnID is the worker's transactional ID.
func (w *Worker) txnID() string { return w.cfg.Group + "-" + w.cfg.WorkerID }

// resetIndex drops every partition and empties the index (RAM and spill
// files): a session starts from what Kafka holds.
func (w *Worker) resetIndex() {
	w.parts.reset()
	w.idx.reset()
}

// sessionOptions are the group transact session's options: why each one
// is set is said beside it.
func (w *Worker) sessionOptions() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(w.cfg.Brokers...),
		kgo.TransactionalID(w.txnID()),
		// The group lists each member's client ID: it tells the other
		// workers which transactional IDs are live (fenceDeparted).
		kgo.ClientID(w.clientID()),
		kgo.TransactionTimeout(w.cfg.TxnTimeout),
		kgo.ConsumerGroup(w.cfg.Group),
		kgo.ConsumeTopics(w.cfg.DelayTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.SessionTimeout(w.cfg.SessionTimeout),
		kgo.HeartbeatInterval(heartbeatInterval(w.cfg.SessionTimeout)),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// A business topic that does not exist is created by the broker
		// when it allows that (auto.create.topics.enable); otherwise the
		// forward is refused for good and dead-lettered (txn.go).
		kgo.AllowAutoTopicCreation(),
		// Partitions assigned by a rebalance join the fetch after the
		// request in flight returns: keep its long-poll short.
		kgo.FetchMaxWait(200 * time.Millisecond),
		// With transaction version 2 (KIP-890) the first produce of a
		// transaction begun right after the previous one committed may be
		// answered CONCURRENT_TRANSACTIONS while the broker still writes
		// the previous one's markers. kgo retries such a produce only
		// after a metadata refresh, and refreshes at most once per
		// MetadataMinAge, 5 s by default: a forward waited up to 5 s
		// behind it (internal/kafkabench saw flushes of 4.2 s). Refreshes
		// are triggered by failures (and every 5 min), so a short minimum
		// costs nothing while all is well.
		kgo.MetadataMinAge(20 * time.Millisecond),
		// Partitions added to the delay topic are seen at the next
		// metadata refresh, which triggers the rebalance that assigns
		// them: a record in a new partition waits for it. kgo's default,
		// 5 min, would make it that late.
		kgo.MetadataMaxAge(metadataMaxAge),
		// A record batch as large as Kafka's default max.message.bytes:
		// franz-go's own default (1,000,012) refused, as too large, a
		// delay record of 1 MB the broker had taken, and dead-lettered it.
		kgo.ProducerBatchMaxBytes(MaxBatchBytes),
		kgo.RecordPartitioner(statePartitioner{state: w.cfg.StateTopic, delay: w.cfg.DelayTopic, other: kgo.StickyKeyPartitioner(nil)}),
		w.ses.hooks(),
		kgo.OnPartitionsAssigned(w.onAssigned),
		kgo.AdjustFetchOffsetsFn(w.adjustOffsets),
		kgo.OnPartitionsRevoked(w.onRevoked),
		kgo.OnPartitionsLost(w.onRevoked),
	}
	if w.cfg.StaticMember {
		// The session after a failed transaction (runSession) rejoins
		// with the same instance ID too, so it gets its partitions back
		// without a rebalance.
		opts = append(opts, kgo.InstanceID(w.cfg.WorkerID))
	}
	return opts
}
