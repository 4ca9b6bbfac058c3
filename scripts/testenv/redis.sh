#!/usr/bin/env bash
# A throwaway redis-server for tests: `redis.sh start DIR PORT` starts one bound to 127.0.0.1 with
# nothing persisted, its pid file, log and port (DIR/port; PORT 0 picks a free one) in DIR, and
# returns once it answers PING; `redis.sh stop DIR` stops that one (by its pid file, never by name).
#
# `redis.sh start-tls DIR PORT` starts one that speaks only TLS (--tls-port; the plain port is off)
# with a certificate for the name localhost (not for 127.0.0.1, so that a client that checks names
# can be seen refusing it) from a throwaway CA made here with openssl (DIR/ca.pem), and only an ACL
# user with a password (the default user is off). DIR/url is the URL sluice connects with
# (rediss://USER:PASSWORD@localhost:PORT), DIR/password the password alone.
set -euo pipefail
testenv=$(cd "$(dirname "$0")" && pwd)

usage() { echo "usage: $0 start|start-tls DIR PORT | stop DIR" >&2; exit 2; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_for_pong() {  # PORT DIR [redis-cli options]
  local port=$1 dir=$2
  shift 2
  for _ in $(seq 1 100); do
    if [ "$(redis-cli "$@" -p "$port" ping 2>/dev/null)" = "PONG" ]; then return 0; fi
    sleep 0.1
  done
  echo "redis-server on port $port did not answer PING; see $dir/redis.log" >&2
  return 1
}
[ $# -ge 2 ] || usage
cmd=$1 dir=$2

case "$cmd" in
  start)
    [ $# -eq 3 ] || usage
    port=$3
    command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install redis-server)" >&2; exit 1; }
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ "$port" = 0 ]; then port=$(free_port); fi
    echo "$port" > "$dir/port"
    rm -f "$dir/url"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --daemonize yes --pidfile "$dir/redis.pid" --dir "$dir" --logfile "$dir/redis.log"
    wait_for_pong "$port" "$dir"
    ;;
  start-tls)
    [ $# -eq 3 ] || usage
    port=$3
    command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install redis-server)" >&2; exit 1; }
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ "$port" = 0 ]; then port=$(free_port); fi
    (
      cd "$dir"
      "$testenv/tls-cert.sh" . DNS:localhost
      # A second CA that signed nothing here: a client trusting only it must refuse the server.
      openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=some other CA" \
        -keyout other-ca.key -out other-ca.pem 2>/dev/null
    )
    password=$(openssl rand -hex 16)
    echo "$password" > "$dir/password"
    echo "$port" > "$dir/port"
    echo "rediss://sluice:$password@localhost:$port" > "$dir/url"
    redis-server --port 0 --tls-port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --tls-cert-file "$dir/server.pem" --tls-key-file "$dir/server.key" \
      --tls-ca-cert-file "$dir/ca.pem" --tls-auth-clients no \
      --user default off --user sluice on ">$password" '~*' '&*' '+@all' \
      --daemonize yes --pidfile "$dir/redis.pid" --dir "$dir" --logfile "$dir/redis.log"
    wait_for_pong "$port" "$dir" -h localhost --tls --cacert "$dir/ca.pem" --user sluice --pass "$password" \
      --no-auth-warning
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
