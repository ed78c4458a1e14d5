#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests: a fresh data directory in a temp dir, a
# free loopback port, trust authentication on 127.0.0.1 and durability off (a test cluster
# that loses power loses nothing anyone needs).
#
#   scripts/pg-cluster.sh start DIR   creates DIR (mktemp -d when DIR is "-"), starts the
#                                     cluster there and prints its postgres:// URL
#   scripts/pg-cluster.sh restart DIR stops it as an operator's restart does (fast: open
#                                     connections are cut, nothing committed is lost) and
#                                     starts it again on the same port, same URL
#   scripts/pg-cluster.sh stop DIR    stops it and removes DIR
#
# PostgreSQL refuses to run as root, and CI runs as root: then the cluster runs as the
# system user inboxd-test (made with useradd when missing). Needs Debian's postgresql
# package (scripts/test.sh installs it) or PG_BIN pointing at initdb and pg_ctl. PG_OPTS
# adds server settings ("-c shared_preload_libraries=pg_stat_statements", for a benchmark).
set -euo pipefail

cmd=${1:-} dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|restart|stop DIR" >&2; exit 2; }

# bin finds the newest installed PostgreSQL's programs.
bin() {
  if [ -n "${PG_BIN:-}" ]; then echo "$PG_BIN"; return; fi
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  if [ -n "$d" ]; then echo "$d"; return; fi
  dirname "$(command -v initdb 2>/dev/null || { echo "no PostgreSQL found: apt-get install postgresql" >&2; exit 1; })"
}

# as runs a command as the cluster's owner: inboxd-test when we are root, else ourselves.
user=""
if [ "$(id -u)" = 0 ]; then
  user=inboxd-test
  id "$user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
fi
as() {
  if [ -n "$user" ]; then runuser -u "$user" -- "$@"; else "$@"; fi
}

# launch starts the cluster in $dir on port $2 with the programs in $1.
launch() {
  as "$1/pg_ctl" --pgdata="$dir/data" --log="$dir/postgres.log" --wait --timeout=60 start \
    -o "-c listen_addresses=127.0.0.1 -c port=$2 -c unix_socket_directories='$dir' -c max_connections=300 \
        -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c shared_buffers=128MB ${PG_OPTS:-}" >/dev/null ||
    { tail -20 "$dir/postgres.log" >&2; exit 1; }
}

case "$cmd" in
start)
  [ "$dir" = "-" ] && dir=$(mktemp -d /tmp/inboxd-pg.XXXXXX)
  mkdir -p "$dir"
  [ -n "$user" ] && chown "$user" "$dir"
  chmod 700 "$dir"
  pg=$(bin)
  as "$pg/initdb" --pgdata="$dir/data" --username=postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 --no-sync >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
  port=25432
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
  echo "$port" >"$dir/port"
  launch "$pg" "$port"
  echo "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
  ;;
restart)
  [ -f "$dir/port" ] || { echo "no cluster in $dir" >&2; exit 1; }
  pg=$(bin)
  as "$pg/pg_ctl" --pgdata="$dir/data" --mode=fast --wait --timeout=60 stop >/dev/null ||
    { tail -20 "$dir/postgres.log" >&2; exit 1; }
  launch "$pg" "$(cat "$dir/port")"
  ;;
stop)
  [ -d "$dir/data" ] && as "$(bin)/pg_ctl" --pgdata="$dir/data" --mode=immediate --wait stop >/dev/null 2>&1 || true
  rm -rf "$dir"
  ;;
*)
  echo "usage: $0 start|restart|stop DIR" >&2; exit 2
  ;;
esac
