# A throwaway PostgreSQL server for vmrund's tests, sourced:
#
#   . tests/vmrund/pg.sh
#   trap pg_cleanup EXIT
#   pg_start "$tmp/pg" || exit 1   # exports PG_URI, PG_DIR
#   ...; pg_restart; pg_stop; pg_start "$tmp/pg" (the same data again)
#
# The server runs as an unprivileged user (initdb refuses root): postgres
# when it exists, else nobody. It listens on 127.0.0.1 at a free port and
# on a socket in DIR, trusts local and 127.0.0.1 connections only, and
# keeps fsync on (the tests are about durability). Database vmrun. Every
# command has a deadline; a failure says why on stderr and returns 1.
# shellcheck shell=bash

if [ -z "${PG_BIN:-}" ]; then
	for PG_BIN in /usr/lib/postgresql/*/bin; do :; done   # the last: the newest, by version
fi
PG_DEADLINE=${PG_DEADLINE:-30}

# The user the server runs as, and a command prefix that runs as it.
pg_user() {
	if [ -n "${PG_USER:-}" ]; then
		echo "$PG_USER"
	elif id -u postgres >/dev/null 2>&1; then
		echo postgres
	else
		echo nobody
	fi
}
_pg_as() {
	if [ "$(id -u)" = 0 ]; then
		timeout -k 5 $((PG_DEADLINE + 10)) runuser -u "$PG_USER" -- "$@"
	else
		timeout -k 5 $((PG_DEADLINE + 10)) "$@"
	fi
}

# A TCP port nobody listens on now (random, checked against ss when it
# is there; a race with another process is left to pg_start's retry).
_pg_port() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 40000))
		if command -v ss >/dev/null 2>&1; then
			ss -Hltn "sport = :$p" 2>/dev/null | grep -q . && continue
		fi
		echo "$p"
		return 0
	done
	return 1
}

# The server's user must pass through DIR's parents: mktemp -d makes a
# directory only its owner enters, so a parent of ours under /tmp that
# stops it gets o+x (enter, not list); anywhere else is the caller's to fix.
_pg_reach() {
	local d=$1
	[ "$(id -u)" = 0 ] || return 0
	runuser -u "$PG_USER" -- test -x "$d" && return 0
	local p=$d
	while p=$(dirname "$p") && [ "$p" != / ] && [ "$p" != /tmp ]; do
		case $p in /tmp/*) ;; *) break ;; esac
		[ -O "$p" ] && chmod o+x "$p"
	done
	runuser -u "$PG_USER" -- test -x "$d" && return 0
	echo "pg: user $PG_USER cannot enter $d (its parents must let it through)" >&2
	return 1
}

_pg_ready() {
	local deadline=$((SECONDS + PG_DEADLINE))
	while [ "$SECONDS" -lt "$deadline" ]; do
		timeout -k 2 5 "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -d vmrun -U "$PG_USER" && return 0
		sleep 0.1
	done
	echo "pg: server in $PG_DIR not ready within ${PG_DEADLINE} s" >&2
	return 1
}

# pg_start DIR: a new cluster in DIR, or the one already there (after
# pg_stop) on the port it had, so that PG_URI stays; waits until it
# accepts connections.
pg_start() {
	local dir=$1 first=0
	[ -x "$PG_BIN/initdb" ] || { echo "pg: no PostgreSQL server binaries (PG_BIN=$PG_BIN)" >&2; return 1; }
	PG_USER=$(pg_user)
	mkdir -p "$dir" || return 1
	PG_DIR=$(cd "$dir" && pwd)
	if [ ! -f "$PG_DIR/data/PG_VERSION" ]; then
		first=1
		# The user must reach DIR to reach its data and socket.
		chown "$PG_USER" "$PG_DIR" 2>/dev/null || true
		chmod 755 "$PG_DIR" || return 1
		_pg_reach "$PG_DIR" || return 1
		if ! _pg_as "$PG_BIN/initdb" -D "$PG_DIR/data" -U "$PG_USER" -A trust -E UTF8 --locale=C.UTF-8 \
			>"$PG_DIR/initdb.log" 2>&1; then
			echo "pg: initdb failed:" >&2
			tail -n 5 "$PG_DIR/initdb.log" >&2
			return 1
		fi
		cat >"$PG_DIR/data/pg_hba.conf" <<-HBA
			local all all trust
			host all all 127.0.0.1/32 trust
		HBA
	fi
	local tries
	for tries in 1 2 3; do
		if [ -s "$PG_DIR/port" ] && [ "$tries" = 1 ]; then
			PG_PORT=$(cat "$PG_DIR/port")
		else
			PG_PORT=$(_pg_port) || { echo "pg: no free port" >&2; return 1; }
		fi
		# Settings on the command line, so that a restart keeps them.
		if _pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t "$PG_DEADLINE" \
			-o "-c listen_addresses=127.0.0.1 -c port=$PG_PORT -c unix_socket_directories=$PG_DIR -c fsync=on" \
			start >>"$PG_DIR/pg_ctl.log" 2>&1; then
			echo "$PG_PORT" >"$PG_DIR/port"
			break
		fi
		[ "$tries" = 3 ] && {
			echo "pg: the server did not start:" >&2
			tail -n 5 "$PG_DIR/server.log" >&2
			return 1
		}
	done
	_pg_ready || return 1
	if [ "$first" = 1 ]; then
		timeout -k 2 "$PG_DEADLINE" "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" vmrun ||
			{ echo "pg: createdb vmrun failed" >&2; return 1; }
	fi
	export PG_DIR PG_PORT PG_USER
	export PG_URI="postgresql://$PG_USER@127.0.0.1:$PG_PORT/vmrun"
	return 0
}

# Restart the server as pg_ctl does it in production (fast: connections
# are ended, the data is checkpointed); same port.
pg_restart() {
	_pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t "$PG_DEADLINE" -m fast restart \
		>>"$PG_DIR/pg_ctl.log" 2>&1 || { echo "pg: restart failed" >&2; return 1; }
	_pg_ready
}

# Stop it at once, as a crash would (immediate: no checkpoint; the next
# start recovers from the WAL).
pg_stop() {
	[ -n "${PG_DIR:-}" ] && [ -f "$PG_DIR/data/postmaster.pid" ] || return 0
	_pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -w -t "$PG_DEADLINE" -m immediate stop >>"$PG_DIR/pg_ctl.log" 2>&1 ||
		{ echo "pg: stop failed" >&2; return 1; }
}

# For an EXIT trap: the server stopped (killed if it will not stop); the
# data stays for the caller's own cleanup to remove with its directory.
pg_cleanup() {
	[ -n "${PG_DIR:-}" ] || return 0
	pg_stop 2>/dev/null && return 0
	local pid
	pid=$(head -n 1 "$PG_DIR/data/postmaster.pid" 2>/dev/null)
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	return 0
}
