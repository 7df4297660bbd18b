#!/usr/bin/env bash
# services.sh — throwaway Redis and PostgreSQL servers on loopback, for
# integration tests and benchmarks. Each lives in its own temp directory, on a
# free port, with no persistence worth keeping; nothing is installed as a
# system service and nothing listens beyond 127.0.0.1.
#
# Usage:
#   scripts/services.sh install
#       Installs (apt-get) every server the tests start themselves
#       (internal/testenv): redis-server and redis-cli, PostgreSQL, PgBouncer,
#       etcd. Fails, saying what is missing, if it cannot.
#   scripts/services.sh start [redis] [postgres]
#       Installs what is missing (apt-get), starts the services (both when none
#       is named), waits until each answers and prints shell assignments to
#       eval:
#         SEMA_SERVICES_DIR=/tmp/sema-services.XXXX
#         SEMA_TEST_REDIS_URL=redis://127.0.0.1:PORT/0
#         SEMA_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable
#       PIDs are in $SEMA_SERVICES_DIR/*.pid. Fails loudly, with the reason
#       (the service's log), if one cannot start, after stopping the others.
#   scripts/services.sh stop DIR
#       Stops the services started in DIR by their PIDs and removes DIR.
#   scripts/services.sh exec [redis] [postgres] -- CMD [ARGS...]
#       start, export the variables, run CMD, stop (also on error or signal);
#       exits with CMD's status.
#
# Example:
#   eval "$(scripts/services.sh start)"; trap 'scripts/services.sh stop "$SEMA_SERVICES_DIR"' EXIT
set -euo pipefail

log() { echo "services.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

# free_port prints a TCP port nobody listens on at 127.0.0.1 (checked by
# connecting; a race with another process is caught by the readiness wait).
free_port() {
	local p i
	for i in $(seq 1 50); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	die "no free port found"
}

apt_updated=
need_pkg() { # need_pkg BINARY PACKAGE...
	local bin=$1
	shift
	command -v "$bin" >/dev/null 2>&1 && return 0
	log "installing $* (no $bin found)"
	[ "$(id -u)" = 0 ] || die "$bin is missing and installing $* needs root"
	if [ -z "$apt_updated" ]; then
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || die "apt-get update failed"
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2 || die "apt-get install $* failed"
	command -v "$bin" >/dev/null 2>&1 || die "$bin still missing after installing $*"
}

pg_bindir() {
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		[ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && { echo "$d"; return 0; }
	done
	command -v initdb >/dev/null 2>&1 && { dirname "$(command -v initdb)"; return 0; }
	return 1
}

start_redis() { # start_redis DIR
	local dir=$1 port pid i
	need_pkg redis-server redis-server
	mkdir -p "$dir/redis"
	for attempt in 1 2 3; do
		port=$(free_port)
		redis-server --port "$port" --bind 127.0.0.1 --protected-mode yes \
			--save '' --appendonly no --dir "$dir/redis" --daemonize no \
			--logfile "$dir/redis/redis.log" </dev/null >/dev/null 2>&1 &
		pid=$!
		echo "$pid" >"$dir/redis.pid"
		for i in $(seq 1 100); do
			if ! kill -0 "$pid" 2>/dev/null; then
				break
			fi
			if redis_ping "$port"; then
				echo "SEMA_TEST_REDIS_URL=redis://127.0.0.1:$port/0"
				log "redis on 127.0.0.1:$port (pid $pid)"
				return 0
			fi
			sleep 0.1
		done
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		log "redis attempt $attempt on port $port failed:"
		tail -n 5 "$dir/redis/redis.log" >&2 2>/dev/null || true
	done
	rm -f "$dir/redis.pid"
	die "redis-server did not start (log: $dir/redis/redis.log)"
}

redis_ping() { # redis_ping PORT: true if PING gets +PONG
	local reply
	if command -v redis-cli >/dev/null 2>&1; then
		[ "$(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null)" = PONG ]
		return
	fi
	exec 3<>"/dev/tcp/127.0.0.1/$1" 2>/dev/null || return 1
	printf 'PING\r\n' >&3
	read -r -t 1 reply <&3 || true
	exec 3<&-
	[ "${reply%$'\r'}" = "+PONG" ]
}

start_postgres() { # start_postgres DIR
	local dir=$1 bin port user=postgres i
	bin=$(pg_bindir) || { need_pkg psql postgresql; bin=$(pg_bindir) || die "no initdb under /usr/lib/postgresql/*/bin"; }
	if [ "$(id -u)" = 0 ]; then
		id "$user" >/dev/null 2>&1 || user=nobody
	else
		user=$(id -un)
	fi
	mkdir -p "$dir/pg"
	chmod 755 "$dir"
	[ "$(id -u)" = 0 ] && chown "$user" "$dir/pg"
	as_user() {
		if [ "$(id -u)" = 0 ]; then
			if command -v runuser >/dev/null 2>&1; then runuser -u "$user" -- "$@"; else su -s /bin/sh "$user" -c "$(printf '%q ' "$@")"; fi
		else
			"$@"
		fi
	}
	as_user "$bin/initdb" -D "$dir/pg/data" -U postgres --auth=trust --no-sync -E UTF8 --locale=C.UTF-8 \
		>"$dir/pg/initdb.log" 2>&1 || as_user "$bin/initdb" -D "$dir/pg/data" -U postgres --auth=trust --no-sync -E UTF8 \
		>"$dir/pg/initdb.log" 2>&1 || { tail -n 20 "$dir/pg/initdb.log" >&2; die "initdb failed (log: $dir/pg/initdb.log)"; }
	for attempt in 1 2 3; do
		port=$(free_port)
		as_user "$bin/pg_ctl" -D "$dir/pg/data" -l "$dir/pg/postgres.log" -w -t 30 \
			-o "-c listen_addresses=127.0.0.1 -p $port -k $dir/pg -c max_connections=300 -c fsync=on -c shared_buffers=128MB" \
			start >"$dir/pg/pg_ctl.log" 2>&1 || {
			log "postgres attempt $attempt on port $port failed:"
			tail -n 5 "$dir/pg/postgres.log" >&2 2>/dev/null || true
			continue
		}
		head -n 1 "$dir/pg/data/postmaster.pid" >"$dir/postgres.pid"
		for i in $(seq 1 100); do
			if "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres; then
				echo "SEMA_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
				log "postgres on 127.0.0.1:$port (pid $(cat "$dir/postgres.pid"))"
				return 0
			fi
			sleep 0.1
		done
		log "postgres on port $port never answered"
	done
	die "postgres did not start (log: $dir/pg/postgres.log)"
}

stop_dir() { # stop_dir DIR
	local dir=$1 f pid i sig
	[ -d "$dir" ] || return 0
	for f in "$dir"/*.pid; do
		[ -e "$f" ] || continue
		pid=$(cat "$f")
		sig=TERM
		case "$f" in */postgres.pid) sig=INT ;; esac # PostgreSQL's fast shutdown
		if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
			kill -"$sig" "$pid" 2>/dev/null || true
			for i in $(seq 1 100); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.1
			done
			if kill -0 "$pid" 2>/dev/null; then
				log "pid $pid ignored SIG$sig; killing"
				kill -KILL "$pid" 2>/dev/null || true
			fi
		fi
		rm -f "$f"
	done
	case "$dir" in
	/tmp/sema-services.* | "${TMPDIR:-/tmp}"/sema-services.*) rm -rf "$dir" ;;
	esac
}

start_all() { # start_all SERVICE...; prints assignments
	local want=("$@") dir s
	[ ${#want[@]} -gt 0 ] || want=(redis postgres)
	dir=$(mktemp -d "${TMPDIR:-/tmp}/sema-services.XXXXXX")
	echo "SEMA_SERVICES_DIR=$dir"
	for s in "${want[@]}"; do
		case "$s" in
		redis) (start_redis "$dir") || { stop_dir "$dir"; exit 1; } ;;
		postgres | postgresql | pg) (start_postgres "$dir") || { stop_dir "$dir"; exit 1; } ;;
		*) stop_dir "$dir"; die "unknown service $s (want redis, postgres)" ;;
		esac
	done
}

install_all() {
	need_pkg redis-server redis-server
	need_pkg redis-cli redis-tools
	pg_bindir >/dev/null || need_pkg psql postgresql
	pg_bindir >/dev/null || die "no initdb under /usr/lib/postgresql/*/bin after installing postgresql"
	need_pkg pgbouncer pgbouncer
	need_pkg etcd etcd-server
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
install)
	install_all
	;;
start)
	start_all "$@"
	;;
stop)
	[ $# -eq 1 ] || die "usage: services.sh stop DIR"
	stop_dir "$1"
	;;
exec)
	svcs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do svcs+=("$1"); shift; done
	[ "${1:-}" = -- ] || die "usage: services.sh exec [redis] [postgres] -- CMD [ARGS...]"
	shift
	[ $# -gt 0 ] || die "usage: services.sh exec [redis] [postgres] -- CMD [ARGS...]"
	out=$(start_all "${svcs[@]}") || exit 1
	while IFS='=' read -r k v; do export "$k=$v"; done <<<"$out"
	trap 'stop_dir "$SEMA_SERVICES_DIR"' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	set +e
	"$@"
	status=$?
	exit "$status"
	;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 64
	;;
esac
