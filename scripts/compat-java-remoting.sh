#!/usr/bin/env bash
# The official RocketMQ remoting Java client (org.apache.rocketmq:rocketmq-client),
# unchanged, against a real hourglass binary's remoting listener
# (-remoting-listen: name server and broker on one address): the cases of
# compat/java-remoting/src/main/java, once with a 4.9.x client and once with
# a 5.x one (which still speaks remoting).
#
#   scripts/compat-java-remoting.sh [CASE...]      (make compat-java-remoting)
#
# Cases (default: all): delay timer retry orderly orderlyDead sqlRefused broadcast litePull
# transaction query kill acl; CASE@PREFIX runs a case only with the client
# versions that start with PREFIX (litePull@4.). "timer" needs the 5.x
# client's timer API and is not run with 4.x. What is not run is said in the
# output. Each case prints PASS or FAILED with the reason; the script exits 1
# if any failed.
#
# Every version gets its own brokers, on fresh data directories and free
# ports: one for the cases that share a broker (run at once in one JVM, each
# with its own topics, groups and clients), on which "kill" then runs alone
# (it kills that broker with SIGKILL and starts it again); one with
# -auth-token for "acl", meanwhile. The versions run at once too. The client jars are fetched with Maven into a cache folder outside
# the repository ($HOURGLASS_CACHE, default ~/.cache/hourglass).
#
# COMPAT_REMOTING_TARGET=rocketmq runs the same cases against Apache RocketMQ
# 5.3.3 started by scripts/rocketmq.sh (name server 127.0.0.1:9876): the proof
# that the cases themselves are right. There "kill" uses rocketmq.sh
# kill-broker, sends answered "broker busy" are tried again (RocketMQ answers
# it on a loaded machine; hourglass should not), and "acl" is not run (its
# ACL needs a set-up of its own), which the output says.
# COMPAT_REMOTING_VERSIONS (default "4.9.8 5.3.3") picks the client versions;
# COMPAT_REMOTING_KEEP=1 keeps the work folder (logs, data) for a post-mortem.
set -euo pipefail
cd "$(dirname "$0")/.."

all_cases=(delay timer retry orderly orderlyDead sqlRefused broadcast litePull transaction query kill acl)
cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=("${all_cases[@]}")
for c in "${cases[@]}"; do
	case " ${all_cases[*]} " in *" ${c%@*} "*) ;; *) echo "compat-java-remoting: unknown case ${c%@*} (cases: ${all_cases[*]})" >&2; exit 2 ;; esac
done
versions=(${COMPAT_REMOTING_VERSIONS:-4.9.8 5.3.3})
target="${COMPAT_REMOTING_TARGET:-hourglass}"
cacheroot="${HOURGLASS_CACHE:-$HOME/.cache/hourglass}"

work="$(mktemp -d)"
cleanup() {
	local f
	for f in "$work"/*.pid; do
		[ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true
	done
	[ "$target" = rocketmq ] && scripts/rocketmq.sh stop || true
	if [ -n "${COMPAT_REMOTING_KEEP:-}" ]; then
		echo "compat-java-remoting: kept $work (brokers' logs, data, the clients' output)" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

# fetch VERSION: the client's jars (4.x: and its ACL hook, a separate
# artifact there) into the cache, once.
fetch() {
	local v="$1" cache="$cacheroot/rocketmq-client-$1" profile=
	[ -f "$cache/.complete" ] && return 0
	case "$v" in 4.*) profile=-Pacl ;; esac
	echo "compat-java-remoting: fetching rocketmq-client $v with Maven" >&2
	rm -rf "$cache/lib"
	mvn -q -B -f compat/java-remoting/pom.xml $profile dependency:copy-dependencies \
		-Drocketmq.version="$v" -DoutputDirectory="$cache/lib" >&2
	touch "$cache/.complete"
}

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# serve NAME [FLAGS...]: writes $work/NAME.sh, which (re)starts hourglass on
# data dir $work/data-NAME and free ports, records its PID in $work/NAME.pid
# and returns once the remoting port answers (or fails, showing the log);
# $work/NAME-kill.sh kills it with SIGKILL and runs NAME.sh again. Prints the
# remoting address.
serve() {
	local name="$1"
	shift
	local http grpc remoting extra=
	http="$(freeport)" grpc="$(freeport)" remoting="$(freeport)"
	[ $# -gt 0 ] && extra="$(printf ' %q' "$@")"
	cat >"$work/$name.sh" <<EOF
#!/usr/bin/env bash
"$work/hourglass" serve --data-dir "$work/data-$name" --listen 127.0.0.1:$http \\
	--grpc-listen 127.0.0.1:$grpc --remoting-listen 127.0.0.1:$remoting$extra \\
	>>"$work/$name.log" 2>&1 &
echo \$! >"$work/$name.pid"
for _ in \$(seq 400); do
	(exec 3<>/dev/tcp/127.0.0.1/$remoting) 2>/dev/null && exit 0
	kill -0 \$(cat "$work/$name.pid") 2>/dev/null || break
	sleep 0.05
done
echo "hourglass ($name) did not listen on 127.0.0.1:$remoting (its log is shown at the end)" >&2
exit 1
EOF
	cat >"$work/$name-kill.sh" <<EOF
#!/usr/bin/env bash
pid=\$(cat "$work/$name.pid")
kill -9 \$pid
while kill -0 \$pid 2>/dev/null; do sleep 0.05; done
echo "--- killed with SIGKILL, started again ---" >>"$work/$name.log"
exec bash "$work/$name.sh"
EOF
	bash "$work/$name.sh" >&2 || return 1
	echo "127.0.0.1:$remoting"
}

# run VERSION NAMESRV [JAVA_PROPS...] -- CASE...: the cases in one JVM; its
# PASS and FAILED lines go to $work/results-VERSION too.
run() {
	local v="$1" addr="$2" props=()
	shift 2
	while [ "$1" != -- ]; do props+=("$1"); shift; done
	shift
	[ $# -eq 0 ] && return 0
	local rc=0 out
	out="$(mktemp -p "$work")"
	java -Duser.home="$work/home" "${props[@]}" -cp "$work/classes-$v:$cacheroot/rocketmq-client-$v/lib/*" \
		Compat "$addr" "r$RANDOM$RANDOM" "$@" >"$out" 2>&1 || rc=$?
	# The clients' stack traces stay in $out; the progress and verdicts are shown.
	grep -v '^[[:space:]]*at \|^For more information' "$out" || true
	grep -E '^(PASS|FAILED) ' "$out" >>"$work/results-$v" || true
	if ! grep -qE '^(PASS|FAILED) ' "$out"; then
		for c in "$@"; do echo "FAILED $c: the Java run exited $rc without a verdict" | tee -a "$work/results-$v"; done
	fi
}

# notrun VERSION WHY CASE...: records the cases as failed for a reason that
# is not theirs (a broker that did not start).
notrun() {
	local v="$1" why="$2"
	shift 2
	for c in "$@"; do echo "FAILED $c: $why" | tee -a "$work/results-$v"; done
}

for v in "${versions[@]}"; do fetch "$v"; done
if [ "$target" = hourglass ]; then
	go build -o "$work/hourglass" ./cmd/hourglass
else
	scripts/rocketmq.sh start >/dev/null
fi

# one VERSION: compiles the cases against it and runs them on brokers of its
# own; its PASS and FAILED lines end up in $work/results-VERSION.
one() {
	local v="$1" src shared kill acl addr token c aclpid=
	echo "=== rocketmq-client $v against $target"
	src=(compat/java-remoting/src/main/java/*.java)
	case "$v" in
	4.*) src+=(compat/java-remoting/src/v4/java/*.java) ;;
	*) src+=(compat/java-remoting/src/v5/java/*.java) ;;
	esac
	javac -nowarn -cp "$cacheroot/rocketmq-client-$v/lib/*" -d "$work/classes-$v" "${src[@]}" 2>&1 | grep -v '^Note:' || true
	if [ ! -d "$work/classes-$v" ]; then
		notrun "$v" "the cases did not compile against $v" "${cases[@]}"
		touch "$work/done-$v"
		return
	fi

	shared=() kill=() acl=()
	for c in "${cases[@]}"; do
		if [ "$c" != "${c%@*}" ]; then
			case "$v" in "${c#*@}"*) c="${c%@*}" ;; *) echo "${c%@*}: not run with $v (asked for with ${c#*@}* only)"; continue ;; esac
		fi
		case "$c" in
		kill) kill=(kill) ;;
		acl) acl=(acl) ;;
		timer) case "$v" in 4.*) echo "timer: not run with $v (the 4.x client has no timer API: setDeliverTimeMs and setDelayTimeMs came with 5.x)" ;; *) shared+=(timer) ;; esac ;;
		*) shared+=("$c") ;;
		esac
	done

	if [ "$target" = rocketmq ]; then
		addr=127.0.0.1:9876
		run "$v" "$addr" -Dcompat.busyRetries=5 -- "${shared[@]}"
		run "$v" "$addr" -Dcompat.busyRetries=5 -Dcompat.restart="$PWD/scripts/rocketmq.sh kill-broker" -- "${kill[@]}"
		[ ${#acl[@]} -gt 0 ] && echo "acl: not run against Apache RocketMQ (its ACL needs a set-up of its own)"
	else
		# acl on a broker of its own, at the same time as the others.
		if [ ${#acl[@]} -gt 0 ]; then
			token="compat-$RANDOM$RANDOM"
			if addr="$(serve "acl-$v" --auth-token "$token")"; then
				run "$v" "$addr" -Dcompat.accessKey=app -Dcompat.secret="$token" -- acl >"$work/acl-report-$v" 2>&1 &
				aclpid=$!
			else
				notrun "$v" "hourglass with -auth-token did not start (its log is below)" acl
			fi
		fi
		if [ ${#shared[@]} -gt 0 ] || [ ${#kill[@]} -gt 0 ]; then
			if addr="$(serve "main-$v")"; then
				run "$v" "$addr" -- "${shared[@]}"
				run "$v" "$addr" -Dcompat.restart="bash $work/main-$v-kill.sh" -- "${kill[@]}"
			else
				notrun "$v" "hourglass did not start (its log is below)" "${shared[@]}" "${kill[@]}"
			fi
		fi
		if [ -n "$aclpid" ]; then
			wait "$aclpid" || true
			cat "$work/acl-report-$v"
		fi
		if grep -q '^FAILED' "$work/results-$v"; then
			for f in "$work"/main-"$v".log "$work"/acl-"$v".log; do
				[ -f "$f" ] && { echo "--- the end of $(basename "$f"):"; tail -n 30 "$f"; }
			done
		fi
	fi
	touch "$work/done-$v"
}

status=0
for v in "${versions[@]}"; do : >"$work/results-$v"; done
if [ "$target" = rocketmq ]; then
	# One RocketMQ, which "kill" takes away: one version after the other.
	for v in "${versions[@]}"; do one "$v"; done
else
	# Each version on brokers of its own, at once: the cases mostly wait
	# for delays, and CI's time is short.
	pids=()
	for v in "${versions[@]}"; do
		one "$v" >"$work/report-$v" 2>&1 &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || true; done
	for v in "${versions[@]}"; do cat "$work/report-$v"; done
fi
for v in "${versions[@]}"; do
	grep -q '^FAILED' "$work/results-$v" && status=1
	[ -f "$work/done-$v" ] || { echo "compat-java-remoting: the run with $v stopped before its end"; status=1; }
done

echo "=== compat-java-remoting against $target:"
for v in "${versions[@]}"; do
	passed="$(grep -c '^PASS' "$work/results-$v" || true)"
	failed="$(grep '^FAILED' "$work/results-$v" | sed 's/^FAILED \([^:]*\):.*/\1/' | paste -sd ' ' || true)"
	echo "rocketmq-client $v: $passed of $(wc -l <"$work/results-$v") cases passed${failed:+; FAILED: $failed}"
done
exit "$status"
