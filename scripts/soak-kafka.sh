#!/usr/bin/env bash
# The Kafka mode soak (make soak-kafka): a three-node Kafka cluster on
# loopback (scripts/kafka-cluster.sh: replication factor 3,
# min.insync.replicas=2), three `hourglass kafka` workers and a steady load
# of delayed messages for a few minutes (`hourglass bench kafka`). During the
# run one Kafka node is SIGKILLed and started again later, and one worker is
# SIGKILLed when half the messages arrived and restarted (the bench's
# drill). A read_committed consumer checks every message: the soak fails
# unless 0 are lost, 0 duplicated and 0 early.
#
# Settings (environment), with their defaults:
#   SOAK_N=60000            messages
#   SOAK_PRODUCE_IN=150s    produced evenly over this long
#   SOAK_TIERS=1s,5s,30s,60s  delays, each message draws one
#   SOAK_KILL_AT=60         seconds after the bench starts, SIGKILL node 2
#   SOAK_DOWN=30            seconds node 2 stays down
# Needs java and mvn (once, for the jars) like scripts/kafka.sh; not run by
# CI (it takes about five minutes and 1.5 GiB of RAM).
set -euo pipefail
cd "$(dirname "$0")/.."

n=${SOAK_N:-60000}
produce_in=${SOAK_PRODUCE_IN:-150s}
tiers=${SOAK_TIERS:-1s,5s,30s,60s}
kill_at=${SOAK_KILL_AT:-60}
down=${SOAK_DOWN:-30}
export KAFKA_CLUSTER_STATE=${KAFKA_CLUSTER_STATE:-${TMPDIR:-/tmp}/hourglass-soak-kafka.$$}

work=$(mktemp -d "${TMPDIR:-/tmp}/hourglass-soak.XXXXXX")
bench_pid=
cleanup() {
	[ -n "$bench_pid" ] && kill "$bench_pid" 2>/dev/null || true
	./scripts/kafka-cluster.sh stop || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/hourglass" ./cmd/hourglass
brokers=$(./scripts/kafka-cluster.sh start)
echo "soak: cluster $brokers; $n messages over $produce_in, tiers $tiers; node 2 killed at +${kill_at}s for ${down}s"
started=$(date +%s)
"$work/hourglass" bench kafka -brokers "$brokers" -systems hourglass -runs 1 -workers 3 -kill \
	-replication 3 -strict -n "$n" -produce-in "$produce_in" -tiers "$tiers" &
bench_pid=$!

sleep "$kill_at"
if kill -0 "$bench_pid" 2>/dev/null; then
	./scripts/kafka-cluster.sh kill 2
	sleep "$down"
	./scripts/kafka-cluster.sh restart 2
else
	echo "soak: the bench ended before the broker kill; make the load longer (SOAK_PRODUCE_IN)" >&2
fi
status=0
wait "$bench_pid" || status=$?
bench_pid=
echo "soak: finished in $(($(date +%s) - started)) s, exit status $status"
exit "$status"
