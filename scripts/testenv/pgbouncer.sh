#!/usr/bin/env bash
# A throwaway pgbouncer (Debian's) in transaction pooling mode in front of a PostgreSQL started by
# postgres.sh, for the backend suite run through it (docs/scale-out.md, "pgbouncer").
#
#   pgbouncer.sh start DIR PG_DIR PORT   config, log and pid under DIR, listening on 127.0.0.1:PORT
#                                        (0 picks a free port), every database name forwarded to
#                                        the server in PG_DIR; prints the URL (also DIR/url)
#   pgbouncer.sh stop DIR                stop it and remove DIR
#
# `options` (the -c settings sluice sends at connect: each pool's statement_timeout) is a startup
# parameter pgbouncer 1.18 refuses unless told to ignore it; ignored, those settings do not reach
# the server, which is why the docs say to set statement_timeout on the role as well.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start DIR PG_DIR PORT | stop DIR" >&2; exit 2; }

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$cmd" in
  start)
    pg_dir=${3:-}
    port=${4:-0}
    [ -f "$pg_dir/port" ] || { echo "start: no postgres.sh server in '$pg_dir'" >&2; exit 2; }
    pg_port=$(cat "$pg_dir/port")
    [ "$port" = 0 ] && port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    cat >"$dir/pgbouncer.ini" <<CONF
[databases]
* = host=127.0.0.1 port=$pg_port

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/users.txt
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
ignore_startup_parameters = options,extra_float_digits
logfile = $dir/log
pidfile = $dir/pid
CONF
    echo '"postgres" ""' >"$dir/users.txt"
    [ "$(id -u)" -eq 0 ] && chown -R postgres: "$dir"
    as_owner pgbouncer -d "$dir/pgbouncer.ini"
    for _ in $(seq 1 100); do
      if pg_isready -q -h 127.0.0.1 -p "$port"; then break; fi
      sleep 0.1
    done
    pg_isready -q -h 127.0.0.1 -p "$port" || { echo "pgbouncer did not start; log follows" >&2; cat "$dir/log" >&2; exit 1; }
    url="postgres://postgres@127.0.0.1:$port/sluice"
    echo "$url" >"$dir/url"
    echo "$url"
    ;;
  stop)
    if [ -f "$dir/pid" ]; then
      pid=$(cat "$dir/pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -rf "$dir"
    ;;
  *)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac
