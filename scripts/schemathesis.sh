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
HOURGLASS_AUTH_TOKEN=$token "$work/hourglass" serve --data-dir "$work/data" \
	--listen 127.0.0.1:0 --log-level error >"$work/server.out" 2>"$work/server.err" </dev/null &
server_pid=$!

# The server prints "listening on http://ADDR" once it accepts requests.
url=
for _ in $(seq 100); do
	url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$work/server.out" "$work/server.err" | head -n1)
	[ -n "$url" ] && break
	kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.err" >&2; echo "the server did not start" >&2; exit 1; }
	sleep 0.1
done
[ -n "$url" ] || { echo "the server did not report its address" >&2; exit 1; }
echo "schemathesis $version against $url (at most ${max_time}s, $examples examples per operation, seed $seed)"

# From the work directory, so that nothing is written into the repository.
cd "$work"
status=0
SCHEMATHESIS_HOOKS=schemathesis_hooks PYTHONPATH="$repo/scripts" \
	"$venv/bin/schemathesis" --no-color --config-file "$repo/scripts/schemathesis.toml" \
	run "$repo/docs/openapi.yaml" --url "$url" \
	--header "Authorization: Bearer $token" \
	--max-examples "$examples" --max-time "$max_time" --seed "$seed" \
	--request-timeout 10 --generation-database none </dev/null || status=$?
if [ "$status" != 0 ]; then
	echo "schemathesis found mismatches between docs/openapi.yaml and the server (exit $status)" >&2
	echo "--- server log (errors) ---" >&2
	tail -n 50 "$work/server.err" >&2 || true
fi
exit "$status"
