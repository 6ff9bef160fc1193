#!/usr/bin/env bash
# hourglass against Apache RocketMQ 5.3.3, both through the official
# RocketMQ 5 Go client (internal/rmqbench), in the same run on this machine:
# $RMQBENCH_RUNS runs (default 3) of the spread and herd phases against each,
# alternating which goes first, then a Markdown summary (median and range
# over the runs, ratios) on stdout and in OUTDIR/summary.md.
#
#   scripts/bench-rocketmq.sh [OUTDIR]     (make bench-rocketmq)
#
# OUTDIR (default: a new temp folder) receives one JSON report per system
# and run, rss.txt and the summary. hourglass runs with its defaults (sync
# flush: a send is answered after fdatasync) on a fresh data directory per
# run; RocketMQ with its broker's defaults (async flush) plus the timer
# settings of scripts/rocketmq.sh. Both are reached with the client's
# default TLS. Takes about 20 minutes and up to ~1.6 GiB of RAM (RocketMQ's
# three JVMs); RMQBENCH_ARGS adds flags to every rmqbench run.
set -euo pipefail
cd "$(dirname "$0")/.."

runs="${RMQBENCH_RUNS:-3}"
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
work="$(mktemp -d)"
hg=
cleanup() {
	[ -n "$hg" ] && kill -9 "$hg" 2>/dev/null || true
	scripts/rocketmq.sh stop || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/hourglass" ./cmd/hourglass
go build -o "$work/rmqbench" ./internal/rmqbench

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# The proxy's gRPC and remoting ports on free ports: 8081 and 8080, its
# defaults, may be taken (8081 is also hourglass's default gRPC port).
export HOURGLASS_RMQ_GRPC_PORT="${HOURGLASS_RMQ_GRPC_PORT:-$(freeport)}"
export HOURGLASS_RMQ_REMOTING_PORT="${HOURGLASS_RMQ_REMOTING_PORT:-$(freeport)}"

topics=(rmqbench-warm)
for r in $(seq "$runs"); do topics+=("rmqbench-spread-$r" "rmqbench-herd-$r"); done
echo "bench-rocketmq: starting RocketMQ 5.3.3 (scripts/rocketmq.sh)" >&2
rmq="$(scripts/rocketmq.sh start "${topics[@]}")"

rss() { ps -o rss= -p "$1" 2>/dev/null | tr -d ' ' || echo 0; }

bench() { # system flush endpoint run [rmqbench flags]
	local system="$1" flush="$2" endpoint="$3" r="$4"
	shift 4
	env "rocketmq.client.logRoot=$out/client-log" "$work/rmqbench" -endpoint "$endpoint" -system "$system" \
		-flush "$flush" -run "$r" -spread-topic "rmqbench-spread-$r" -herd-topic "rmqbench-herd-$r" \
		-json "$out/$system-$r.json" "$@" ${RMQBENCH_ARGS:-} | tee "$out/$system-$r.txt"
}

run_hourglass() { # run
	local http grpc
	http="$(freeport)"
	grpc="$(freeport)"
	"$work/hourglass" serve --data-dir "$work/hg-data-$1" --listen "127.0.0.1:$http" \
		--grpc-listen "127.0.0.1:$grpc" >"$out/hourglass-serve-$1.log" 2>&1 &
	hg=$!
	for _ in $(seq 200); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$grpc") 2>/dev/null; then break; fi
		sleep 0.05
	done
	bench hourglass sync "127.0.0.1:$grpc" "$1" -metrics "http://127.0.0.1:$http/metrics"
	echo "run $1: hourglass RSS after the run $(rss "$hg") KiB" >>"$out/rss.txt"
	kill "$hg" && wait "$hg" || true
	hg=
	rm -rf "$work/hg-data-$1"
}

run_rocketmq() { # run
	bench rocketmq async "$rmq" "$1"
	local total=0 name pid
	for name in namesrv broker proxy; do
		pid="$(cat "${HOURGLASS_RMQ_DIR:-${TMPDIR:-/tmp}/hourglass-rocketmq}/$name.pid")"
		total=$((total + $(rss "$pid")))
	done
	echo "run $1: RocketMQ RSS after the run (namesrv + broker + proxy) $total KiB" >>"$out/rss.txt"
}

# RocketMQ's JVMs send 3 to 4 times slower while their code is still being
# compiled: one unrecorded pass of 10,000 delayed messages warms them first.
echo "bench-rocketmq: warming RocketMQ up (not recorded)" >&2
env "rocketmq.client.logRoot=$out/client-log" "$work/rmqbench" -endpoint "$rmq" -system rocketmq-warm-up \
	-spread-topic rmqbench-warm -n 10000 -spread 5s -warmup 0 >/dev/null

for r in $(seq "$runs"); do
	echo "bench-rocketmq: run $r of $runs, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
	if [ $((r % 2)) = 1 ]; then
		run_hourglass "$r"
		run_rocketmq "$r"
	else
		run_rocketmq "$r"
		run_hourglass "$r"
	fi
done

"$work/rmqbench" -summarize "$out" | tee "$out/summary.md"
cat "$out/rss.txt"
echo "bench-rocketmq: reports in $out" >&2
