package kafkamode

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hourglass-mq/hourglass/engine"
)

// Stats are a worker's counters since it started. All fields are safe to
// read while the worker runs.
type Stats struct {
	RecordsRead      atomic.Int64 // delay records read (first reads only)
	SkippedByMarker  atomic.Int64 // delay records read but already resolved by a marker
	Forwarded        atomic.Int64 // records forwarded in committed transactions
	DeadLettered     atomic.Int64 // records dead-lettered in committed transactions
	Cancelled        atomic.Int64 // pending records cancelled in committed transactions
	Committed        atomic.Int64 // transactions committed
	Aborted          atomic.Int64 // transactions aborted (a rebalance, an error)
	Assigned         atomic.Int64 // partitions assigned, summed over rebalances
	Revoked          atomic.Int64 // partitions revoked or lost, summed
	BodiesLoaded     atomic.Int64 // bodies fetched again before their due time
	StateRecordsRead atomic.Int64 // state-topic records read at take-over
	Rejoins          atomic.Int64 // sessions rebuilt after a failed transaction
	MaxLatenessMs    atomic.Int64 // largest (forward time - due) seen
	// Lateness is the histogram of (forward time - due time), in seconds,
	// of records forwarded in committed transactions, with the embedded
	// engine's buckets. The forward time is the worker's clock when the
	// transaction began; a read_committed consumer sees the record after
	// the commit, later.
	Lateness     *engine.Histogram
	TxnMicros    atomic.Int64 // time spent in transactions, summed (µs)
	MaxTxnMicros atomic.Int64 // longest transaction (µs)
	// Snapshots counts partition snapshots written in committed
	// transactions; TakeoverRecordsRead the delay records the consumer
	// delivered below each assigned partition's end offset at assignment
	// (what a take-over re-reads; bounded by the snapshot interval's
	// traffic, not by the longest delay); CopiedForward the records
	// copied forward before the delay topic's retention would delete them.
	Snapshots           atomic.Int64
	TakeoverRecordsRead atomic.Int64
	CopiedForward       atomic.Int64
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

// Worker forwards due records from the delay topic to their business
// topics. Create it with New and run it with Run.
type Worker struct {
	cfg   Config
	stats Stats

	aux    *kgo.Client // admin and marker-loading seed client
	sess   *kgo.GroupTransactSession
	loader *bodyLoader

	// mu guards parts: the group callbacks (on the client's goroutines)
	// add and drop partitions; the loop reads them. Never held across a
	// call into the client: End waits for the callbacks.
	mu    sync.Mutex
	parts map[int32]*partProgress
	// seeded lists partitions whose snapshot entries adjustOffsets made
	// ready; the loop indexes them (guarded by mu).
	seeded []seededPart

	// copyAfterMs is the age (now - record timestamp) at which a pending
	// record is copied forward: half the delay topic's retention.ms; 0
	// when retention is unlimited. Set before the loop starts.
	copyAfterMs int64

	// Owned by the loop goroutine.
	due       dueHeap // every pending entry, by due time
	noBody    dueHeap // entries whose body was dropped, by due time
	loadBusy  bool
	loadDone  chan bodyResult
	copies    tsHeap   // entries that may need copying forward, by timestamp
	copyReady []*entry // entries to copy, body loaded
	lastSnap  time.Time
	// lastCommit is when the last transaction committed (see txnGap).
	lastCommit time.Time

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
	w := &Worker{cfg: cfg, parts: make(map[int32]*partProgress), loadDone: make(chan bodyResult, 1)}
	w.stats.Lateness = engine.NewHistogram(engine.LatenessBounds...)
	return w, nil
}

// Stats returns the worker's counters.
func (w *Worker) Stats() *Stats { return &w.stats }

// Pending returns, for each delay partition this worker owns, the number
// of records read and not yet resolved (forwarded, dead-lettered,
// cancelled). Safe to call while the worker runs.
func (w *Worker) Pending() map[int32]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[int32]int64, len(w.parts))
	for p, pp := range w.parts {
		out[p] = pp.open.Load()
	}
	return out
}

// Run creates the topics that are missing, joins the group and forwards
// records until ctx is done. When a transaction fails (a broker restart, a
// coordinator move), it leaves the group, drops its index and joins again:
// the committed progress is all it needs. It returns an error only when it
// cannot start (no topics) or when another live worker fenced its
// transactional ID (two workers with one WorkerID). On return it has left
// the group; a transaction in progress is aborted.
func (w *Worker) Run(ctx context.Context) error {
	log := w.cfg.Logger
	var err error
	w.aux, err = kgo.NewClient(kgo.SeedBrokers(w.cfg.Brokers...))
	if err != nil {
		return err
	}
	defer w.aux.Close()
	if err := w.ensureTopics(ctx); err != nil {
		return err
	}
	if err := w.readRetention(ctx); err != nil {
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
	w.loader = &bodyLoader{topic: w.cfg.DelayTopic, cl: bodies}
	log.Info("kafka worker started", "brokers", w.cfg.Brokers, "delay_topic", w.cfg.DelayTopic,
		"group", w.cfg.Group, "worker_id", w.cfg.WorkerID)
	for {
		err := w.runSession(ctx)
		if ctx.Err() != nil {
			break
		}
		if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
			return err
		}
		w.stats.Rejoins.Add(1)
		log.Warn("session failed; leaving the group and joining again", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	log.Info("kafka worker stopping", "forwarded", w.stats.Forwarded.Load(), "dead_lettered", w.stats.DeadLettered.Load(),
		"cancelled", w.stats.Cancelled.Load(), "committed_txns", w.stats.Committed.Load(), "aborted_txns", w.stats.Aborted.Load(),
		"rejoins", w.stats.Rejoins.Load(), "assigned", w.stats.Assigned.Load(), "revoked", w.stats.Revoked.Load(),
		"records_read", w.stats.RecordsRead.Load(), "skipped_by_marker", w.stats.SkippedByMarker.Load(),
		"state_records_read", w.stats.StateRecordsRead.Load(), "bodies_loaded", w.stats.BodiesLoaded.Load(),
		"snapshots", w.stats.Snapshots.Load(), "takeover_records_read", w.stats.TakeoverRecordsRead.Load(),
		"copied_forward", w.stats.CopiedForward.Load(),
		"lateness_p50_ms", w.stats.Lateness.Quantile(0.5)*1000, "lateness_p99_ms", w.stats.Lateness.Quantile(0.99)*1000,
		"max_lateness_ms", w.stats.MaxLatenessMs.Load(), "txn_us_total", w.stats.TxnMicros.Load(), "txn_us_max", w.stats.MaxTxnMicros.Load())
	return nil
}

// runSession is one membership of the group: fence the previous
// incarnation, join, forward until ctx is done or a transaction fails.
// It starts from an empty index and leaves none behind.
func (w *Worker) runSession(ctx context.Context) error {
	w.mu.Lock()
	for _, pp := range w.parts {
		pp.dropped.Store(true)
	}
	w.parts = make(map[int32]*partProgress)
	w.mu.Unlock()
	w.due, w.noBody, w.copies, w.copyReady = nil, nil, nil, nil
	w.seeded = nil
	w.lastSnap = time.Now()
	sctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		if w.loadBusy { // wait for the loader so no result leaks into the next session
			<-w.loadDone
			w.loadBusy = false
		}
	}()
	if err := w.fencePrevious(sctx); err != nil {
		return err
	}
	var err error
	w.sess, err = kgo.NewGroupTransactSession(
		kgo.SeedBrokers(w.cfg.Brokers...),
		kgo.TransactionalID(w.cfg.Group+"-"+w.cfg.WorkerID),
		kgo.TransactionTimeout(w.cfg.TxnTimeout),
		kgo.ConsumerGroup(w.cfg.Group),
		kgo.ConsumeTopics(w.cfg.DelayTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.SessionTimeout(w.cfg.SessionTimeout),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Partitions assigned by a rebalance join the fetch after the
		// request in flight returns: keep its long-poll short.
		kgo.FetchMaxWait(200*time.Millisecond),
		// With transaction version 2 (KIP-890) the first produce of a
		// transaction begun right after the previous one committed may be
		// answered CONCURRENT_TRANSACTIONS while the broker still writes
		// the previous one's markers. kgo retries such a produce only
		// after a metadata refresh, and refreshes at most once per
		// MetadataMinAge, 5 s by default: a forward waited up to 5 s
		// behind it (internal/kafkabench saw flushes of 4.2 s). Refreshes
		// are triggered by failures (and every 5 min), so a short minimum
		// costs nothing while all is well.
		kgo.MetadataMinAge(20*time.Millisecond),
		kgo.RecordPartitioner(statePartitioner{state: w.cfg.StateTopic, delay: w.cfg.DelayTopic, other: kgo.StickyKeyPartitioner(nil)}),
		kgo.OnPartitionsAssigned(w.onAssigned),
		kgo.AdjustFetchOffsetsFn(w.adjustOffsets),
		kgo.OnPartitionsRevoked(w.onRevoked),
		kgo.OnPartitionsLost(w.onRevoked),
	)
	if err != nil {
		return err
	}
	defer w.sess.Close()
	for sctx.Err() == nil {
		w.answerQueries()
		w.poll(sctx)
		w.takeBodies()
		now := time.Now().UnixMilli()
		w.requestBodies(sctx, now)
		batch := w.collectDue(now)
		var snap []*partProgress
		if time.Since(w.lastSnap) >= w.cfg.SnapshotInterval {
			w.lastSnap = time.Now()
			snap = w.snapshotParts()
		}
		if len(batch) == 0 && len(snap) == 0 {
			continue
		}
		if err := w.transact(sctx, batch, snap); err != nil {
			return err
		}
	}
	return nil
}

// statePartitioner sends state-topic records to the partition set on them
// (the delay partition they describe), and so delay-topic records (copies
// forward, which stay in their partition), and partitions every other
// record by key, like the Java client.
type statePartitioner struct {
	state, delay string
	other        kgo.Partitioner
}

func (p statePartitioner) ForTopic(t string) kgo.TopicPartitioner {
	if t == p.state || t == p.delay {
		return kgo.ManualPartitioner().ForTopic(t)
	}
	return p.other.ForTopic(t)
}

// ensureTopics creates the delay, state and dead-letter topics that are
// missing, and checks that the state topic has a partition for each delay
// partition.
func (w *Worker) ensureTopics(ctx context.Context) error {
	adm := kadm.NewClient(w.aux)
	create := func(topic string, parts int32, configs map[string]*string) error {
		_, err := adm.CreateTopic(ctx, parts, w.cfg.Replication, configs, topic)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
		return nil
	}
	td, err := adm.ListTopics(ctx, w.cfg.DelayTopic)
	if err != nil {
		return fmt.Errorf("describe topic %s: %w", w.cfg.DelayTopic, err)
	}
	n := w.cfg.Partitions
	if d, ok := td[w.cfg.DelayTopic]; ok && d.Err == nil {
		n = int32(len(d.Partitions))
	} else if err := create(w.cfg.DelayTopic, n, nil); err != nil {
		return err
	}
	compact := "compact"
	if err := create(w.cfg.StateTopic, n, map[string]*string{"cleanup.policy": &compact}); err != nil {
		return err
	}
	if err := create(w.cfg.DLQTopic, n, nil); err != nil {
		return err
	}
	// A topic just created may take a moment to show in the metadata.
	var got int32
	for try := 0; try < 40; try++ { // kgo may answer from metadata cached for up to 5 s
		td, err = adm.ListTopics(ctx, w.cfg.StateTopic)
		if err != nil {
			return fmt.Errorf("describe topic %s: %w", w.cfg.StateTopic, err)
		}
		if got = int32(len(td[w.cfg.StateTopic].Partitions)); got > 0 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if got < n {
		return fmt.Errorf("state topic %s has %d partitions; the delay topic %s has %d and needs one state partition each",
			w.cfg.StateTopic, got, w.cfg.DelayTopic, n)
	}
	return nil
}

// onAssigned loads the markers of newly assigned partitions before the
// client fetches their committed offsets and starts consuming them (the
// client calls it first), so no record of theirs is read without them.
func (w *Worker) onAssigned(ctx context.Context, _ *kgo.Client, assigned map[string][]int32) {
	ps := assigned[w.cfg.DelayTopic]
	if len(ps) == 0 {
		return
	}
	var loaded map[int32]*loadedPart
	var ends kadm.ListedOffsets
	for {
		var err error
		loaded, err = w.loadMarkers(ctx, ps)
		if err == nil {
			ends, err = kadm.NewClient(w.aux).ListEndOffsets(ctx, w.cfg.DelayTopic)
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		w.cfg.Logger.Warn("loading markers failed; retrying", "partitions", ps, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	nMarkers, nSnap := 0, 0
	for _, p := range ps {
		if old := w.parts[p]; old != nil {
			old.dropped.Store(true)
		}
		lp := loaded[p]
		pp := newPartProgress(p, lp.markers)
		pp.seed = lp.snap
		if lo, ok := ends.Lookup(w.cfg.DelayTopic, p); ok && lo.Err == nil {
			pp.catchUp = lo.Offset
		}
		w.parts[p] = pp
		nMarkers += len(lp.markers)
		if lp.snap != nil {
			nSnap++
		}
	}
	w.stats.Assigned.Add(int64(len(ps)))
	w.cfg.Logger.Info("partitions assigned", "partitions", ps, "markers", nMarkers, "snapshots", nSnap)
}

// adjustOffsets runs when the group has fetched the committed offsets of
// newly assigned partitions, before consuming them: a partition with a
// snapshot starts at the snapshot's read position (or at its committed
// offset if that is further), and its snapshot entries at or above the
// committed offset become its pending index. A partition without a
// committed offset ignores its snapshot (offsets expired: read from the
// start, as without one).
func (w *Worker) adjustOffsets(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, o := range offsets[w.cfg.DelayTopic] {
		pp := w.parts[p]
		if pp == nil || pp.seed == nil {
			continue
		}
		c := o.EpochOffset().Offset
		if c < 0 {
			w.cfg.Logger.Warn("partition has a snapshot but no committed offset; ignoring the snapshot", "partition", p)
			pp.seed = nil
			continue
		}
		entries, start := pp.applySeed(c)
		offsets[w.cfg.DelayTopic][p] = kgo.NewOffset().At(start).WithEpoch(-1)
		w.seeded = append(w.seeded, seededPart{pp: pp, entries: entries})
		w.cfg.Logger.Info("partition resumes from its snapshot", "partition", p, "committed", c, "read_from", start,
			"pending", len(entries))
	}
	return offsets, nil
}

// onRevoked drops revoked or lost partitions; their entries die lazily.
// The session aborts a transaction that is in progress.
func (w *Worker) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	ps := revoked[w.cfg.DelayTopic]
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range ps {
		if pp := w.parts[p]; pp != nil {
			pp.dropped.Store(true)
			delete(w.parts, p)
		}
	}
	w.stats.Revoked.Add(int64(len(ps)))
	w.cfg.Logger.Info("partitions revoked", "partitions", ps)
}

// txnGap is the least time between a commit and the next transaction's
// first produce; the loop indexes what arrived meanwhile. With transaction
// version 2 (KIP-890) the coordinator completes a commit after answering
// EndTxn (it writes the markers, then the completion); a produce of the
// next transaction that arrives before that is answered
// CONCURRENT_TRANSACTIONS inside the broker, which retries it after
// add.partitions.to.txn.retry.backoff.ms, 20 ms by default. Measured with
// internal/kafkabench at 20,000 messages/s falling due: flushes took 13 to
// 33 ms (p50) back to back and 3 to 6 ms with this gap of 5 ms; the
// consumer's lateness p50 fell from 25-29 ms to 9-12 ms.
const txnGap = 5 * time.Millisecond

// pollWait bounds one poll when nothing is due sooner.
const pollWait = 50 * time.Millisecond

// maxPollRecords bounds the records indexed between two looks at what is
// due: reading and firing share the loop, so a large read would make
// records due meanwhile late.
const maxPollRecords = 500

// poll reads what the consumer has, waiting at most until the next due time
// (or pollWait), and indexes it.
func (w *Worker) poll(ctx context.Context) {
	wait := pollWait
	if e := w.due.peek(); e != nil {
		d := time.Until(time.UnixMilli(e.due))
		if e.due <= time.Now().UnixMilli() && e.rec == nil {
			d = 2 * time.Millisecond // its body is on the way
		}
		wait = min(wait, d)
	}
	if gap := txnGap - time.Since(w.lastCommit); gap > 0 {
		wait = max(wait, gap)
	}
	var fs kgo.Fetches
	if wait <= 0 {
		fs = w.sess.PollRecords(nil, maxPollRecords) // nil: take what is buffered, never block
	} else {
		pctx, cancel := context.WithTimeout(ctx, wait)
		fs = w.sess.PollRecords(pctx, maxPollRecords)
		cancel()
	}
	fs.EachError(func(t string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			w.cfg.Logger.Warn("fetch error", "topic", t, "partition", p, "err", err)
		}
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	// Index the snapshot entries of partitions just taken over before any
	// record of theirs: a cancel read next must find them.
	for _, sp := range w.seeded {
		for _, se := range sp.entries {
			e := &entry{pp: sp.pp, offset: se.offset, due: se.due, ts: se.ts, keyHash: se.keyHash}
			w.due.push(e)
			w.noBody.push(e)
			w.queueCopy(e)
		}
	}
	w.seeded = nil
	if fs.NumRecords() == 0 {
		return
	}
	now := time.Now().UnixMilli()
	lead := w.cfg.BodyLead.Milliseconds()
	fs.EachRecord(func(r *kgo.Record) {
		pp := w.parts[r.Partition]
		if pp == nil || r.Topic != w.cfg.DelayTopic {
			return
		}
		if r.Offset < pp.catchUp {
			w.stats.TakeoverRecordsRead.Add(1)
		}
		seenBefore := r.Offset < pp.next
		if !pp.read(r.Offset) {
			if !seenBefore {
				w.stats.SkippedByMarker.Add(1)
			}
			return
		}
		w.stats.RecordsRead.Add(1)
		e := &entry{pp: pp, offset: r.Offset, ts: r.Timestamp.UnixMilli(), keyHash: keyHash(r.Key)}
		s, err := parseSchedule(r, w.cfg.DelayTopic)
		cancel, isCancel, cerr := parseCancel(r)
		scheduled := hasScheduleHeaders(r)
		switch {
		case isCancel && cerr != nil:
			e.ctl = &control{dlqReason: cerr.Error()}
			e.rec = detach(r)
			w.due.push(e)
			return
		case isCancel && !scheduled:
			e.ctl = &control{cancel: cancel}
			e.rec = &kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
			w.due.push(e)
			return
		case isCancel && err == nil:
			// A reschedule: cancel the earlier messages now, in a
			// control entry that does not resolve this record's offset,
			// and schedule this record as usual below.
			w.due.push(&entry{pp: pp, offset: r.Offset, keyHash: e.keyHash,
				ctl: &control{cancel: cancel, keepOwn: true},
				rec: &kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}})
		}
		switch {
		case err != nil:
			e.ctl = &control{dlqReason: err.Error()}
			e.rec = detach(r)
		case s.due-now <= lead:
			e.due = s.due
			e.rec = detach(r)
		default:
			// Far from due: index the position only.
			e.due = s.due
			w.noBody.push(e)
		}
		w.due.push(e)
		w.queueCopy(e)
	})
}

// queueCopy queues a scheduled entry for copy-forward if the delay topic's
// retention is finite and the entry falls due after the copy age.
func (w *Worker) queueCopy(e *entry) {
	if w.copyAfterMs > 0 && e.ctl == nil && e.due > e.ts+w.copyAfterMs {
		heap.Push(&w.copies, e)
	}
}

// readRetention sets copyAfterMs from the delay topic's retention.ms: a
// pending record older than half of it is copied forward. A record is
// deleted no sooner than retention.ms after its timestamp (Kafka deletes a
// segment when its newest record is that old), so the copy, made at half
// of it, is in time by half the retention. Size-based retention
// (retention.bytes) can delete sooner: it is not considered.
func (w *Worker) readRetention(ctx context.Context) error {
	rcs, err := kadm.NewClient(w.aux).DescribeTopicConfigs(ctx, w.cfg.DelayTopic)
	if err != nil {
		return fmt.Errorf("describe the config of topic %s: %w", w.cfg.DelayTopic, err)
	}
	rc, err := rcs.On(w.cfg.DelayTopic, nil)
	if err != nil || rc.Err != nil {
		return fmt.Errorf("describe the config of topic %s: %w", w.cfg.DelayTopic, errors.Join(err, rc.Err))
	}
	w.copyAfterMs = 0
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" && c.Value != nil {
			ms, err := strconv.ParseInt(*c.Value, 10, 64)
			if err == nil && ms > 0 {
				w.copyAfterMs = max(1, ms/2)
			}
		}
	}
	w.cfg.Logger.Info("delay topic retention", "copy_forward_after_ms", w.copyAfterMs)
	return nil
}

// requestBodies hands the loader the entries that fall due within BodyLead
// and have no body, if it is idle.
func (w *Worker) requestBodies(ctx context.Context, now int64) {
	if w.loadBusy {
		return
	}
	horizon := now + w.cfg.BodyLead.Milliseconds()
	var wants []want
	// Entries old enough to copy forward: those falling due within the
	// lead are left to the due path (their bodies are loaded now, before
	// retention can delete them); the others are copied.
	for len(wants) < 20000 {
		e := w.peekCopy()
		if e == nil || e.ts+w.copyAfterMs > now {
			break
		}
		heap.Pop(&w.copies)
		if e.due <= horizon || e.copy {
			continue
		}
		e.copy = true
		if e.rec != nil {
			w.copyReady = append(w.copyReady, e)
			continue
		}
		if !e.loading {
			e.loading = true
			wants = append(wants, want{e: e, partition: e.pp.partition, offset: e.offset})
		}
	}
	for len(wants) < 20000 {
		e := w.noBody.peek()
		if e == nil || e.due > horizon {
			break
		}
		w.noBody.pop()
		if e.rec != nil || e.loading || !e.live() { // done: copied forward or cancelled
			continue
		}
		e.loading = true
		wants = append(wants, want{e: e, partition: e.pp.partition, offset: e.offset})
	}
	if len(wants) == 0 {
		return
	}
	w.loadBusy = true
	go func() { w.loadDone <- w.loader.load(ctx, wants) }()
}

// takeBodies attaches the bodies the loader fetched, if it finished.
func (w *Worker) takeBodies() {
	var res bodyResult
	select {
	case res = <-w.loadDone:
	default:
		return
	}
	w.loadBusy = false
	for e, r := range res.got {
		e.rec, e.loading = detach(r), false
		w.stats.BodiesLoaded.Add(1)
		if e.copy {
			w.copyReady = append(w.copyReady, e)
		}
	}
	for _, e := range res.missing {
		// The record is gone: say so in the dead-letter topic rather
		// than wait for it forever.
		e.loading = false
		e.ctl = &control{dlqReason: "the delay record was deleted by the delay topic's retention before it was due"}
		e.rec = &kgo.Record{Topic: w.cfg.DelayTopic, Partition: e.pp.partition, Offset: e.offset}
	}
	if res.err != nil {
		w.cfg.Logger.Warn("fetching bodies failed; retrying", "err", res.err)
	}
	// Entries the load did not answer (it failed part way) wait for the
	// next load.
	for _, wt := range res.wants {
		if e := wt.e; e.loading {
			e.loading = false
			w.noBody.push(e)
		}
	}
}

// collectDue pops the entries due at now whose body is loaded, at most
// MaxBatch, oldest due first. An entry due but still waiting for its body
// stops the batch: it is late, never early.
func (w *Worker) collectDue(now int64) []*entry {
	var batch []*entry
	for len(batch) < w.cfg.MaxBatch {
		e := w.due.peek()
		if e == nil || e.due > now {
			break
		}
		if e.rec == nil {
			break // its body is being fetched (requestBodies asked)
		}
		w.due.pop()
		if e.inBatch {
			continue // a second heap slot of an entry already taken (see transact)
		}
		e.inBatch = true
		e.copy = false // due: forwarded, not copied
		batch = append(batch, e)
		if e.ctl != nil && e.ctl.cancel != nil {
			batch = append(batch, w.cancelTargets(e)...)
		}
	}
	// Copies forward ride in the same transaction.
	keep := w.copyReady[:0]
	for _, e := range w.copyReady {
		switch {
		case !e.live() || !e.copy || e.rec == nil:
		case e.inBatch || len(batch) >= w.cfg.MaxBatch:
			keep = append(keep, e)
		default:
			e.inBatch = true
			batch = append(batch, e)
		}
	}
	clear(w.copyReady[len(keep):])
	w.copyReady = keep
	return batch
}

// peekCopy returns the oldest live entry of the copy queue.
func (w *Worker) peekCopy() *entry {
	for len(w.copies) > 0 {
		if e := w.copies[0]; e.live() {
			return e
		}
		heap.Pop(&w.copies)
	}
	return nil
}

// cancelTargets marks and returns the pending entries the cancel entry c
// cancels: in c's partition, before c, matching its key hash or its
// offset, not already in a transaction (those are being forwarded: too
// late). It scans the whole index, O(pending): cancels are expected to be
// rare next to forwards.
func (w *Worker) cancelTargets(c *entry) []*entry {
	var out []*entry
	for _, e := range w.due {
		if e.pp != c.pp || !e.live() || e.inBatch || e.ctl != nil || e.offset >= c.offset {
			continue
		}
		if c.ctl.cancel.byKey && e.keyHash == c.keyHash || !c.ctl.cancel.byKey && e.offset == c.ctl.cancel.offset {
			e.inBatch, e.cancelled = true, true
			out = append(out, e)
		}
	}
	return out
}

// transact forwards (or dead-letters) batch, writes the markers and
// tombstones its progress needs, and commits the new group offsets, in one
// transaction. On commit the progress is applied; on abort the entries go
// back into the index (and the session rewinds the consumer to the
// committed offsets; the records it reads again are ignored).
func (w *Worker) transact(ctx context.Context, batch []*entry, snap []*partProgress) error {
	byPart := make(map[*partProgress][]int64)
	for _, e := range batch {
		if e.ctl == nil || !e.ctl.keepOwn {
			byPart[e.pp] = append(byPart[e.pp], e.offset)
		}
	}
	snaps := w.buildSnapshots(snap, byPart)
	if len(batch) == 0 && len(snaps) == 0 {
		return nil // every transaction commits offsets (see doc.go): none to commit
	}
	began := time.Now()
	defer func() {
		us := time.Since(began).Microseconds()
		w.stats.TxnMicros.Add(us)
		if us > w.stats.MaxTxnMicros.Load() {
			w.stats.MaxTxnMicros.Store(us)
		}
	}()
	if err := w.sess.Begin(); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	var produceErr atomic.Value
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			produceErr.CompareAndSwap(nil, err)
		}
	}
	now := time.Now().UnixMilli()
	for _, e := range batch {
		source := w.cfg.DelayTopic + "/" + strconv.Itoa(int(e.pp.partition)) + "/" + strconv.FormatInt(e.offset, 10)
		var out *kgo.Record
		switch {
		case e.cancelled || e.ctl != nil && e.ctl.cancel != nil:
			// Resolved without output: a cancelled message, a cancel.
		case e.copy:
			out = copyRecord(e.rec, w.cfg.DelayTopic, e.pp.partition, source, e.due)
		case e.dlqReason() != "":
			out = deadLetterRecord(e.rec, w.cfg.DLQTopic, source, e.dlqReason())
		default:
			s, err := parseSchedule(e.rec, w.cfg.DelayTopic)
			if err != nil { // cannot happen: it parsed at read time
				out = deadLetterRecord(e.rec, w.cfg.DLQTopic, source, err.Error())
			} else {
				out = forwardRecord(e.rec, s.bizTopic, source, e.due)
			}
		}
		if out != nil {
			w.sess.Produce(ctx, out, promise)
		}
	}
	for _, sn := range snaps {
		if _, ok := byPart[sn.pp]; !ok {
			byPart[sn.pp] = nil // commit its unchanged offset with the snapshot
		}
		for _, r := range sn.records {
			w.sess.Produce(ctx, r, promise)
		}
	}
	plans := make([]*partPlan, 0, len(byPart))
	for pp, offs := range byPart {
		pl := pp.plan(offs)
		plans = append(plans, pl)
		for _, o := range pl.addMarkers {
			w.sess.Produce(ctx, w.markerRecord(pp.partition, o, true), promise)
		}
		for _, o := range pl.delMarkers {
			w.sess.Produce(ctx, w.markerRecord(pp.partition, o, false), promise)
		}
	}
	commitFn := func(req *kmsg.TxnOffsetCommitRequest) error {
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic = w.cfg.DelayTopic
		for _, rt := range req.Topics {
			if rt.Topic == w.cfg.DelayTopic {
				t.TopicID = rt.TopicID
			}
		}
		for _, pl := range plans {
			p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			p.Partition = pl.pp.partition
			p.Offset = pl.commit
			p.LeaderEpoch = -1
			p.Metadata = &req.MemberID
			t.Partitions = append(t.Partitions, p)
		}
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{t}
		return nil
	}
	flushErr := w.sess.Client().Flush(ctx)
	flushed := time.Now()
	defer func() {
		oldest := now
		for _, e := range batch {
			if e.due > 0 && e.due < oldest {
				oldest = e.due
			}
		}
		w.cfg.Logger.Debug("transaction", "records", len(batch), "late_ms", now-oldest, "flush", flushed.Sub(began), "end", time.Since(flushed))
	}()
	try := kgo.TryCommit
	if flushErr != nil || produceErr.Load() != nil {
		try = kgo.TryAbort
	}
	committed, err := w.sess.End(kgo.PreTxnCommitFnContext(ctx, commitFn), try)
	for _, e := range batch {
		e.inBatch = false
	}
	if committed {
		w.lastCommit = time.Now()
		w.stats.Committed.Add(1)
		for _, pl := range plans {
			pl.apply()
		}
		for _, sn := range snaps {
			sn.pp.snapRead, sn.pp.snapChunks = sn.read, sn.chunks
			w.stats.Snapshots.Add(1)
		}
		for _, e := range batch {
			e.done = true
			switch {
			case e.cancelled:
				w.stats.Cancelled.Add(1)
			case e.ctl != nil && e.ctl.cancel != nil:
			case e.copy:
				w.stats.CopiedForward.Add(1)
			case e.dlqReason() != "":
				w.stats.DeadLettered.Add(1)
			default:
				w.stats.Forwarded.Add(1)
				late := now - e.due
				if late > w.stats.MaxLatenessMs.Load() {
					w.stats.MaxLatenessMs.Store(late)
				}
				w.stats.Lateness.Observe(float64(late) / 1000)
				w.stats.partitionLateness(e.pp.partition).Observe(float64(late) / 1000)
			}
			e.rec = nil // let the body go
		}
		return nil
	}
	w.stats.Aborted.Add(1)
	for _, pl := range plans {
		pl.undo()
	}
	for _, e := range batch {
		// A cancel's target never left the heap, so pushing it again
		// gives it a second slot; collectDue skips the copy that is
		// popped while the other is in a batch, and peek drops both once
		// it is done.
		e.cancelled = false
		switch {
		case !e.live():
		case e.copy: // never left the due heap: copy it again
			w.copyReady = append(w.copyReady, e)
		default:
			w.due.push(e)
		}
	}
	if perr, _ := produceErr.Load().(error); perr != nil {
		w.cfg.Logger.Warn("transaction aborted: a produce failed", "err", perr)
	}
	if flushErr != nil {
		w.cfg.Logger.Warn("transaction aborted: flush failed", "err", flushErr)
	}
	if err != nil {
		return fmt.Errorf("end transaction: %w", err)
	}
	w.cfg.Logger.Info("transaction aborted (rebalance)", "records", len(batch))
	return nil
}
