// Command natsherd is the independent baseline of hourglass's herd:
// the load of `hourglass bench --herd N@T --consumers C --max M`, run
// against NATS JetStream message scheduling instead of hourglass.
//
// It is a Go module of its own, so that nats-server and its dependencies
// never enter hourglass's go.mod. It measures with hourglass bench's own
// result definitions (package benchreport, through a replace to the
// checkout):
//
//   - the instant is the start of sending plus T, rounded down to the
//     millisecond; every message is due then;
//   - an arrival is the first time a consumer gets a message (here, when
//     the NATS client hands it to the consumer's code; in hourglass bench,
//     when the receive returns its batch);
//   - early: an arrival before the instant, by any amount;
//   - lost: a message JetStream acknowledged (PubAck) that never arrived
//     within the deadline after the instant;
//   - duplicated: a message that arrived more than once;
//   - first and last arrival: the earliest and latest arrival, minus the
//     instant.
//
// The load: each message is a schedule on a subject of its own (JetStream
// keeps one schedule per subject) with the headers Nats-Schedule
// "@at <instant>" and Nats-Schedule-Target; at the instant the server
// publishes a copy to the target subject, which one durable pull consumer
// with explicit acks filters on. Producers publish asynchronously in
// batches and wait for the PubAcks; consumers, each on its own
// connection, fetch up to M messages with a long poll and ack each one.
//
// The server: without --server, natsherd starts itself as `natsherd
// serve`, an embedded nats-server with JetStream on file storage in a
// process of its own (as `hourglass serve` runs apart from its bench).
// --sync chooses its fsync policy: default (nats-server's background
// fsync every 2 minutes: a PubAck does not mean the message is on disk)
// or always (sync_interval: always, an fsync after each message written).
// hourglass, by default, fdatasyncs before it answers a send.
//
// `natsherd summarize DIR` prints median (range) per configuration of the
// reports of both benches in DIR; scripts/bench-nats.sh (make bench-nats)
// runs them side by side.
package main
