#!/usr/bin/env bash
# A throwaway PostgreSQL server on loopback for the examples' tests, from
# Debian's postgresql package (installed when missing and running as root).
#
#   scripts/postgres.sh start   prints the connection URL on stdout
#   scripts/postgres.sh stop
#
# The cluster lives in $HOURGLASS_PG_DIR (default: a folder under the
# system temp dir) and listens on 127.0.0.1:$HOURGLASS_PG_PORT (default
# 55432) with trust authentication: it is for tests only.
set -euo pipefail

dir="${HOURGLASS_PG_DIR:-${TMPDIR:-/tmp}/hourglass-pg}"
port="${HOURGLASS_PG_PORT:-55432}"
url="postgres://postgres@127.0.0.1:${port}/postgres?sslmode=disable"

bindir() {
	local d
	d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)"
	if [ -z "$d" ] || [ ! -x "$d/initdb" ]; then
		if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
			echo "postgres.sh: installing Debian's postgresql package" >&2
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2 ||
				{ apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2; }
			d="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)"
		else
			echo "postgres.sh: PostgreSQL's initdb is not installed (Debian package postgresql)" >&2
			exit 1
		fi
	fi
	echo "$d"
}

# as runs a command as the postgres user when root (PostgreSQL refuses to
# run as root), as the caller otherwise.
as() {
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "${1:-}" in
start)
	bin="$(bindir)"
	"$0" stop >/dev/null 2>&1 || true
	rm -rf "$dir" && mkdir -p "$dir"
	[ "$(id -u)" = 0 ] && chown postgres: "$dir"
	as "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; exit 1; }
	as "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
		-o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=on" start >&2 ||
		{ cat "$dir/server.log" >&2; exit 1; }
	echo "$url"
	;;
stop)
	[ -d "$dir/data" ] || exit 0
	bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)"
	as "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2
	;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
