#!/usr/bin/env bash
# The official RocketMQ 5 Java client (org.apache.rocketmq:rocketmq-client-java)
# against a real hourglass binary, over TLS (the client's default) and over
# plaintext, and over plaintext with --auth-token (every call signed with the
# token as the access secret, checked within --grpc-signature-skew):
# compat/java/src/main/java/RoundTrip.java sends a normal, a delayed and a
# recalled message and receives them with a SimpleConsumer.
# The client jar is fetched with Maven into a cache folder outside the
# repository ($HOURGLASS_CACHE, default ~/.cache/hourglass).
set -euo pipefail
cd "$(dirname "$0")/.."

version=5.0.8
cache="${HOURGLASS_CACHE:-$HOME/.cache/hourglass}/rocketmq-client-java-$version"
if [ ! -f "$cache/.complete" ]; then
	echo "compat-java: fetching rocketmq-client-java $version with Maven" >&2
	mvn -q -B -f compat/java/pom.xml dependency:copy-dependencies -DoutputDirectory="$cache/lib"
	touch "$cache/.complete"
fi

work="$(mktemp -d)"
pid=
cleanup() {
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

javac -nowarn -cp "$cache/lib/*" -d "$work/classes" compat/java/src/main/java/RoundTrip.java
go build -o "$work/hourglass" ./cmd/hourglass

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

for mode in ssl plaintext signed; do
	http="$(freeport)"
	grpc="$(freeport)"
	extra=()
	secret=
	[ "$mode" != ssl ] && extra=(--grpc-plaintext)
	if [ "$mode" = signed ]; then
		secret="compat-$(date +%s%N)"
		export HOURGLASS_AUTH_TOKEN="$secret"
	fi
	"$work/hourglass" serve --data-dir "$work/data-$mode" --listen "127.0.0.1:$http" \
		--grpc-listen "127.0.0.1:$grpc" "${extra[@]}" >"$work/serve-$mode.log" 2>&1 &
	pid=$!
	for _ in $(seq 200); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$grpc") 2>/dev/null; then break; fi
		sleep 0.05
	done
	tls=ssl
	[ "$mode" != ssl ] && tls=plaintext
	# The client signs its local time with a "Z": in UTC, as the docs ask.
	if ! HOURGLASS_ACCESS_SECRET="$secret" java -Duser.timezone=UTC -Duser.home="$work" -cp "$work/classes:$cache/lib/*" RoundTrip "127.0.0.1:$grpc" "$tls" "java-compat-$mode"; then
		echo "compat-java: the Java client failed over $mode; the broker said:" >&2
		cat "$work/serve-$mode.log" >&2
		exit 1
	fi
	kill "$pid" && wait "$pid" || true
	pid=
	unset HOURGLASS_AUTH_TOKEN
done
echo "compat-java: the official Java client $version works over TLS, plaintext, and signed with --auth-token"
