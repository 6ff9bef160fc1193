// Package kafkamode is hourglass's Kafka mode: delayed delivery for Kafka
// users, run by stateless workers that keep all durable state in Kafka.
//
// A producer writes a record to the delay topic with the control headers
// _deliverAt (Unix ms) or _delayMs (ms after the record's timestamp) and
// _bizTopic. Workers consume the delay topic as one consumer group
// (cooperative-sticky). At the due time a worker produces the record's
// key, value and headers, without the control headers and with
// hourglass-due-ms and hourglass-source added, to _bizTopic. A record with
// missing or bad control headers goes to the dead-letter topic with a
// hourglass-dlq-reason header. A record with the header _cancel ("key" or
// "offset:<n>") cancels pending messages of its partition (see
// HeaderCancel) and is itself never forwarded, unless it also carries
// _bizTopic and a due time: then it is a reschedule, scheduled itself.
//
// # Guarantees
//
//   - Never early: a record is produced to its business topic only when the
//     worker's clock is at or past its due time.
//   - Exactly once for read_committed consumers: the forward, the progress
//     markers and the group offset commit are one Kafka transaction
//     (franz-go's GroupTransactSession, KIP-447 fencing by group
//     generation). A worker crash or a rebalance aborts what was in flight;
//     the next owner sees the committed progress only.
//   - Bad input is dead-lettered, never dropped.
//
// # Progress model (durable)
//
// For each delay partition p the committed state is two things, both
// written in the transaction that changes them:
//
//	group offset of (group, delay topic, p) = C
//	    every offset below C is resolved (forwarded or dead-lettered)
//
//	state topic (compacted), partition p, one record per marker:
//	    key   = "<delay topic>/<p>/<offset>"   ASCII, offset >= C
//	    value = "resolved"                     live marker: already forwarded
//	          | nil (tombstone)                marker deleted once C passes it
//
//	delay partition p:  ... C ............................ end
//	                        |pending|mark|pending|mark|mark|pending|
//	                         (index)       (index)          (index)
//
// A transaction that resolves offsets of p commits C' = the lowest offset
// of p still pending (or one past the last read when none is), writes a
// marker for each offset it resolved at or above C', and a tombstone for
// each marker now below C'. Only records resolved out of due order need a
// marker: when a partition's records fall due in log order (one delay for
// all, say) C simply follows and no marker is written.
//
// A worker that takes p over reads state partition p to its end (read
// committed; a transaction left open by a crashed owner is waited for),
// then consumes p from C, skipping marked offsets. So nothing resolved is
// forwarded again and nothing pending is skipped. What it re-reads is the
// delay partition from its oldest pending record: take-over time grows
// with the longest pending delay, not with the topic's history (the issue
// asks for a bound by a snapshot interval; that is not built).
//
// # Memory
//
// The index holds (due, partition, offset) per pending record, about 90
// bytes each, not the body: a record read more than BodyLead before its due
// time drops its body and a loader fetches it again (by offset, reading
// runs of nearby offsets) BodyLead before it is due. RAM therefore grows
// with the number of pending records at ~90 B each (1 GiB per ~12 million),
// not with their size; on-disk time buckets, which would bound it by the
// near window, are not built.
//
// # Caveats
//
//   - A record must be fired before the delay topic's retention deletes it;
//     copying long-pending records forward is not built. A record deleted
//     before its due time is dead-lettered with a reason saying so.
//   - A produce to a business topic that keeps failing (missing topic with
//     auto-create off, no ACL) aborts the transaction again and again; the
//     worker logs it and does not skip the record.
//   - The state topic needs at least as many partitions as the delay topic.
package kafkamode
