#!/usr/bin/env bash
# hourglass's remoting listener against Apache RocketMQ 5.3.3's name server
# and broker, both through the official remoting Java client
# (rocketmq-client 4.9.8, unchanged), in the same run on this machine:
# compat/java-remoting/src/bench/java/Bench.java, $RMQBENCH_RUNS runs
# (default 3) against each, alternating which goes first, then the Markdown
# summary of internal/rmqbench -summarize (median and range over the runs,
# ratios) on stdout and in OUTDIR/summary.md.
#
#   scripts/bench-rocketmq-remoting.sh [OUTDIR]     (make bench-rocketmq-remoting)
#
# Each run has three phases of 20,000 messages of 256 B (BENCH_N), measured
# at a push consumer: "spread", delay levels 1 to 4 in turn, sent as fast as
# the broker answers; "herd", all at level 3; and "paced", the spread's
# levels sent at 1,000 a second (RMQBENCH_PACED_RATE; 0 skips the phase),
# so that the client's senders do not take the consumer's CPU (Bench.java
# says how each figure is taken). hourglass runs with its
# defaults (sync flush: a send is answered after fdatasync) on a fresh data
# directory per run; RocketMQ with its broker's defaults (async flush) plus
# the settings of scripts/rocketmq.sh, reached through its name server
# (127.0.0.1:9876), not its proxy. RSS after each run: hourglass's process;
# RocketMQ's name server and broker (its proxy, which this client does not
# use, is left out). Takes about 10 minutes and up to ~1.6 GiB of RAM.
#
# RMQBENCH_RMQ_FLUSH=sync runs RocketMQ's broker with SYNC_FLUSH (a send
# answered once the commit log is flushed: hourglass's durability), to
# compare the two at equal durability; the report's flush field says which.
#
# RMQBENCH_BASELINE=BIN compares with another hourglass binary instead of
# RocketMQ (system "baseline", the same flags, alternating as above): a
# before-and-after of a change in one run, with no RocketMQ started.
set -euo pipefail
cd "$(dirname "$0")/.."

runs="${RMQBENCH_RUNS:-3}"
n="${BENCH_N:-20000}"
version=4.9.8
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cacheroot="${HOURGLASS_CACHE:-$HOME/.cache/hourglass}"
cache="$cacheroot/rocketmq-client-$version"
rmqdir="${HOURGLASS_RMQ_DIR:-${TMPDIR:-/tmp}/hourglass-rocketmq}"
work="$(mktemp -d)"
hg=
cleanup() {
	[ -n "$hg" ] && kill -9 "$hg" 2>/dev/null || true
	scripts/rocketmq.sh stop || true
	rm -rf "$work"
}
trap cleanup EXIT

if [ ! -f "$cache/.complete" ]; then
	echo "bench-rocketmq-remoting: fetching rocketmq-client $version with Maven" >&2
	rm -rf "$cache/lib"
	mvn -q -B -f compat/java-remoting/pom.xml -Pacl dependency:copy-dependencies \
		-Drocketmq.version="$version" -DoutputDirectory="$cache/lib" >&2
	touch "$cache/.complete"
fi
javac -nowarn -cp "$cache/lib/*" -d "$work/classes" compat/java-remoting/src/bench/java/Bench.java
go build -o "$work/hourglass" ./cmd/hourglass
go build -o "$work/rmqbench" ./internal/rmqbench

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rss() { ps -o rss= -p "$1" 2>/dev/null | tr -d ' ' || echo 0; }
# The proxy's ports on free ports: 8080 and 8081, its defaults, may be taken.
export HOURGLASS_RMQ_GRPC_PORT="${HOURGLASS_RMQ_GRPC_PORT:-$(freeport)}"
export HOURGLASS_RMQ_REMOTING_PORT="${HOURGLASS_RMQ_REMOTING_PORT:-$(freeport)}"
[ -n "${RMQBENCH_BASELINE:-}" ] || echo "bench-rocketmq-remoting: starting RocketMQ 5.3.3 (scripts/rocketmq.sh)" >&2
baseline="${RMQBENCH_BASELINE:-}"
case "${RMQBENCH_RMQ_FLUSH:-async}" in
async) rmqflush=async ;;
sync) rmqflush=sync; export HOURGLASS_RMQ_FLUSH=SYNC_FLUSH ;;
*) echo "bench-rocketmq-remoting: RMQBENCH_RMQ_FLUSH must be async or sync" >&2; exit 2 ;;
esac
if [ -n "$baseline" ]; then
	[ -x "$baseline" ] || { echo "bench-rocketmq-remoting: RMQBENCH_BASELINE=$baseline is not an executable" >&2; exit 2; }
else
	scripts/rocketmq.sh start >/dev/null
fi

bench() { # system flush namesrv run
	java -Duser.home="$work/home" -Dbench.n="$n" -Dbench.pacedRate="${RMQBENCH_PACED_RATE:-1000}" -cp "$work/classes:$cache/lib/*" \
		Bench "$3" "$1" "$2" "$4" "rb_$1_$4_$RANDOM" "$out/$1-$4.json"
}

run_hourglass() { # run [system binary]
	local remoting system="${2:-hourglass}" bin="${3:-$work/hourglass}"
	remoting="$(freeport)"
	"$bin" serve --data-dir "$work/hg-data-$1" --listen "127.0.0.1:$(freeport)" \
		--grpc-listen "" --remoting-listen "127.0.0.1:$remoting" >"$out/$system-serve-$1.log" 2>&1 &
	hg=$!
	for _ in $(seq 200); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$remoting") 2>/dev/null; then break; fi
		sleep 0.05
	done
	bench "$system" sync "127.0.0.1:$remoting" "$1"
	echo "run $1: $system RSS after the run $(rss "$hg") KiB" >>"$out/rss.txt"
	kill "$hg" && wait "$hg" || true
	hg=
	rm -rf "$work/hg-data-$1"
}

run_rocketmq() { # run
	if [ -n "$baseline" ]; then
		run_hourglass "$1" baseline "$baseline"
		return
	fi
	bench rocketmq "$rmqflush" 127.0.0.1:9876 "$1"
	local total=0 name
	for name in namesrv broker; do
		total=$((total + $(rss "$(cat "$rmqdir/$name.pid")")))
	done
	echo "run $1: RocketMQ RSS after the run (name server + broker) $total KiB" >>"$out/rss.txt"
}

# RocketMQ's JVMs send several times slower while their code is still being
# compiled: one unrecorded run of 5,000 messages a phase warms them first.
if [ -z "$baseline" ]; then
	echo "bench-rocketmq-remoting: warming RocketMQ up (not recorded)" >&2
	java -Duser.home="$work/home" -Dbench.n=5000 -cp "$work/classes:$cache/lib/*" \
		Bench 127.0.0.1:9876 rocketmq-warm-up "$rmqflush" 0 "rb_warm_$RANDOM" "$work/warm-up.json" >/dev/null
fi

for r in $(seq "$runs"); do
	echo "bench-rocketmq-remoting: run $r of $runs, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
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
echo "bench-rocketmq-remoting: reports in $out" >&2
