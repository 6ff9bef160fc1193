#!/usr/bin/env bash
# Property-based test of the HTTP API against its document: Schemathesis
# generates requests from docs/openapi.yaml, valid and invalid, sends them to
# the real binary (with a bearer token), and fails on any mismatch: a valid
# request refused, an invalid one accepted, an answer unlike the document, or
# a 5xx. Rules OpenAPI cannot state live in schemathesis_hooks.py beside this
# script; its settings in schemathesis.toml.
#
# Needs Go and python3 (with venv; installed with apt-get when missing and
# running as root). Schemathesis is installed into a venv under the cache
# directory, once. Runs in about two minutes: SCHEMATHESIS_MAX_TIME bounds
# the generation (seconds), SCHEMATHESIS_EXAMPLES the cases per operation.
#
# With SCHEMATHESIS_KAFKA=host:port it tests a Kafka-mode worker (hourglass
# kafka --listen) on that Kafka against docs/openapi-kafka.yaml instead,
# with the hooks of schemathesis_kafka_hooks.py (make test-kafka does).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

version=4.32.5
max_time=${SCHEMATHESIS_MAX_TIME:-100}
examples=${SCHEMATHESIS_EXAMPLES:-25}
seed=${SCHEMATHESIS_SEED:-1}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/hourglass
venv=$cache/schemathesis-$version

# .complete marks a finished install: an interrupted one is redone.
if [ ! -e "$venv/.complete" ]; then
	rm -rf "$venv"
	mkdir -p "$cache"
	if ! python3 -m venv "$venv" 2>/dev/null; then
		rm -rf "$venv"
		if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
			echo "python3 venv is missing: installing python3-venv" >&2
			DEBIAN_FRONTEND=noninteractive apt-get update -qq </dev/null
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv </dev/null
		fi
		python3 -m venv "$venv"
	fi
	"$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$version" </dev/null
	touch "$venv/.complete"
fi

work=$(mktemp -d)
server_pid=
cleanup() {
	if [ -n "$server_pid" ]; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/hourglass" ./cmd/hourglass
token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
spec=docs/openapi.yaml hooks=schemathesis_hooks
if [ -n "${SCHEMATHESIS_KAFKA:-}" ]; then
	# SCHEMATHESIS_KAFKA=host:port: test a Kafka-mode worker's API
	# (docs/openapi-kafka.yaml) on that Kafka, with topics of its own.
	spec=docs/openapi-kafka.yaml hooks=schemathesis_kafka_hooks
	delay_topic=hourglass-st-$token
	export SCHEMATHESIS_KAFKA_TOPICS=$delay_topic,$delay_topic.state,$delay_topic.dlq
	HOURGLASS_AUTH_TOKEN=$token "$work/hourglass" kafka --brokers "$SCHEMATHESIS_KAFKA" \
		--delay-topic "$delay_topic" --group "$delay_topic" --listen 127.0.0.1:0 \
		>"$work/server.out" 2>"$work/server.err" </dev/null &
else
	HOURGLASS_AUTH_TOKEN=$token "$work/hourglass" serve --data-dir "$work/data" \
		--listen 127.0.0.1:0 --log-level error >"$work/server.out" 2>"$work/server.err" </dev/null &
fi
server_pid=$!

# The server prints "listening on http://ADDR" once it accepts requests (a
# Kafka-mode worker "HTTP API on http://ADDR").
url=
for _ in $(seq 100); do
	url=$(sed -n 's/.*\(listening\|HTTP API\) on \(http:[^ ]*\).*/\2/p' "$work/server.out" "$work/server.err" | head -n1)
	[ -n "$url" ] && break
	kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.err" >&2; echo "the server did not start" >&2; exit 1; }
	sleep 0.1
done
[ -n "$url" ] || { echo "the server did not report its address" >&2; exit 1; }
if [ -n "${SCHEMATHESIS_KAFKA:-}" ]; then
	# Until the worker has joined its group, reads of the group's progress
	# answer 503 (coordinator not available): wait for its partitions.
	for _ in $(seq 300); do
		grep -q "partitions assigned" "$work/server.err" && break
		sleep 0.1
	done
	grep -q "partitions assigned" "$work/server.err" || { cat "$work/server.err" >&2; echo "the worker did not join its group" >&2; exit 1; }
fi
echo "schemathesis $version against $url (at most ${max_time}s, $examples examples per operation, seed $seed)"

# From the work directory, so that nothing is written into the repository.
cd "$work"
status=0
SCHEMATHESIS_HOOKS=$hooks PYTHONPATH="$repo/scripts" \
	"$venv/bin/schemathesis" --no-color --config-file "$repo/scripts/schemathesis.toml" \
	run "$repo/$spec" --url "$url" \
	--header "Authorization: Bearer $token" \
	--max-examples "$examples" --max-time "$max_time" --seed "$seed" \
	--request-timeout 10 --generation-database none </dev/null || status=$?
if [ "$status" != 0 ]; then
	echo "schemathesis found mismatches between $spec and the server (exit $status)" >&2
	echo "--- server log (errors) ---" >&2
	tail -n 50 "$work/server.err" >&2 || true
fi
exit "$status"
