#!/usr/bin/env bash
# A real Apache Kafka for tests: one KRaft process (broker and controller) on
# loopback, run from the release jars.
#
#   scripts/kafka.sh start    fetch the jars once, format a fresh storage
#                             directory, start Kafka, wait until it accepts
#                             connections, print its bootstrap address
#   scripts/kafka.sh stop     kill it by its PID, remove its directory
#   scripts/kafka.sh restart  stop it cleanly and start it again on the same
#                             directory and ports (a broker restart)
#   scripts/kafka.sh status   say whether it runs (exit 0) or not (exit 1)
#   scripts/kafka.sh jars     fetch the jars once, print their folder (for
#                             scripts/kafka-cluster.sh)
#
# Settings (environment):
#   KAFKA_PORT        listener port (default 19092; 0 picks a free one)
#   KAFKA_VERSION     org.apache.kafka:kafka_2.13 version (default 4.1.1)
#   HOURGLASS_CACHE   cache folder for the jars (default ~/.cache/hourglass);
#                     the jars land in $HOURGLASS_CACHE/kafka-$KAFKA_VERSION/lib
#   KAFKA_STATE       file that records the PID and directory of the running
#                     Kafka (default ${TMPDIR:-/tmp}/hourglass-kafka.state)
#   KAFKA_JVM_OPTS    the broker JVM's options (default -Xms256m -Xmx512m;
#                     split on spaces), e.g. to try another collector
#
# Needs java (17 or later) and mvn. The jars (about 54 MiB) are fetched with
# `mvn dependency:copy-dependencies` from a generated pom, once; a file named
# .complete marks a finished fetch, so an interrupted one is redone. The
# broker is tuned for a single node: every internal topic has replication 1
# and min ISR 1, a new consumer group rebalances at once, and a transaction
# past its timeout is aborted within a second (Kafka's default: 10 s).
set -euo pipefail

version=${KAFKA_VERSION:-4.1.1}
cache=${HOURGLASS_CACHE:-$HOME/.cache/hourglass}/kafka-$version
state=${KAFKA_STATE:-${TMPDIR:-/tmp}/hourglass-kafka.state}
port=${KAFKA_PORT:-19092}

die() {
	echo "kafka.sh: $*" >&2
	exit 1
}

# in_use PORT: something accepts connections on 127.0.0.1:PORT.
in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# free_port FROM: the first port at or above FROM that nothing listens on.
free_port() {
	local p=$1
	while in_use "$p"; do
		p=$((p + 1))
		[ "$p" -lt 65535 ] || die "no free port above $1"
	done
	echo "$p"
}

# running: the state file names a live process. Sets pid, dir and run_port.
running() {
	pid= dir= run_port=
	[ -f "$state" ] || return 1
	pid=$(sed -n 's/^pid=//p' "$state")
	dir=$(sed -n 's/^dir=//p' "$state")
	run_port=$(sed -n 's/^port=//p' "$state")
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

fetch() {
	[ -e "$cache/.complete" ] && return 0
	command -v mvn >/dev/null || die "mvn is not installed (needed once, to fetch the Kafka jars)"
	rm -rf "$cache"
	mkdir -p "$cache"
	cat >"$cache/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>hourglass.test</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$version</version>
    </dependency>
  </dependencies>
</project>
EOF
	echo "kafka.sh: fetching kafka_2.13 $version into $cache (once)" >&2
	(cd "$cache" && mvn -q -B dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory=lib </dev/null) >&2 ||
		die "mvn could not fetch kafka_2.13 $version"
	touch "$cache/.complete"
}

start() {
	if running; then
		die "already running (pid $pid, directory $dir); run: $0 stop"
	fi
	command -v java >/dev/null || die "java is not installed"
	fetch
	if [ "$port" = 0 ]; then
		port=$(free_port 19092)
	elif in_use "$port"; then
		die "port $port is in use; set KAFKA_PORT (0 picks a free one)"
	fi
	local cport
	cport=$(free_port $((port + 1)))
	dir=$(mktemp -d "${TMPDIR:-/tmp}/hourglass-kafka.XXXXXX")
	cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
min.insync.replicas=1
group.initial.rebalance.delay.ms=0
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
EOF
	# A KRaft cluster ID is 16 random bytes in URL-safe base64, unpadded.
	local id
	id=$(head -c16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
	# One in 64 begins with '-', which the tool's argument parser takes
	# for an option: clear the first byte's top bits (still 16 bytes).
	case $id in -*) id="A${id#-}" ;; esac
	java -cp "$cache/lib/*" kafka.tools.StorageTool format -t "$id" \
		-c "$dir/server.properties" >"$dir/format.log" 2>&1 ||
		{ cat "$dir/format.log" >&2; die "formatting the storage failed"; }

	launch
}

# launch starts Kafka on the formatted directory $dir, listening on $port,
# records it in the state file and waits until it accepts connections.
launch() {
	# setsid: the broker must not die with the shell that started it (make
	# runs each recipe line in its own shell).
	local jvm
	read -r -a jvm <<<"${KAFKA_JVM_OPTS:--Xms256m -Xmx512m}"
	setsid java "${jvm[@]}" -Dkafka.logs.dir="$dir/logs" \
		-cp "$cache/lib/*" kafka.Kafka "$dir/server.properties" \
		>>"$dir/kafka.log" 2>&1 </dev/null &
	pid=$!
	printf 'pid=%s\ndir=%s\nport=%s\n' "$pid" "$dir" "$port" >"$state"

	local i
	for i in $(seq 600); do
		kill -0 "$pid" 2>/dev/null || {
			tail -40 "$dir/kafka.log" >&2
			die "Kafka exited during start (log above)"
		}
		if in_use "$port"; then
			echo "127.0.0.1:$port"
			return 0
		fi
		sleep 0.1
	done
	tail -40 "$dir/kafka.log" >&2
	stop
	die "Kafka did not accept connections on port $port within 60 s"
}

# halt stops the running Kafka ($pid): SIGTERM, and SIGKILL past 20 s (a
# clean stop takes 3-10 s).
halt() {
	kill "$pid" 2>/dev/null || true
	local i
	for i in $(seq 200); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -9 "$pid" 2>/dev/null || true
	fi
}

# restart stops Kafka cleanly and starts it again on the same directory and
# ports: what a rolling restart does to a broker.
restart() {
	running || die "not running"
	port=$run_port
	halt
	launch
}

stop() {
	if ! running; then
		[ -n "${dir:-}" ] && rm -rf "$dir"
		rm -f "$state"
		echo "kafka.sh: not running" >&2
		return 0
	fi
	halt
	rm -rf "$dir"
	rm -f "$state"
	echo "kafka.sh: stopped (pid $pid)" >&2
}

status() {
	if running; then
		echo "running: pid $pid, 127.0.0.1:$run_port, directory $dir"
		return 0
	fi
	echo "not running"
	return 1
}

case "${1:-}" in
start) start ;;
stop) stop ;;
restart) restart ;;
status) status ;;
jars) fetch && echo "$cache/lib" ;;
*)
	echo "usage: $0 start|stop|restart|status|jars" >&2
	exit 2
	;;
esac
