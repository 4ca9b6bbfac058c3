#!/usr/bin/env bash
# A throwaway redis-server for tests: `redis.sh start DIR PORT` starts one bound to 127.0.0.1 with
# nothing persisted, its pid file, log and port (DIR/port; PORT 0 picks a free one) in DIR, and
# returns once it answers PING; `redis.sh stop DIR` stops that one (by its pid file, never by name).
set -euo pipefail

usage() { echo "usage: $0 start DIR PORT | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 dir=$2

case "$cmd" in
  start)
    [ $# -eq 3 ] || usage
    port=$3
    command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install redis-server)" >&2; exit 1; }
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ "$port" = 0 ]; then
      port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    fi
    echo "$port" > "$dir/port"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --daemonize yes --pidfile "$dir/redis.pid" --dir "$dir" --logfile "$dir/redis.log"
    for _ in $(seq 1 100); do
      if [ "$(redis-cli -p "$port" ping 2>/dev/null)" = "PONG" ]; then exit 0; fi
      sleep 0.1
    done
    echo "redis-server on port $port did not answer PING; see $dir/redis.log" >&2
    exit 1
    ;;
  stop)
    [ -f "$dir/redis.pid" ] || exit 0
    pid=$(cat "$dir/redis.pid")
    if kill "$pid" 2>/dev/null; then
      for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
    fi
    rm -f "$dir/redis.pid"
    ;;
  *) usage ;;
esac
