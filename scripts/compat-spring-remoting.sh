#!/usr/bin/env bash
# rocketmq-spring-boot-starter (2.3.1, on rocketmq-client 5.3.0 and Spring
# Boot 3.5), unchanged, against a real hourglass binary's remoting listener:
# compat/spring-remoting's tiny Spring Boot app, a RocketMQTemplate syncSend
# at a delay level and a @RocketMQMessageListener (SpringCase.java says what
# it checks). Prints PASS or FAILED; exits 1 on failure.
#
#   scripts/compat-spring-remoting.sh       (make compat-spring-remoting)
#
# The app's jars are fetched with Maven once into a cache folder outside the
# repository ($HOURGLASS_CACHE, default ~/.cache/hourglass). Takes about
# 15 s on a quiet machine once the jars are there.
set -euo pipefail
cd "$(dirname "$0")/.."

starter=2.3.1
cache="${HOURGLASS_CACHE:-$HOME/.cache/hourglass}/rocketmq-spring-boot-starter-$starter"
work="$(mktemp -d)"
hg=
cleanup() {
	if [ -n "$hg" ]; then
		kill "$hg" 2>/dev/null || true
		wait "$hg" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

if [ ! -f "$cache/.complete" ]; then
	echo "compat-spring-remoting: fetching rocketmq-spring-boot-starter $starter with Maven" >&2
	rm -rf "$cache/lib"
	mvn -q -B -f compat/spring-remoting/pom.xml dependency:copy-dependencies \
		-Dstarter.version="$starter" -DoutputDirectory="$cache/lib" >&2
	touch "$cache/.complete"
fi
go build -o "$work/hourglass" ./cmd/hourglass
javac -nowarn -cp "$cache/lib/*" -d "$work/classes" compat/spring-remoting/src/main/java/springcase/*.java

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
remoting="$(freeport)"
"$work/hourglass" serve --data-dir "$work/data" --listen "127.0.0.1:$(freeport)" --grpc-listen "" \
	--remoting-listen "127.0.0.1:$remoting" >"$work/hourglass.log" 2>&1 &
hg=$!
for _ in $(seq 400); do
	(exec 3<>"/dev/tcp/127.0.0.1/$remoting") 2>/dev/null && break
	kill -0 "$hg" 2>/dev/null || break
	sleep 0.05
done

rc=0
java -Duser.home="$work/home" -cp "$work/classes:$cache/lib/*" springcase.SpringCase \
	--rocketmq.name-server="127.0.0.1:$remoting" --rocketmq.producer.group="spring_p_$RANDOM" \
	--compat.topic="spring_t_$RANDOM" --compat.group="spring_g_$RANDOM" \
	--spring.main.banner-mode=off --logging.level.root=ERROR >"$work/out" 2>&1 || rc=$?
grep -E '^(PASS|FAILED) ' "$work/out" || { echo "FAILED spring: the app exited $rc without a verdict"; tail -n 40 "$work/out"; }
if [ "$rc" -ne 0 ] || ! grep -q '^PASS ' "$work/out"; then
	echo "--- the end of hourglass's log:"
	tail -n 30 "$work/hourglass.log"
	exit 1
fi
