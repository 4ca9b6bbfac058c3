#!/usr/bin/env bash
# A throwaway Redis under Sentinel for tests, all on 127.0.0.1 with nothing persisted:
# `redis-sentinel.sh start DIR [REPLICAS]` starts a master (DIR/master), REPLICAS replicas (default 2,
# DIR/replica1...) and three sentinels (DIR/sentinel1..3) watching the master as "mymaster" with a
# quorum of 2, each on a free port; it returns once every sentinel knows the master and its replicas.
# DIR/url is the URL sluice connects with (redis+sentinel://127.0.0.1:P1,...,/mymaster).
# `redis-sentinel.sh stop DIR` stops every one of them (by their pid files, never by name).
#
# `redis-sentinel.sh start-tls DIR [REPLICAS]` is the same speaking only TLS everywhere (clients,
# replication, sentinels; a throwaway CA in DIR/ca.pem, a certificate for localhost and 127.0.0.1,
# as sentinels hand out addresses) with only an ACL user "sluice" and a password (DIR/password) on
# every server and sentinel; DIR/url is then rediss+sentinel://sluice:PASSWORD@.../mymaster and
# DIR/cli-options the redis-cli options that reach any of them.
#
# Timings are the test's, not production's: a master is taken for down after 1 s of silence
# (down-after-milliseconds 1000) and a failover is retried after 5 s (failover-timeout 5000).
set -euo pipefail
testenv=$(cd "$(dirname "$0")" && pwd)

usage() { echo "usage: $0 start DIR [REPLICAS] | stop DIR" >&2; exit 2; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_for() {  # DESCRIPTION COMMAND...: polls for up to 20 s
  local what=$1
  shift
  for _ in $(seq 1 200); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  echo "timed out waiting for $what" >&2
  return 1
}

tls=0
cli=()  # redis-cli options (TLS, user, password)
server_opts=()

start_redis() {  # DIR PORT [redis-server options]
  local d=$1 port=$2
  shift 2
  mkdir -p "$d"
  echo "$port" > "$d/port"
  local ports=(--port "$port")
  [ "$tls" = 1 ] && ports=(--port 0 --tls-port "$port")
  # A master waits repl-diskless-sync-delay (5 s) for more replicas before a full sync: every
  # replica, here and after each failover, would take 5 s to catch up. Loopback needs no batching.
  redis-server "${ports[@]}" --bind 127.0.0.1 --save '' --appendonly no \
    --repl-diskless-sync-delay 0 --daemonize yes --pidfile "$d/redis.pid" --dir "$d" --logfile "$d/redis.log" \
    "${server_opts[@]}" "$@"
  wait_for "redis-server on $port (see $d/redis.log)" \
    bash -c "[ \"\$(redis-cli ${cli[*]} -p $port ping)\" = PONG ]"
}

[ $# -ge 2 ] || usage
cmd=$1 dir=$2

case "$cmd" in
  start|start-tls)
    replicas=${3:-2}
    command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install redis-server)" >&2; exit 1; }
    # Debian's redis-sentinel is redis-server in sentinel mode; `redis-server CONF --sentinel` is the same.
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    tls_conf=""
    if [ "$cmd" = start-tls ]; then
      tls=1
      (cd "$dir" && "$testenv/tls-cert.sh" . DNS:localhost,IP:127.0.0.1)
      password=$(openssl rand -hex 16)
      echo "$password" > "$dir/password"
      cli=(--tls --cacert "$dir/ca.pem" --user sluice --pass "$password" --no-auth-warning)
      server_opts=(--tls-cert-file "$dir/server.pem" --tls-key-file "$dir/server.key"
                   --tls-ca-cert-file "$dir/ca.pem" --tls-auth-clients no --tls-replication yes
                   --user default off --user sluice on ">$password" '~*' '&*' '+@all'
                   --masteruser sluice --masterauth "$password")
      # Sentinels: TLS-only, the same ACL user for sluice and for each other, and the master's.
      tls_conf="tls-cert-file $dir/server.pem
tls-key-file $dir/server.key
tls-ca-cert-file $dir/ca.pem
tls-auth-clients no
tls-replication yes
user default off
user sluice on >$password ~* &* +@all
sentinel sentinel-user sluice
sentinel sentinel-pass $password"
    fi
    printf '%s\n' "${cli[@]}" > "$dir/cli-options"
    master_port=$(free_port)
    start_redis "$dir/master" "$master_port"
    for i in $(seq 1 "$replicas"); do
      start_redis "$dir/replica$i" "$(free_port)" --replicaof 127.0.0.1 "$master_port"
      # Synced before anything is written: a replica still loading its first copy holds nothing,
      # and a failover that promoted it would lose everything (a test would read that as lost state).
      port=$(cat "$dir/replica$i/port")
      wait_for "replica $i in sync" bash -c \
        "redis-cli ${cli[*]} -p $port info replication | grep -q '^master_link_status:up'"
    done
    sentinels=()
    for i in 1 2 3; do
      d="$dir/sentinel$i"
      mkdir -p "$d"
      port=$(free_port)
      echo "$port" > "$d/port"
      # Sentinel rewrites its configuration file as it learns: it must be writable and its own.
      if [ "$tls" = 1 ]; then listen="port 0
tls-port $port"; else listen="port $port"; fi
      cat > "$d/sentinel.conf" <<CONF
$listen
$tls_conf
bind 127.0.0.1
daemonize yes
pidfile $d/sentinel.pid
logfile $d/sentinel.log
dir $d
sentinel monitor mymaster 127.0.0.1 $master_port 2
sentinel down-after-milliseconds mymaster 1000
sentinel failover-timeout mymaster 5000
sentinel parallel-syncs mymaster 1
CONF
      if [ "$tls" = 1 ]; then
        printf 'sentinel auth-user mymaster sluice\nsentinel auth-pass mymaster %s\n' "$password" \
          >> "$d/sentinel.conf"
      fi
      redis-server "$d/sentinel.conf" --sentinel
      sentinels+=("127.0.0.1:$port")
    done
    if [ "$tls" = 1 ]; then
      (IFS=,; echo "rediss+sentinel://sluice:$password@${sentinels[*]}/mymaster") > "$dir/url"
    else
      (IFS=,; echo "redis+sentinel://${sentinels[*]}/mymaster") > "$dir/url"
    fi
    for i in 1 2 3; do
      port=$(cat "$dir/sentinel$i/port")
      wait_for "sentinel $i to see the master, $replicas replicas and the other sentinels" bash -c "
        redis-cli ${cli[*]} -p $port sentinel master mymaster | tr -d '\r' | paste - - |
          awk -v r=$replicas '\$1==\"num-slaves\" && \$2==r {a=1} \$1==\"num-other-sentinels\" && \$2==2 {b=1}
                              END {exit !(a && b)}'"
    done
    ;;
  stop)
    [ -d "$dir" ] || exit 0
    # All at once: each server takes about 2 s to exit after SIGTERM, one after another 12 s.
    pids=()
    for pidfile in "$dir"/sentinel*/sentinel.pid "$dir"/master/redis.pid "$dir"/replica*/redis.pid; do
      [ -f "$pidfile" ] || continue
      pid=$(cat "$pidfile")
      kill "$pid" 2>/dev/null && pids+=("$pid")
      rm -f "$pidfile"
    done
    for _ in $(seq 1 100); do
      alive=()
      for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
      [ ${#alive[@]} -eq 0 ] && break
      sleep 0.1
    done
    for pid in "${alive[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    ;;
  *) usage ;;
esac
