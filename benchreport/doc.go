// Package benchreport holds the result definitions of hourglass's load
// benchmarks: what lost, early and duplicated mean, the lateness summary
// (nearest-rank quantiles in milliseconds), the rates, a result row and a
// herd's report, with their JSON names. `hourglass bench`
// (internal/loadtest) and the baseline against NATS JetStream
// (benchmarks/natsherd, a module of its own that cannot import an
// internal package) both tally with it, so that their reports measure
// the same thing the same way. Standard library only, so that importing
// it brings no dependency into either module.
package benchreport
