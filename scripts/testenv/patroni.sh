#!/usr/bin/env bash
# A throwaway Patroni cluster for the chaos lab (tools/run_lab.py, "primary fails over") and
# `make stack HA=1`: one etcd (single member) and N Patroni members (default 2) running Debian's
# PostgreSQL 15, everything on 127.0.0.1, data and logs under DIR. Nothing here is production's:
# trust auth on loopback, fsync off (a test server's data is worth nothing after the run).
#
#   patroni.sh start DIR BASE_PORT [MEMBERS]
#        etcd client BASE_PORT, peer BASE_PORT+1; member i (1..N): PostgreSQL BASE_PORT+2i,
#        REST API BASE_PORT+2i+1. Waits until one member leads, every other one streams and,
#        with two or more, one is the synchronous standby; creates database `sluice`. Prints the
#        multi-host URL (target_session_attrs=read-write), also written to DIR/url.
#   patroni.sh leader DIR        the leader's member name (from a member's REST API, /cluster)
#   patroni.sh sync DIR          the synchronous standby's member name (empty when none)
#   patroni.sh kill-leader DIR   kill -9 the leader's Patroni and its postmaster together, as when
#                                its machine is lost; prints the member name
#   patroni.sh stop DIR          stop everything started here (by pid files) and remove DIR
#
# The cluster: synchronous_mode: true (Patroni names one replica in synchronous_standby_names and
# moves the name on a failover; only a synchronous standby may be promoted, so a commit that
# returned is on the new leader), ttl 5 s, loop_wait 1 s, retry_timeout 2 s (Patroni's rule:
# loop_wait + 2 x retry_timeout <= ttl). A leader lost without a word is noticed when its leader
# key's lease expires: within ttl (5 s) of its last renewal, then the synchronous standby takes the
# key and promotes on its next loop (<= loop_wait). Production runs ttl 30, loop_wait 10.
#
# Run as root, Patroni, PostgreSQL and etcd run as the `postgres` OS user (initdb refuses root).
set -euo pipefail

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
cmd=${1:-}
dir=${2:-}
usage() { echo "usage: $0 start DIR BASE_PORT [MEMBERS] | leader DIR | sync DIR | kill-leader DIR | stop DIR" >&2; exit 2; }
[ -n "$cmd" ] && [ -n "$dir" ] || usage

# setpriv execs (runuser would stay as the parent).
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; else "$@"; fi
}
# For `spawn CMD &`: the background subshell becomes the server, so $! is its pid.
spawn() {
  if [ "$(id -u)" -eq 0 ]; then exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"; else exec "$@"; fi
}

# The cluster as one member's REST API sees it: {"members": [{"name", "role", "state", ...}]}.
cluster_json() {
  local m
  for m in "$dir"/pg*/; do
    [ -f "$m/rest_port" ] || continue
    curl -fsS --max-time 1 "http://127.0.0.1:$(cat "$m/rest_port")/cluster" 2>/dev/null && return 0
  done
  return 1
}

member_with_role() {  # ROLE...: the first member whose role is one of them
  cluster_json | python3 -c '
import json, sys
roles = sys.argv[1:]
print(next((m["name"] for m in json.load(sys.stdin)["members"] if m["role"] in roles), ""))' "$@"
}

stop_pid() {  # PID [SIGNAL]
  local pid=$1
  kill "-${2:-TERM}" "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}

case "$cmd" in
  start)
    base=${3:-}
    members=${4:-2}
    [ -n "$base" ] || usage
    command -v patroni >/dev/null && command -v etcd >/dev/null ||
      { echo "patroni and etcd are missing: scripts/install-deps.sh test" >&2; exit 1; }
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    chmod 755 "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
    as_owner mkdir -p "$dir/etcd"
    # One etcd member is enough for a lab: it is the DCS, not what is being failed over.
    spawn etcd --name lab --data-dir "$dir/etcd/data" \
      --listen-client-urls "http://127.0.0.1:$base" --advertise-client-urls "http://127.0.0.1:$base" \
      --listen-peer-urls "http://127.0.0.1:$((base + 1))" \
      --initial-advertise-peer-urls "http://127.0.0.1:$((base + 1))" \
      --initial-cluster "lab=http://127.0.0.1:$((base + 1))" \
      --heartbeat-interval 100 --election-timeout 1000 >"$dir/etcd/log" 2>&1 &
    echo $! >"$dir/etcd/pid"
    for _ in $(seq 1 100); do
      curl -fsS --max-time 1 "http://127.0.0.1:$base/health" 2>/dev/null | grep -q true && break
      sleep 0.1
    done
    curl -fsS --max-time 1 "http://127.0.0.1:$base/health" | grep -q true ||
      { echo "etcd did not start; log follows" >&2; cat "$dir/etcd/log" >&2; exit 1; }
    hosts=()
    for i in $(seq 1 "$members"); do
      m="$dir/pg$i"
      pg_port=$((base + 2 * i)) rest_port=$((base + 2 * i + 1))
      as_owner mkdir -p "$m"
      echo "$pg_port" >"$m/port"
      echo "$rest_port" >"$m/rest_port"
      cat >"$m/patroni.yml" <<YML
scope: sluice-lab
namespace: /sluice/
name: pg$i
log:
  dir: $m
  file_num: 1
restapi:
  listen: 127.0.0.1:$rest_port
  connect_address: 127.0.0.1:$rest_port
etcd3:
  hosts: 127.0.0.1:$base
bootstrap:
  dcs:
    ttl: 5
    loop_wait: 1
    retry_timeout: 2
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    postgresql:
      use_pg_rewind: false
      parameters:
        fsync: 'off'
        full_page_writes: 'off'
        max_connections: 300
        shared_buffers: 32MB
        wal_level: replica
        hot_standby: 'on'
        max_wal_senders: 10
        max_replication_slots: 10
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
    - auth: trust
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:$pg_port
  connect_address: 127.0.0.1:$pg_port
  data_dir: $m/data
  bin_dir: $PGBIN
  pgpass: $m/pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
  parameters:
    unix_socket_directories: '$m'
YML
      chown postgres: "$m/port" "$m/rest_port" "$m/patroni.yml" 2>/dev/null || true
      spawn patroni "$m/patroni.yml" >"$m/stdout.log" 2>&1 &
      echo $! >"$m/pid"
      hosts+=("127.0.0.1:$pg_port")
    done
    # Ready: a leader that takes writes, every other member streaming, and (with a replica) the
    # synchronous standby chosen, so that the first 201 is already on two servers.
    ok=0
    for _ in $(seq 1 600); do
      state=$(cluster_json | python3 -c '
import json, sys
ms = json.load(sys.stdin)["members"]
lead = [m for m in ms if m["role"] == "leader" and m["state"] == "running"]
rest = [m for m in ms if m["role"] != "leader" and m["state"] in ("running", "streaming")]
sync = [m for m in ms if m["role"] == "sync_standby"]
print("ok" if lead and len(lead) + len(rest) == int(sys.argv[1]) and (sync or len(ms) == 1) else "")' \
        "$members" 2>/dev/null || true)
      [ "$state" = ok ] && { ok=1; break; }
      sleep 0.1
    done
    [ "$ok" = 1 ] || { echo "the Patroni cluster did not settle; logs follow" >&2;
                        tail -n 30 "$dir"/pg*/patroni.log "$dir"/pg*/stdout.log >&2 || true; exit 1; }
    leader=$(member_with_role leader)
    lport=$(cat "$dir/$leader/port")
    if ! "$PGBIN/psql" -h 127.0.0.1 -p "$lport" -U postgres -d postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname = 'sluice'" | grep -q 1; then
      "$PGBIN/createdb" -h 127.0.0.1 -p "$lport" -U postgres sluice
    fi
    url="postgres://postgres@$(IFS=,; echo "${hosts[*]}")/sluice?target_session_attrs=read-write"
    echo "$url" >"$dir/url"
    echo "$url"
    ;;
  leader) member_with_role leader ;;
  sync) member_with_role sync_standby ;;
  kill-leader)
    dir=$(cd "$dir" && pwd)
    leader=$(member_with_role leader)
    [ -n "$leader" ] || { echo "no leader" >&2; exit 1; }
    m="$dir/$leader"
    ppid=$(head -n 1 "$m/data/postmaster.pid" 2>/dev/null || true)
    kill -9 "$(cat "$m/pid")" ${ppid:+"$ppid"} 2>/dev/null || true
    echo "$leader"
    ;;
  stop)
    [ -d "$dir" ] || exit 0
    dir=$(cd "$dir" && pwd)
    # Patroni stops its PostgreSQL on SIGTERM; a member killed earlier may have left one behind.
    for m in "$dir"/pg*/; do
      [ -f "$m/pid" ] && stop_pid "$(cat "$m/pid")"
      if [ -f "$m/data/postmaster.pid" ]; then
        as_owner "$PGBIN/pg_ctl" -D "$m/data" -m immediate -w stop >/dev/null 2>&1 || true
      fi
    done
    [ -f "$dir/etcd/pid" ] && stop_pid "$(cat "$dir/etcd/pid")"
    rm -rf "$dir"
    ;;
  *) usage ;;
esac
