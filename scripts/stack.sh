#!/usr/bin/env bash
# The scale-out stack on loopback, for trying sluice as a fleet and for the stack tests:
# PostgreSQL (metadata), Redis (shared limits and cache), s3rver (bodies, S3 API), N sluice
# processes, nginx (least_conn balancer) and Varnish (the edge) in front.
#
#   scripts/stack.sh up [--processes N] [--base-port P] [--dir DIR] [--foreground] [--fault-proxies]
#                       [--ha [--patroni]] [--s3 s3rver|ceph] [-- SLUICE ARGS]
#   scripts/stack.sh restart-apps [--dir DIR] [--meta URL] [-- SLUICE ARGS]
#   scripts/stack.sh down [--dir DIR]
#
# Ports, from P (default 18000): Varnish P, nginx P+1, PostgreSQL P+2, Redis P+3, s3rver P+4,
# sluice P+10 .. P+10+N-1. With --fault-proxies (the chaos lab), a fault proxy
# (tools/faultproxy/faultproxy.py) sits on the wire between sluice and PostgreSQL (P+5, control
# P+20), Redis (P+6, control P+21) and s3rver (P+7, control P+22), and between Varnish and nginx
# (P+8, control P+23). restart-apps restarts the sluice processes with other settings (the
# stack's own plus SLUICE ARGS) on the same ports and dependencies; with --meta, on another
# PostgreSQL for this restart only (the lab's "primary fails over" puts them on a Patroni cluster).
#
# With --s3 ceph (`make stack S3=ceph`), the bodies go to a real object store instead of s3rver:
# Ceph's RADOS Gateway in front of a one-node cluster (scripts/testenv/ceph-rgw.sh: a monitor, a
# manager, an OSD on memstore unless CEPH_RGW_OBJECTSTORE=bluestore), its gateway on P+4 and its
# user's own keys. It starts in 10-15 s on 2 cores (bench/results/ceph-rgw.md). The fault proxy
# in front of S3 is a TCP proxy and sits in front of either.
#
# With --ha (`make stack HA=1`), the variant that survives losing any one server (docs/scale-out.md,
# "The HA stack"): PostgreSQL primary (P+2) and a synchronous streaming standby (P+30), sluice on
# the multi-host URL primary,standby with target_session_attrs=read-write, straight to the servers:
# no pgbouncer. One pgbouncer per server was tried and does not follow a promotion: it answers a
# login from the server parameters it cached (default_transaction_read_only=off) even while its
# server is dead, so libpq takes the dead primary's pgbouncer for writable and never tries the
# next host (every create 503 outcome_unknown for minutes). Redis master, two replicas and three
# sentinels (scripts/testenv/redis-sentinel.sh, free ports), sluice on the redis+sentinel:// URL.
# Not with --fault-proxies. PostgreSQL fails over by hand here (the `up` text says how).
#
# With --ha --patroni (`make stack HA=patroni`), PostgreSQL fails over without anyone: a Patroni
# cluster (scripts/testenv/patroni.sh: one etcd, two members in synchronous_mode, ports P+40 ..
# P+45) in place of the hand-run primary and standby, sluice on its multi-host URL. A leader lost
# without a word hands over within Patroni's ttl (5 s here) plus the breaker's window. The single
# etcd member is the stack's one part that is not redundant: a lab's DCS, not what is failed over.
#
# `up` waits until every part answers, prints the URLs and, with
# --foreground (what `make stack` uses), stays until Ctrl-C and then stops everything. State
# (pids, logs, data) lives in DIR (default ./build/stack); `down` stops a stack started without
# --foreground.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

cmd=${1:-}
[ -n "$cmd" ] && shift
processes=2
base=18000
dir="$here/build/stack"
foreground=0
fault_proxies=0
ha=0
patroni=0
s3=s3rver
meta_opt=""
sluice_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --processes) processes=$2; shift 2 ;;
    --base-port) base=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --foreground) foreground=1; shift ;;
    --fault-proxies) fault_proxies=1; shift ;;
    --ha) ha=1; shift ;;
    --patroni) patroni=1; shift ;;
    --s3) s3=$2; shift 2 ;;
    --meta) meta_opt=$2; shift 2 ;;
    --) shift; sluice_args=("$@"); break ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
sluice_bin=${SLUICE_BIN:-$here/build/dev/sluice}
# restart-apps takes the stack's shape from the folder it was started in.
stack_args=()
if [ "$cmd" = restart-apps ] && [ -f "$dir/stack.env" ]; then
  # shellcheck disable=SC1091
  . "$dir/stack.env"
fi
case "$s3" in
  s3rver | ceph) ;;
  *) echo "--s3 is s3rver or ceph, not $s3" >&2; exit 2 ;;
esac

edge_port=$base
nginx_port=$((base + 1))
pg_port=$((base + 2))
redis_port=$((base + 3))
s3_port=$((base + 4))
bucket=sluice-stack
# What sluice and Varnish connect to: the dependency itself, or its fault proxy.
if [ "$fault_proxies" = 1 ]; then
  pg_dial=$((base + 5)) redis_dial=$((base + 6)) s3_dial=$((base + 7)) edge_backend=$((base + 8))
else
  pg_dial=$pg_port redis_dial=$redis_port s3_dial=$s3_port edge_backend=$nginx_port
fi
[ "$ha" = 1 ] && [ "$fault_proxies" = 1 ] && { echo "--ha and --fault-proxies do not go together" >&2; exit 2; }
[ "$patroni" = 1 ] && [ "$ha" != 1 ] && { echo "--patroni is a variant of --ha" >&2; exit 2; }
standby_port=$((base + 30))
patroni_base=$((base + 40))
ha_meta_url=${ha_meta_url:-}
ha_cache_url=${ha_cache_url:-}
meta_url=${meta_opt:-${ha_meta_url:-postgres://postgres@127.0.0.1:$pg_dial/sluice}}

wait_http() {  # URL NAME
  for _ in $(seq 1 200); do
    if curl -fsS -o /dev/null --max-time 1 "$1"; then return 0; fi
    sleep 0.1
  done
  echo "$2 did not answer at $1" >&2
  return 1
}

start_app() {  # INDEX
  local i=$1 port=$((base + 10 + $1))
  mkdir -p "$dir/app$i"
  # One admin token for the whole stack (sluice admin --token-file DIR/admin.token), made once.
  [ -s "$dir/admin.token" ] || (umask 077 && openssl rand -hex 24 >"$dir/admin.token")
  # Each process holds its own share of the global create budget (docs/overload.md, "Shared state": global / N with slack
  # when Redis is down); the shared buckets in Redis hold the tier's total.
  AWS_ACCESS_KEY_ID=$s3_access_key AWS_SECRET_ACCESS_KEY=$s3_secret_key AWS_REGION=us-east-1 \
    setsid "$sluice_bin" serve --listen "127.0.0.1:$port" --data-dir "$dir/app$i" \
    --admin-listen "127.0.0.1:$((port + 1000))" --admin-token-file "$dir/admin.token" \
    --meta "$meta_url" \
    --cache "${ha_cache_url:-redis://127.0.0.1:$redis_dial}" --processes "$processes" \
    --blob "s3://$bucket" --s3-endpoint "http://127.0.0.1:$s3_dial" \
    --trusted-proxy 127.0.0.1 --public-url "http://127.0.0.1:$edge_port" \
    --edge-purge "http://127.0.0.1:$edge_port" "${sluice_args[@]}" \
    >>"$dir/app$i/log" 2>&1 &
  echo $! >"$dir/app$i/pid"
}

# The bodies' store on P+4 and the keys sluice signs with: s3rver's fixed ones, or those of the
# user ceph-rgw.sh made.
start_s3() {
  if [ "$s3" = ceph ]; then
    echo "starting Ceph RGW (a monitor, a manager, an OSD and the gateway)..."
    "$here/scripts/testenv/ceph-rgw.sh" start "$dir/ceph" "$s3_port" "$bucket" >/dev/null
  else
    echo "starting s3rver..."
    "$here/scripts/testenv/s3rver.sh" start "$dir/s3" "$s3_port" "$bucket" >/dev/null
  fi
  s3_keys
}

s3_keys() {
  if [ "$s3" = ceph ]; then
    s3_label="S3 (Ceph RGW):             "
    s3_access_key=$(cat "$dir/ceph/access_key")
    s3_secret_key=$(cat "$dir/ceph/secret_key")
  else
    s3_label="S3 (s3rver):               "
    s3_access_key=S3RVER
    s3_secret_key=S3RVER
  fi
}

start_proxy() {  # NAME LISTEN UPSTREAM CONTROL
  mkdir -p "$dir/proxy-$1"
  setsid python3 "$here/tools/faultproxy/faultproxy.py" serve --name "$1" \
    --listen "127.0.0.1:$2" --upstream "127.0.0.1:$3" --control "127.0.0.1:$4" \
    >"$dir/proxy-$1/log" 2>&1 &
  echo $! >"$dir/proxy-$1/pid"
  for _ in $(seq 1 100); do
    if curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$4/stats"; then return 0; fi
    sleep 0.1
  done
  echo "fault proxy $1 did not start; its log:" >&2
  cat "$dir/proxy-$1/log" >&2
  return 1
}

start_apps() {
  for ((i = 0; i < processes; i++)); do start_app "$i"; done
  for ((i = 0; i < processes; i++)); do
    wait_http "http://127.0.0.1:$((base + 10 + i))/healthz" "sluice $i" ||
      { tail -20 "$dir/app$i/log" >&2; return 1; }
  done
}

render_nginx() {
  local upstreams=""
  for ((i = 0; i < processes; i++)); do
    upstreams+="    server 127.0.0.1:$((base + 10 + i)) max_fails=0;\n"
  done
  sed -e "s|^pid .*|pid $dir/nginx/nginx.pid;|" \
    -e "s|listen 127.0.0.1:8080;|listen 127.0.0.1:$nginx_port;|" \
    -e "/server 127.0.0.1:818[12] max_fails=0;/d" \
    -e "s|    least_conn;|    least_conn;\n$upstreams|" \
    "$here/deploy/nginx/sluice.conf" >"$dir/nginx/nginx.conf"
}

up() {
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  # The PostgreSQL server runs as the postgres user, which must reach its folder.
  chmod 755 "$dir"
  [ -x "$sluice_bin" ] || { echo "no sluice binary at $sluice_bin (make build)" >&2; exit 1; }
  if [ "$ha" = 1 ] && [ "$patroni" = 1 ]; then
    echo "starting PostgreSQL under Patroni (etcd, two members), Redis (master, two replicas, three sentinels)..."
    ha_meta_url=$("$here/scripts/testenv/patroni.sh" start "$dir/patroni" "$patroni_base" 2)
  elif [ "$ha" = 1 ]; then
    echo "starting PostgreSQL (primary, synchronous standby), Redis (master, two replicas, three sentinels)..."
    "$here/scripts/testenv/postgres.sh" start "$dir/postgres" "$pg_port" >/dev/null
    ha_meta_url=$("$here/scripts/testenv/postgres.sh" start-standby "$dir/postgres-standby" \
      "$dir/postgres" "$standby_port" sync)
  fi
  if [ "$ha" = 1 ]; then
    "$here/scripts/testenv/redis-sentinel.sh" start "$dir/redis-ha" 2 >/dev/null
    ha_cache_url=$(cat "$dir/redis-ha/url")
    meta_url=${meta_opt:-$ha_meta_url}
  else
    echo "starting PostgreSQL and Redis..."
    "$here/scripts/testenv/postgres.sh" start "$dir/postgres" "$pg_port" >/dev/null
    "$here/scripts/testenv/redis.sh" start "$dir/redis" "$redis_port" >/dev/null
  fi
  start_s3
  # The primary, wherever it is: the HA URLs reach it by target_session_attrs=read-write.
  "$sluice_bin" migrate --meta "${ha_meta_url:-postgres://postgres@127.0.0.1:$pg_port/sluice}" >/dev/null
  {
    printf 'base=%q processes=%q fault_proxies=%q ha=%q patroni=%q ha_meta_url=%q ha_cache_url=%q s3=%q\n' \
      "$base" "$processes" "$fault_proxies" "$ha" "$patroni" "$ha_meta_url" "$ha_cache_url" "$s3"
    printf 'stack_args=('
    [ ${#sluice_args[@]} -eq 0 ] || printf '%q ' "${sluice_args[@]}"
    printf ')\n'
  } >"$dir/stack.env"
  if [ "$fault_proxies" = 1 ]; then
    echo "starting the fault proxies..."
    start_proxy postgres "$pg_dial" "$pg_port" $((base + 20))
    start_proxy redis "$redis_dial" "$redis_port" $((base + 21))
    start_proxy s3 "$s3_dial" "$s3_port" $((base + 22))
    start_proxy edge "$edge_backend" "$nginx_port" $((base + 23))
  fi

  echo "starting $processes sluice processes..."
  start_apps || exit 1

  echo "starting nginx and Varnish..."
  mkdir -p "$dir/nginx"
  render_nginx
  nginx -c "$dir/nginx/nginx.conf" -p "$dir/nginx" -e stderr 2>"$dir/nginx/error.log"
  wait_http "http://127.0.0.1:$nginx_port/healthz" nginx

  mkdir -p "$dir/varnish"
  sed -e "s|.port = \"8080\";|.port = \"$edge_backend\";|" "$here/deploy/varnish/sluice.vcl" \
    >"$dir/varnish/sluice.vcl"
  # -n: a private working folder, so several stacks (and tests) can run side by side.
  varnishd -a "127.0.0.1:$edge_port" -f "$dir/varnish/sluice.vcl" -n "$dir/varnish/work" \
    -P "$dir/varnish/varnish.pid" -s malloc,64m -p default_ttl=0 -p default_grace=0 \
    -p default_keep=0 2>"$dir/varnish/error.log"
  wait_http "http://127.0.0.1:$edge_port/healthz" Varnish

  cat <<EOF
sluice stack is up ($processes processes), state in $dir
  paste here (Varnish edge):  http://127.0.0.1:$edge_port/
  balancer (nginx):           http://127.0.0.1:$nginx_port/
  processes:                  $(for ((i = 0; i < processes; i++)); do printf 'http://127.0.0.1:%s/ ' $((base + 10 + i)); done)
  admin listeners:            $(for ((i = 0; i < processes; i++)); do printf 'http://127.0.0.1:%s/ ' $((base + 1010 + i)); done)(token in $dir/admin.token)
  $s3_label http://127.0.0.1:$s3_port  bucket $bucket
EOF
  if [ "$patroni" = 1 ]; then
    cat <<EOF
  PostgreSQL (Patroni):       members $(for m in "$dir"/patroni/pg*/; do printf '127.0.0.1:%s ' "$(cat "$m/port")"; done)leader $("$here/scripts/testenv/patroni.sh" leader "$dir/patroni"), etcd 127.0.0.1:$patroni_base
  sluice --meta:              $ha_meta_url
  Redis master:               redis://127.0.0.1:$(cat "$dir/redis-ha/master/port")  replicas $(cat "$dir"/redis-ha/replica*/port | tr '\n' ' ')
  sluice --cache (Sentinel):  $ha_cache_url
  lose the PostgreSQL leader: scripts/testenv/patroni.sh kill-leader $dir/patroni  (Patroni promotes the synchronous standby)
  fail over Redis:            redis-cli -p $(cat "$dir/redis-ha/sentinel1/port") sentinel failover mymaster
EOF
  elif [ "$ha" = 1 ]; then
    cat <<EOF
  PostgreSQL primary:         postgres://postgres@127.0.0.1:$pg_port/sluice  ($dir/postgres)
  PostgreSQL standby (sync):  postgres://postgres@127.0.0.1:$standby_port/sluice  ($dir/postgres-standby)
  sluice --meta:              $ha_meta_url
  Redis master:               redis://127.0.0.1:$(cat "$dir/redis-ha/master/port")  replicas $(cat "$dir"/redis-ha/replica*/port | tr '\n' ' ')
  sluice --cache (Sentinel):  $ha_cache_url
  fail over PostgreSQL:       scripts/testenv/postgres.sh pause $dir/postgres && scripts/testenv/postgres.sh promote $dir/postgres-standby
  fail over Redis:            redis-cli -p $(cat "$dir/redis-ha/sentinel1/port") sentinel failover mymaster
EOF
  else
    cat <<EOF
  PostgreSQL:                 postgres://postgres@127.0.0.1:$pg_port/sluice
  Redis:                      redis://127.0.0.1:$redis_port
EOF
  fi
  if [ "$fault_proxies" = 1 ]; then
    cat <<EOF
  fault proxies (listen -> upstream, control):
    PostgreSQL  127.0.0.1:$pg_dial -> $pg_port  http://127.0.0.1:$((base + 20))/faults
    Redis       127.0.0.1:$redis_dial -> $redis_port  http://127.0.0.1:$((base + 21))/faults
    S3          127.0.0.1:$s3_dial -> $s3_port  http://127.0.0.1:$((base + 22))/faults
    edge->nginx 127.0.0.1:$edge_backend -> $nginx_port  http://127.0.0.1:$((base + 23))/faults
EOF
  fi
}

restart_apps() {
  [ -f "$dir/stack.env" ] || { echo "no stack in $dir" >&2; exit 1; }
  dir=$(cd "$dir" && pwd)
  # The stack's own settings, then this restart's.
  sluice_args=("${stack_args[@]}" "${sluice_args[@]}")
  s3_keys
  for app in "$dir"/app*; do stop_pidfile "$app/pid"; done
  start_apps || exit 1
}

stop_pidfile() {  # FILE
  [ -f "$1" ] || return 0
  local pid
  pid=$(cat "$1")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}

down() {
  [ -d "$dir" ] || return 0
  dir=$(cd "$dir" && pwd)
  stop_pidfile "$dir/varnish/varnish.pid"
  stop_pidfile "$dir/nginx/nginx.pid"
  for app in "$dir"/app*; do stop_pidfile "$app/pid"; done
  for proxy in "$dir"/proxy-*; do [ -d "$proxy" ] && stop_pidfile "$proxy/pid"; done
  [ ! -d "$dir/s3" ] || "$here/scripts/testenv/s3rver.sh" stop "$dir/s3" || true
  [ ! -d "$dir/ceph" ] || "$here/scripts/testenv/ceph-rgw.sh" stop "$dir/ceph" || true
  "$here/scripts/testenv/redis.sh" stop "$dir/redis" || true
  # The HA variant's parts, where they exist.
  [ ! -d "$dir/redis-ha" ] || "$here/scripts/testenv/redis-sentinel.sh" stop "$dir/redis-ha" || true
  [ ! -d "$dir/postgres-standby" ] || "$here/scripts/testenv/postgres.sh" stop "$dir/postgres-standby" || true
  [ ! -d "$dir/patroni" ] || "$here/scripts/testenv/patroni.sh" stop "$dir/patroni" || true
  "$here/scripts/testenv/postgres.sh" stop "$dir/postgres" || true
  rm -rf "$dir"
  echo "sluice stack stopped"
}

case "$cmd" in
  up)
    if [ "$foreground" = 1 ]; then
      trap down EXIT
      trap 'exit 0' INT TERM
      up
      echo "Ctrl-C stops everything."
      while true; do sleep 3600; done
    else
      up || { down; exit 1; }
    fi
    ;;
  down) down ;;
  restart-apps) restart_apps ;;
  *) echo "usage: $0 up [--processes N] [--base-port P] [--dir DIR] [--foreground] [--fault-proxies] [--ha [--patroni]] [--s3 s3rver|ceph] | restart-apps [--dir DIR] [--meta URL] [-- ARGS] | down [--dir DIR]" >&2; exit 2 ;;
esac
