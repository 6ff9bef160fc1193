// Package kafkabench is `hourglass bench kafka`: Kafka mode measured on
// the operator's own Kafka, beside the floor of that Kafka. It produces N
// delayed messages of a fixed size over a few seconds, each with a delay
// drawn from the tiers, to a delay topic of its own, and reads the
// business topic read_committed, noting when each message arrived. Per
// system and run it reports lateness at that consumer (p50/p99/max, and a
// warm p99 without the messages due in the first -warmup), messages
// early, lost and duplicated (strict counts: every message is produced
// with its own key and due time, and every arrival is counted), bytes
// written to Kafka per message, the workers' peak RSS, and the 1-minute
// load average at the start and end of each run.
//
// The systems are:
//
//   - hourglass: `hourglass kafka` workers, exactly once (the default
//     --delivery);
//   - hourglass-alo: the same with --delivery at-least-once;
//   - floor: a bare exactly-once loop (floor.go) that consumes the same
//     kind of delay topic, holds each record in RAM until due, and
//     forwards what is due in one transaction with the consumed offsets,
//     waiting for the coordinator to complete each before the next: the
//     least any exactly-once delay forwarder can cost on that cluster;
//   - floor-alo: a bare at-least-once loop (flooralo.go) that holds each
//     record in RAM until due and produces it at once with the
//     idempotent producer, committing offsets every 100 ms: the least any
//     at-least-once forwarder can cost, hourglass-alo's floor.
//
// Every worker is a child process (this binary run as `hourglass kafka`,
// or as the floor), so a kill is a real SIGKILL and an RSS is the
// worker's alone. The drill (-workers N -kill) SIGKILLs the first worker
// when half the messages have arrived and restarts it with its worker ID
// (-static: as a static group member, so it resumes its partitions without
// a rebalance; -no-restart: it stays dead and the others take over after
// -session-timeout); the lateness of the messages due after the kill shows
// what the failover cost. -kill-broker runs a shell command at that moment
// (a soak kills a Kafka node with it). -delay-topic measures workers
// already running instead of starting any.
//
// The developer's comparisons with the seed's scheme C and the memory per
// pending message (internal/kafkabench) add systems through Options.Extra
// and reuse this package's run loop, collector and report.
package kafkabench
