// Package kafkamode is hourglass's Kafka mode: delayed delivery for Kafka
// users, run by stateless workers that keep all durable state in Kafka.
//
// A producer writes a record to the delay topic with the control headers
// _deliverAt (Unix ms) or _delayMs (ms after the record's timestamp) and
// _bizTopic. Workers consume the delay topic as one consumer group
// (cooperative-sticky). At the due time a worker produces the record's
// key, value and headers, without the control headers and with
// hourglass-due-ms and hourglass-source added, to _bizTopic (a null value,
// a tombstone, is forwarded as one). A record with missing or bad control
// headers goes to the dead-letter topic with a hourglass-dlq-reason
// header, its own headers kept except any hourglass- one. A record with the header _cancel ("key" or
// "offset:<n>") cancels pending messages of its partition (see
// HeaderCancel) and is itself never forwarded, unless it also carries
// _bizTopic and a due time: then it is a reschedule, scheduled itself.
//
// # Guarantees
//
//   - Never early: a record is produced to its business topic only when the
//     worker's clock is at or past its due time.
//   - Exactly once for read_committed consumers: the forward, the progress
//     resolution records and the group offset commit are one Kafka transaction
//     (franz-go's GroupTransactSession, KIP-447 fencing by group
//     generation). A worker crash or a rebalance aborts what was in flight;
//     the next owner sees the committed progress only.
//   - Bad input is dead-lettered, never dropped.
//   - At least once, on request (Config.Delivery = DeliveryAtLeastOnce,
//     --delivery at-least-once): forwards and dead letters are produced
//     with the idempotent producer, as records fall due, and
//     acknowledged before the transaction that commits their progress,
//     at most every 50 ms (aloCommitEvery; copies forward and cancels
//     stay in it). A crash or a lost partition between the two
//     makes the next owner forward them again; it marks every forward of
//     a record that was in the partition and due (within 2 s) when the
//     partition came to it with HeaderRedelivery, so a consumer that has
//     seen that hourglass-source drops it. An abort that keeps the
//     partition does not forward again (entry.forwarded), and a worker
//     that stops (SIGTERM) commits what it forwarded first
//     (commitForwardedAtStop): a stop is not a crash. In either mode a
//     stop aborts the transaction it interrupted (endAtStop), which
//     leaving the group does not.
//
// # Progress model (durable)
//
// For each delay partition p the committed state is two things, both
// written in the transaction that changes them:
//
//	group offset of (group, delay topic, p) = C
//	    every offset below C is resolved (forwarded or dead-lettered)
//	    metadata "hourglass/1 state=<S> member=<member ID>": S is where,
//	    in state partition p, p's latest committed snapshot begins (-1:
//	    none yet)
//
//	state topic (compacted), partition p, at most one record per
//	transaction that resolves offsets of p out of due order:
//	    key   = "<delay topic>/<p>/resolved/<slot>"   ASCII
//	    value = 0x01 | uvarint epoch | uvarint n |
//	            n x ( uvarint start - previous end (first: - 0)
//	                  uvarint length )
//	    the offsets >= the transaction's C that it resolved, as ranges;
//	    epoch is the id of p's latest snapshot (0: none), slot counts
//	    the records since that snapshot from 0 (slots are reused by
//	    the next epoch, so compaction keeps at most as many as the
//	    longest epoch used)
//
//	state topic, partition p, one record (latest wins), from a
//	transaction that copies forward into p (deferral.go, copiesrec.go)
//	or snapshots p:
//	    key   = "<delay topic>/<p>/copies"     ASCII
//	    value = 0x01 | uvarint n | n x ( uvarint copy offset
//	                                     uvarint first offset (< copy)
//	                                     8 bytes key hash, big-endian )
//	    the copies committed into p that a cancel may still need: not
//	    read back yet, or with a cancel below them not yet committed (at
//	    most 16,384, the highest offsets)
//
//	delay partition p:  ... C ............................ end
//	                        |pending|res|pending|res res|pending|
//	                         (index)      (index)        (index)
//
// A transaction that resolves offsets of p commits C' = the lowest offset
// of p still pending (or one past the last read when none is) and, if it
// resolved any offset at or above C', writes one resolution record naming
// them. Only records resolved out of due order need one: when a
// partition's records fall due in log order (one delay for all, say) C
// simply follows and nothing is written. The worker keeps the resolved
// offsets at or above C as ranges (rangeSet), so the offsets resolved
// behind one long-delayed message are one range however many they are.
//
// Older workers wrote one marker record per offset (key
// "<delay topic>/<p>/<offset>", value "resolved", a tombstone once C
// passed it). A worker that finds live markers (reading a state
// partition from its start, as the commit metadata of an older worker
// names no S) counts them resolved, names those at or above C in its
// first resolution record of p and tombstones them all in that
// transaction; a snapshot follows at the next round, so the next owner
// reads from after the tombstones (TestKafkaUpgradeFromMarkers). An older worker does not read resolution records: do not
// run one after this version has written to a state topic.
//
// # Snapshots (durable): bounded take-over
//
// Every SnapshotInterval (30 s), and at once when p's epoch reaches 4,096
// resolution records (maxResolutionSlots), the owner of p writes a
// snapshot of p's pending index to state partition p, in a transaction
// that also commits p's group offset (C unchanged if nothing resolved)
// and names the snapshot's first record's offset as S:
//
//	key "<delay topic>/<p>/snapshot"     header, one per partition:
//	    value = 0x02 | uvarint id | uvarint R | uvarint n
//	key "<delay topic>/<p>/snapshot/<i>" chunk i, 0 <= i < n:
//	    value = 0x02 | uvarint id | uvarint count |
//	            count x ( uvarint offset - previous offset (first: - 0)
//	                      varint  due (Unix ms)
//	                      varint  record timestamp (Unix ms)
//	                      8 bytes FNV-1a hash of the record key, big-endian
//	                      uvarint back: offset - the offset the message was
//	                              first sent at (a copy forward's; else 0) )
//	    (at most 16,384 entries a chunk; chunks >= n of an earlier, larger
//	     snapshot are tombstoned; a chunk whose id is not the header's is
//	     never used)
//	    Version 0x01 (before back) is still read, as back 0; a worker of
//	    that version refuses 0x02 and then reads the partition from its
//	    committed offset instead.
//
// followed by p's copies record (when p has one). The snapshot's id is
// the new epoch: its transaction writes no resolution record of p, and
// the next ones count slots from 0.
//
// R is one past the highest offset read; the entries are every offset
// below R still pending once the transaction commits, ascending. So an
// offset in [C, R) that is not an entry is resolved (or never was a delay
// record), and the snapshot replaces every resolution record before it.
// A partition with a pending control record (a cancel, a dead letter,
// both resolved within a transaction or two) waits for the next interval.
//
//	delay partition p:  ... C ...................... R ............ end
//	                        |pending, in the snapshot| read again at take-over
//
// A worker taking p over fetches the group's committed offsets with their
// metadata (waiting for a pending transactional commit), reads state
// partition p from S to its end (from its start without an S), learns C
// when the group fetches it (AdjustFetchOffsetsFn) and then: pending =
// the snapshot's entries at or above C that no resolution record of the
// snapshot's epoch names; it consumes p from max(C, R), skipping offsets
// those records name. What it re-reads of the delay topic is what was
// written in the last snapshot interval, whatever the longest delay
// (Stats.TakeoverRecordsRead counts it; TestKafkaTakeoverFromSnapshot
// asserts it).
//
// Bounded state. What it reads of the state topic
// (Stats.StateRecordsRead) is the snapshot (one header, ceil(entries /
// 16,384) chunks, the tombstones of a larger earlier snapshot's chunks)
// and what was written since: at most 4,096 resolution records, one per
// transaction, plus the copies records. Its size follows what is pending,
// not history: one long-delayed message with any number resolved behind
// it costs one pending entry and a few ranges, and p's live keys in the
// compacted state topic are at most 4,096 resolution slots plus the
// snapshot's keys plus one copies key (TestKafkaBoundedState: 30,000
// records behind a head due in an hour leave 7 live keys, and a
// take-over reads 7 state records; at def821c both were 30,002; with
// 1,000,000 behind it, 82 and 83). The
// bound holds while snapshots are taken: none is taken while p has a
// cancel open or a control record pending, so a partition that always
// has one keeps adding resolution records. Without a committed offset
// (expired) or with a snapshot that cannot be read, the snapshot is
// ignored and p is read from C with the resolution records of every
// epoch; a record resolved before that snapshot and not named by one of
// them may then be forwarded again.
//
// # Precision
//
// A forward is one transaction: produce, TxnOffsetCommit, a heartbeat
// (kgo forces it), EndTxn; then the coordinator writes the commit markers,
// and only then does a read_committed consumer see the record. The loop
// sleeps until the next due time and takes everything due (up to MaxBatch)
// into one transaction. The next transaction starts as soon as the
// coordinator has completed the last (settle.go asks with
// DescribeTransactions every 0.5 ms, for at most 20 ms; 5 ms after the
// end, txnGap, when it cannot say), as the exactly-once floor does: under
// transaction version 2 a produce that arrives while the coordinator
// still completes the previous end is held inside the broker for 20 ms
// (add.partitions.to.txn.retry.backoff.ms). A record
// due at t thus waits for the transaction in flight at t and its
// completion, then its own transaction and completion: Stats.Stages
// times each step. The session refreshes metadata at most every 20 ms,
// not kgo's 5 s: a produce answered CONCURRENT_TRANSACTIONS waits for a
// metadata refresh before its retry, and waited seconds.
//
// A record naming a business topic not seen before makes the worker ask
// for that topic's metadata with auto-creation allowed, in the background
// (warm.go): where the brokers create topics, a new business topic is
// created when its first record is read, not in the forward's transaction.
//
// Fencing is KIP-447's and unchanged by the above: every transaction's
// TxnOffsetCommit carries the group generation and member ID, so a worker
// that a rebalance (or a session timeout after a kill -9) removed from the
// group cannot commit; a revocation during a transaction makes it abort,
// or, once the session has decided to commit, waits until EndTxn has
// returned; and a new owner's offset fetch waits for a pending
// transactional commit, while its state read waits at the last stable
// offset for a transaction left open (a killed worker's).
//
// # Memory
//
// The index holds (due, partition, offset) per pending record, not the
// body: a record read more than BodyLead before its due time drops its
// body and a loader fetches it again (by offset, reading runs of nearby
// offsets) BodyLead before it is due. In RAM such an entry costs about 90
// bytes (TestEntryCost), so only the entries due within the near window
// are kept there; the others are spilled.
//
// # Spill (local cache): time-bucket files
//
// An entry due beyond NearWindow (2 min) from when it is read goes to a
// bucket file in the worker's spill directory (SpillDir; a temporary
// directory by default): one file per (partition incarnation, bucket of
// NearWindow/2 of due time), appended to once per poll:
//
//	<spill dir>/<group>-<worker ID>/p<partition>-<n>/<bucket>.spill
//	    (in the name, characters other than [a-zA-Z0-9._-] become '_',
//	     and a hash of the group and worker ID follows if any did)
//	    header  "HGSPILL" 0x02
//	    entry   offset u64 | due i64 | timestamp i64 | key hash u64 |
//	            back u64 | CRC-32C u32 of the 40 bytes before it
//	                                                       (44 bytes, BE)
//
// A bucket's file is read back into RAM, and removed, when the bucket's
// start enters the near window; nothing is spilled into a bucket already
// in it. So a spilled entry is back at least NearWindow before its due
// time, and its body is fetched BodyLead (< NearWindow) before it. RAM
// then grows with the records due within about 1.5 windows, plus the
// partition's pending offsets as runs of consecutive offsets (the progress
// model needs the lowest pending one): one run of 16 bytes for a partition
// written without transactions, one more per producer transaction in the
// pending range (its commit marker leaves a gap), plus small summaries
// per bucket (file length, count, oldest record timestamp) and per
// partition (forecast counts per due second).
//
// The files are a cache of Kafka, never the truth: they are not synced,
// the directory is emptied at start, a partition's files belong to one
// assignment of it (a take-over rebuilds them from the snapshot and the
// delay topic), and a revoked partition's files are removed. What needs
// the spilled entries reads them: a cancel brings the entries it matches
// back into RAM first (and the bucket's later load skips them); a
// snapshot reads the partition's files; the forecast adds the per-second
// counts; copy-forward loads a bucket whose oldest record is old enough.
// A failed spill write keeps the entries in RAM (Stats.SpillErrors, logged
// once); a file that does not read back ends the session, which rebuilds
// the index from Kafka. Losing the disk loses nothing.
//
// # Copy-forward
//
// A record is deleted by the delay topic's retention no sooner than
// retention.ms after its timestamp. The worker reads retention.ms at start;
// a pending record older than half of it, and not due within BodyLead, is
// copied forward: re-produced to the same delay partition, in the
// transaction that resolves its old offset (resolution record or commit, as for a
// forward), with _deliverAt set to its due time (replacing _delayMs),
// without _cancel, and with hourglass-copied-from naming the original
// position (kept through further copies). The copy is read and indexed
// like any record; its forward names the original in hourglass-source and
// drops hourglass-copied-from. The worker learns where a copy's message
// was first sent from its copy records and the snapshots' back, never
// from the header: any producer can write one. Every hourglass- header a
// delay record carries is dropped from its forward and its copies. A cancel by key still finds the copy (same
// key, same partition, lower offset than the cancel), and so does a cancel
// by offset naming the original's offset: the copy's entry knows it
// (entry.back, deferral.go). The Locator (inspect, and the HTTP API's
// cancel and reschedule) follows the original's ID to the latest copy,
// also once retention has deleted the original: then the earliest copy
// still in the partition stands for it (locatecopy.go).
//
// # Caveats
//
//   - Size-based retention (retention.bytes) can delete a record sooner
//     than copy-forward assumes; a record deleted before its due time is
//     dead-lettered with a reason saying so.
//   - A worker that copies forward (or settles a reschedule) writes to
//     the delay topic in transactions, so the delay partition may end in a transaction
//     marker the consumer never sees: the group's lag then shows 1 when
//     everything is resolved.
//   - A forward Kafka refuses for good (a missing topic with auto-create
//     off, an invalid topic, no ACL, a record too large) aborts its
//     transaction once; the next one dead-letters the record with the
//     reason (without its body if the dead letter is too large as well;
//     the body stays in the delay topic). A transient failure is retried.
//   - A reschedule is forwarded only if its cancel half replaced a pending
//     message; otherwise it is dead-lettered (settleReschedule), so a
//     message forwarded before its reschedule was read is not delivered a
//     second time. When it replaced one, it is forwarded (if due) or
//     copied forward in the cancel's transaction: left pending, it would
//     be read again after a crash or rebalance, find the message resolved
//     and be dead-lettered. Two reschedule records of one message read in
//     one poll: the second replaces the first. A cancel or reschedule
//     written after a reschedule but before the worker's copy of it
//     landed (within a transaction's time) waits until the copy is read
//     back, by this owner or the next, and then reaches it (deferral.go).
//   - The state topic needs at least as many partitions as the delay
//     topic. Partitions added to the delay topic are picked up at the
//     next metadata refresh (metadataMaxAge, 10 s) by a rebalance, and the
//     owner of a new partition grows the state topic to match
//     (growStateTopic; also at start). As for any keyed Kafka topic, a
//     key then maps to another partition: a cancel by key written after
//     the change reaches only messages in the key's new partition; older
//     ones are cancelled by ID (partition and offset).
//   - Warming a business topic creates it (where auto-creation is on) as
//     soon as a record naming it is read, even if that record is cancelled
//     before it is due; at most 4,096 topic names are remembered.
//   - What the spill does not bound: the pending offsets' runs, one per
//     gap (a transactional producer's commit marker), so a producer that
//     commits a transaction per message costs 16 bytes a message; a
//     snapshot is built from all
//     pending entries (spilled ones read from disk), so a snapshot
//     interval in which records were read allocates O(pending) for a
//     moment; and an entry copied forward (or cancelled) stays in the
//     due heap until its due time or until such dead entries are at
//     least 4,096 and half the heap (then the loop drops them).
package kafkamode
