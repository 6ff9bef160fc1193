// Package loadtest is `hourglass bench`: the acceptance test an operator
// runs against a hourglass deployment before going live. It sends
// messages with delays over the HTTP API, receives them in a consumer
// group, and checks the broker's promises message by message: none lost
// (acknowledged by the broker but never delivered before a deadline),
// none early (delivered before its due time), and how late, per delay
// tier, with duplicates counted. A crash drill (--drill) runs the broker
// as a child process and SIGKILLs it during the run; a herd (--herd)
// makes many messages due at one instant.
//
// # How a message is followed
//
// Every message carries two properties: bench_id, the run's ID and a
// sequence number, and bench_due, the intended due time in Unix
// milliseconds (sent as the API's "at"). The bench keeps one small record
// per sequence number: intended due time, when the send was answered and
// how (acknowledged or failed), when a receive first returned it and how
// many times. Lateness is arrival at the consumer minus the intended due
// time, measured on the bench's wall clock with nanosecond resolution, so
// it includes the broker's dispatch delay, the long poll and the HTTP
// round trip: what an application sees.
//
// # Caveats
//
//   - Early arrivals are counted with zero tolerance. That is only fair
//     when the bench and the broker read the same clock: run it on the
//     broker's machine or keep both clocks synchronised.
//   - A send the broker refused before acting on it (connection refused,
//     429, 503) is retried under the same bench IDs with fresh due times.
//     A send that failed otherwise (connection reset, timeout) may have
//     been stored. With --dedup (the default) every message carries its
//     bench ID as dedup ID, and such a send is sent again with the same
//     IDs and due times: the broker stores each message once. With
//     --dedup=false it is not acknowledged and is resent as new messages;
//     if the broker had stored the first attempt after all, it is
//     delivered too, counted as "unacknowledged, delivered", never as a
//     duplicate or as lost.
//   - A message whose ack failed is delivered again after its lease and
//     counted as a duplicate: that is the documented at-least-once window.
//     After every message arrived the bench keeps receiving for --linger
//     to see such late duplicates; in a drill that defaults to the lease
//     plus two seconds.
//   - With --topic naming a topic that holds other messages, those are
//     received, acked and counted as foreign; by default every run uses a
//     fresh topic.
//   - The consumers run in the bench's process: on a small machine shared
//     with the broker, their CPU bounds the receive rate, and lateness
//     past that rate is the bench's. Raise --consumers and --max, or keep
//     --rate below the receive rate the report shows.
//   - The recorder holds about 48 bytes per message in memory: a run of
//     ten million messages needs about half a gigabyte.
package loadtest
