#!/usr/bin/env bash
# The herd of issue 8 against an independent baseline, in the same run:
# `hourglass bench --herd` against `hourglass serve`, and the same load
# against NATS JetStream message scheduling (benchmarks/natsherd, its own Go
# module with nats-server 2.15.2 embedded). $NATSBENCH_RUNS runs (default 3)
# of four configurations, alternating which system goes first:
#
#   hourglass-default    hourglass serve, defaults (fdatasync before every ack)
#   hourglass-unbounded  the same with --dispatch-rate -1
#   nats-default         nats-server's default fsync (every 2 minutes)
#   nats-always          nats-server with sync_interval: always (its herd is
#                        due 30 s after sending starts, not 10 s: see below)
#
#   scripts/bench-nats.sh [OUTDIR]     (make bench-nats)
#
# Every run starts its broker on a fresh data directory and stops it after.
# OUTDIR (default: a new temp folder) receives NAME-RUN.json (the bench's
# report), NAME-RUN.txt (its table), NAME-RUN.load (the 1-minute load
# average at the start) and summary.md (median and range per configuration,
# and the ratios hourglass/NATS of the median last arrival). About 3 to 5
# minutes; needs only Go and the module cache (or the Go module proxy).
set -euo pipefail
cd "$(dirname "$0")/.."

runs="${NATSBENCH_RUNS:-3}"
herd="${NATSBENCH_HERD:-20000@10s}"
# nats-always stored 1,000 to 5,400 publishes a second here (an fsync
# each): 20,000 may take 20 s, so its herd is due later, for all of it to be stored
# before the instant as it is for the others. Everything is measured from
# the instant, so the lead time changes nothing else.
always_herd="${NATSBENCH_ALWAYS_HERD:-20000@30s}"
# A deadline long enough for nats-always's drain (about 800/s here), so
# that slow is not counted as lost.
common=(--consumers 8 --max 1000 --deadline 60s)
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
work="$(mktemp -d)"
hg=
cleanup() {
	if [ -n "$hg" ]; then kill "$hg" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

go build -o bin/hourglass ./cmd/hourglass
(cd benchmarks/natsherd && go build -o "$work/natsherd" .)

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
loadavg() { cut -d' ' -f1 /proc/loadavg; }

run_hourglass() { # name run [serve flags]
	local name="$1" r="$2" http grpc
	shift 2
	http="$(freeport)"
	grpc="$(freeport)"
	# Defaults but the ports: gRPC's default 8081 may be taken.
	bin/hourglass serve --data-dir "$work/hg-$name-$r" --listen "127.0.0.1:$http" \
		--grpc-listen "127.0.0.1:$grpc" "$@" >"$out/$name-$r.serve.log" 2>&1 &
	hg=$!
	for _ in $(seq 200); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$http") 2>/dev/null; then break; fi
		sleep 0.05
	done
	loadavg >"$out/$name-$r.load"
	bin/hourglass bench --server "http://127.0.0.1:$http" --herd "$herd" "${common[@]}" --progress 0 \
		--json "$out/$name-$r.json" | tee "$out/$name-$r.txt" || echo "bench-nats: $name run $r FAILED (see above)" >&2
	kill "$hg" && wait "$hg" || true
	hg=
	rm -rf "$work/hg-$name-$r"
}

run_nats() { # name run sync herd
	local name="$1" r="$2" sync="$3" h="$4"
	loadavg >"$out/$name-$r.load"
	"$work/natsherd" --herd "$h" "${common[@]}" --sync "$sync" --store-dir "$work/nats-$name-$r" \
		--json "$out/$name-$r.json" | tee "$out/$name-$r.txt" || echo "bench-nats: $name run $r FAILED (see above)" >&2
	rm -rf "$work/nats-$name-$r"
}

hourglass_runs() {
	run_hourglass hourglass-default "$1"
	run_hourglass hourglass-unbounded "$1" --dispatch-rate -1
}

nats_runs() {
	run_nats nats-default "$1" default "$herd"
	run_nats nats-always "$1" always "$always_herd"
}

for r in $(seq "$runs"); do
	echo "bench-nats: run $r of $runs, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
	if [ $((r % 2)) = 1 ]; then
		hourglass_runs "$r"
		nats_runs "$r"
	else
		nats_runs "$r"
		hourglass_runs "$r"
	fi
done

"$work/natsherd" summarize "$out" | tee "$out/summary.md"
echo "bench-nats: reports in $out" >&2
