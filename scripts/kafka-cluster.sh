#!/usr/bin/env bash
# A three-node Apache Kafka cluster on loopback, for the Kafka mode soak
# (make soak-kafka): each node is one KRaft process (broker and controller),
# run from the jars scripts/kafka.sh fetches. Replication factor 3 and
# min.insync.replicas=2 everywhere, internal topics included, so the
# cluster keeps accepting acks=all writes and transactions with one node
# down.
#
#   scripts/kafka-cluster.sh start      format three fresh nodes, start them,
#                                       wait until each accepts connections,
#                                       print the bootstrap list host:port,...
#   scripts/kafka-cluster.sh kill N     SIGKILL node N (1-3)
#   scripts/kafka-cluster.sh restart N  start node N again on its directory
#   scripts/kafka-cluster.sh stop       kill every node, remove the directory
#   scripts/kafka-cluster.sh status     list the nodes (exit 1 if none runs)
#
# Settings (environment): KAFKA_CLUSTER_STATE, the folder holding the nodes'
# data, logs and PIDs (default ${TMPDIR:-/tmp}/hourglass-kafka-cluster);
# KAFKA_VERSION and HOURGLASS_CACHE as for scripts/kafka.sh.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=${KAFKA_CLUSTER_STATE:-${TMPDIR:-/tmp}/hourglass-kafka-cluster}
nodes=3

die() {
	echo "kafka-cluster.sh: $*" >&2
	exit 1
}

in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# free_ports N FROM: N ports at or above FROM that nothing listens on.
free_ports() {
	local n=$1 p=$2 out=()
	while [ "${#out[@]}" -lt "$n" ]; do
		in_use "$p" || out+=("$p")
		p=$((p + 1))
		[ "$p" -lt 65535 ] || die "no free ports above $2"
	done
	echo "${out[@]}"
}

pid_of() { cat "$top/node$1/pid" 2>/dev/null || true; }
port_of() { sed -n 's/^listeners=PLAINTEXT:\/\/127.0.0.1:\([0-9]*\),.*/\1/p' "$top/node$1/server.properties"; }
alive() {
	local pid
	pid=$(pid_of "$1")
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# spawn N: start node N on its formatted directory. A node opens its
# broker port only once the controller quorum (two of three) is up, so
# start all, then wait for each (wait_up).
spawn() {
	local dir=$top/node$1
	setsid java -Xms256m -Xmx512m -Dkafka.logs.dir="$dir/logs" \
		-cp "$lib/*" kafka.Kafka "$dir/server.properties" \
		>>"$dir/kafka.log" 2>&1 </dev/null &
	echo $! >"$dir/pid"
}

# wait_up N: wait until node N accepts connections.
wait_up() {
	local n=$1 dir=$top/node$1 port i
	port=$(port_of "$n")
	for i in $(seq 900); do
		alive "$n" || {
			tail -30 "$dir/kafka.log" >&2
			die "node $n exited during start (log above)"
		}
		in_use "$port" && return 0
		sleep 0.1
	done
	die "node $n did not accept connections on port $port within 90 s"
}

start() {
	[ -d "$top" ] && die "$top exists (a cluster runs or was not stopped); run: $0 stop"
	command -v java >/dev/null || die "java is not installed"
	lib=$("$here/kafka.sh" jars)
	mkdir -p "$top"
	echo "$lib" >"$top/lib"
	local ports voters="" bootstrap="" i id
	read -r -a ports <<<"$(free_ports $((2 * nodes)) 19192)"
	for i in $(seq "$nodes"); do
		voters+="${voters:+,}$i@127.0.0.1:${ports[$((nodes + i - 1))]}"
		bootstrap+="${bootstrap:+,}127.0.0.1:${ports[$((i - 1))]}"
	done
	id=$(head -c16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
	# One in 64 begins with '-', which the storage tool takes for an
	# option: clear the first byte's top bits (still 16 bytes).
	case $id in -*) id="A${id#-}" ;; esac
	for i in $(seq "$nodes"); do
		local dir=$top/node$i port=${ports[$((i - 1))]} cport=${ports[$((nodes + i - 1))]}
		mkdir -p "$dir"
		cat >"$dir/server.properties" <<EOP
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$voters
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
num.partitions=3
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
offsets.topic.num.partitions=6
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=6
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
group.initial.rebalance.delay.ms=0
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
EOP
		java -cp "$lib/*" kafka.tools.StorageTool format -t "$id" -c "$dir/server.properties" \
			>"$dir/format.log" 2>&1 || {
			cat "$dir/format.log" >&2
			die "formatting node $i failed"
		}
	done
	for i in $(seq "$nodes"); do
		spawn "$i"
	done
	for i in $(seq "$nodes"); do
		wait_up "$i"
	done
	echo "$bootstrap" >"$top/bootstrap"
	echo "$bootstrap"
}

node_arg() {
	case "${1:-}" in
	[1-3]) ;;
	*) die "name a node: 1, 2 or 3" ;;
	esac
}

kill_node() {
	node_arg "${1:-}"
	alive "$1" || die "node $1 is not running"
	local pid
	pid=$(pid_of "$1")
	kill -9 "$pid"
	while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
	echo "kafka-cluster.sh: node $1 killed (pid $pid)" >&2
}

restart_node() {
	node_arg "${1:-}"
	[ -d "$top/node$1" ] || die "no node $1 in $top"
	alive "$1" && die "node $1 is running"
	lib=$(cat "$top/lib")
	spawn "$1"
	wait_up "$1"
	echo "kafka-cluster.sh: node $1 started again (pid $(pid_of "$1"))" >&2
}

stop() {
	[ -d "$top" ] || {
		echo "kafka-cluster.sh: not running" >&2
		return 0
	}
	local i pid
	for i in $(seq "$nodes"); do
		pid=$(pid_of "$i")
		[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
	done
	for i in $(seq "$nodes"); do
		pid=$(pid_of "$i")
		while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
	done
	rm -rf "$top"
	echo "kafka-cluster.sh: stopped" >&2
}

status() {
	[ -d "$top" ] || {
		echo "not running"
		return 1
	}
	local i any=1
	for i in $(seq "$nodes"); do
		if alive "$i"; then
			echo "node $i: running, pid $(pid_of "$i"), 127.0.0.1:$(port_of "$i")"
			any=0
		else
			echo "node $i: down"
		fi
	done
	return $any
}

case "${1:-}" in
start) start ;;
kill) kill_node "${2:-}" ;;
restart) restart_node "${2:-}" ;;
stop) stop ;;
status) status ;;
*)
	echo "usage: $0 start|kill N|restart N|stop|status" >&2
	exit 2
	;;
esac
