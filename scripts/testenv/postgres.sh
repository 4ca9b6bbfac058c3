#!/usr/bin/env bash
# A throwaway PostgreSQL 15 for tests: data, socket and log under DIR, listening on 127.0.0.1:PORT
# only, trust auth on loopback, fsync off (a test server's data is worth nothing after the test).
# PG_DURABLE=1 keeps fsync and full_page_writes on, for a benchmark of durable creates
# (bench/growth.py --fleet), and PG_SHARED_BUFFERS sets its cache (default 32MB).
# synchronous_commit stays on: with it off, `pause` (an immediate stop) would lose the last commits,
# and the outage tests check that committed rows are there after `resume`.
#
#   postgres.sh start DIR PORT   initdb if DIR is new, start, wait until ready, create database
#                                `sluice`, print the URL (also written to DIR/url). PORT 0 picks a
#                                free port.
#   postgres.sh start-tls DIR PORT
#                                the same, but as a managed PostgreSQL is reached: TCP only over
#                                TLS (a certificate for the name localhost from a throwaway CA made
#                                here, DIR/ca.pem), a password for the user (scram-sha-256, in
#                                DIR/password), plain TCP refused. The URL (DIR/url) asks for
#                                sslmode=verify-full with that CA and carries no password.
#   postgres.sh pause DIR        stop at once (-m immediate) but keep DIR: an outage
#   postgres.sh resume DIR       start again on the same port and data: the recovery
#   postgres.sh stop DIR         stop at once and remove DIR
#   postgres.sh start-standby DIR PRIMARY_DIR PORT [sync|async]
#                                a streaming standby of the primary in PRIMARY_DIR (started by
#                                `start`): pg_basebackup -R, started, waits until it streams. With
#                                `sync` (the default) the primary then names it in
#                                synchronous_standby_names (synchronous_commit stays on), so a
#                                commit returns only once the standby has flushed it: a 201 is on
#                                two servers. Prints the multi-host URL primary,standby with
#                                target_session_attrs=read-write (also DIR/url; DIR/standby-url is
#                                the standby alone).
#   postgres.sh promote DIR      promote the standby in DIR (pg_ctl promote), wait until it writes
#
# Run as root, the server runs as the `postgres` OS user (initdb refuses root).
set -euo pipefail
testenv=$(cd "$(dirname "$0")" && pwd)

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|start-tls DIR PORT | start-standby DIR PRIMARY_DIR PORT [sync|async] | promote DIR | pause DIR | resume DIR | stop DIR" >&2; exit 2; }

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

pg_start() {
  local port
  port=$(cat "$dir/port")
  # -w waits for the postmaster; pg_isready below also waits for it to accept queries.
  as_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1" start >/dev/null
  for _ in $(seq 1 600); do
    if "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$port"; then return 0; fi
    sleep 0.1
  done
  echo "postgres did not become ready on port $port; log follows" >&2
  cat "$dir/log" >&2 || true
  exit 1
}

case "$cmd" in
  start | start-tls)
    port=${3:-0}
    [ "$port" = 0 ] && port=$(free_port)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
      as_owner "$PGBIN/initdb" -D "$dir/data" -U postgres --auth=trust --no-sync -E UTF8 \
        --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
      if [ "${PG_DURABLE:-0}" = 1 ]; then durable=on; else durable=off; fi
      cat >>"$dir/data/postgresql.conf" <<CONF
fsync = $durable
full_page_writes = $durable
max_connections = 300
shared_buffers = ${PG_SHARED_BUFFERS:-32MB}
CONF
      if [ "$cmd" = start-tls ]; then
        "$testenv/tls-cert.sh" "$dir" DNS:localhost
        [ "$(id -u)" -eq 0 ] && chown postgres: "$dir/server.key" "$dir/server.pem"
        chmod 600 "$dir/server.key"
        python3 -c 'import secrets; print(secrets.token_urlsafe(18))' >"$dir/password"
        cat >>"$dir/data/postgresql.conf" <<CONF
ssl = on
ssl_cert_file = '$dir/server.pem'
ssl_key_file = '$dir/server.key'
password_encryption = scram-sha-256
CONF
        # The script itself keeps the Unix socket (trust); over TCP only TLS and a password.
        printf 'local all all trust\nhostssl all all 127.0.0.1/32 scram-sha-256\nhost all all 127.0.0.1/32 reject\n' \
          >"$dir/data/pg_hba.conf"
      else
        # Loopback only, trust: a test server holds nothing worth a password.
        printf 'local all all trust\nhost all all 127.0.0.1/32 trust\n' >"$dir/data/pg_hba.conf"
      fi
      echo "$port" >"$dir/port"
      [ "$(id -u)" -eq 0 ] && chown postgres: "$dir/port"
    fi
    pg_start
    port=$(cat "$dir/port")
    if ! "$PGBIN/psql" -h "$dir" -p "$port" -U postgres -d postgres -tAc \
      "SELECT 1 FROM pg_database WHERE datname = 'sluice'" | grep -q 1; then
      "$PGBIN/createdb" -h "$dir" -p "$port" -U postgres sluice
    fi
    if [ -f "$dir/password" ]; then
      "$PGBIN/psql" -h "$dir" -p "$port" -U postgres -d postgres -q -c \
        "ALTER USER postgres PASSWORD '$(cat "$dir/password")'"
      url="postgres://postgres@localhost:$port/sluice?sslmode=verify-full&sslrootcert=$dir/ca.pem"
    else
      url="postgres://postgres@127.0.0.1:$port/sluice"
    fi
    echo "$url" >"$dir/url"
    echo "$url"
    ;;
  start-standby)
    primary=${3:-}
    port=${4:-0}
    mode=${5:-sync}
    [ -n "$primary" ] && [ -f "$primary/port" ] || { echo "start-standby: no primary in '$primary'" >&2; exit 2; }
    case "$mode" in sync | async) ;; *) echo "start-standby: mode is sync or async" >&2; exit 2 ;; esac
    primary=$(cd "$primary" && pwd)
    pport=$(cat "$primary/port")
    [ "$port" = 0 ] && port=$(free_port)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
    # Replication connections match only `replication` lines of pg_hba.conf, never `all`.
    if ! grep -q '^host replication' "$primary/data/pg_hba.conf"; then
      echo 'host replication all 127.0.0.1/32 trust' >>"$primary/data/pg_hba.conf"
      "$PGBIN/psql" -h "$primary" -p "$pport" -U postgres -d postgres -qtAc "SELECT pg_reload_conf()" >/dev/null
    fi
    # -R writes primary_conninfo and standby.signal; the standby copies the primary's settings,
    # before synchronous_standby_names is set: a promoted standby must not wait for a standby of
    # its own that does not exist.
    as_owner "$PGBIN/pg_basebackup" -h 127.0.0.1 -p "$pport" -U postgres -D "$dir/data" -R \
      -X stream --checkpoint=fast --no-sync >"$dir/basebackup.log" 2>&1 ||
      { cat "$dir/basebackup.log" >&2; exit 1; }
    # The standby's name on the primary (pg_stat_replication.application_name).
    echo "cluster_name = 'standby'" >>"$dir/data/postgresql.conf"
    echo "$port" >"$dir/port"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$dir/port"
    pg_start
    for _ in $(seq 1 300); do
      state=$("$PGBIN/psql" -h "$primary" -p "$pport" -U postgres -d postgres -tAc \
        "SELECT state FROM pg_stat_replication WHERE application_name = 'standby'")
      [ "$state" = streaming ] && break
      sleep 0.1
    done
    [ "$state" = streaming ] || { echo "standby did not stream; log follows" >&2; cat "$dir/log" >&2; exit 1; }
    if [ "$mode" = sync ]; then
      "$PGBIN/psql" -h "$primary" -p "$pport" -U postgres -d postgres -qtAc \
        "ALTER SYSTEM SET synchronous_standby_names = 'standby'" -c "SELECT pg_reload_conf()" >/dev/null
      for _ in $(seq 1 300); do
        sync=$("$PGBIN/psql" -h "$primary" -p "$pport" -U postgres -d postgres -tAc \
          "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'")
        [ "$sync" = sync ] && break
        sleep 0.1
      done
      [ "$sync" = sync ] || { echo "standby is not synchronous" >&2; exit 1; }
    fi
    echo "postgres://postgres@127.0.0.1:$port/sluice" >"$dir/standby-url"
    url="postgres://postgres@127.0.0.1:$pport,127.0.0.1:$port/sluice?target_session_attrs=read-write"
    echo "$url" >"$dir/url"
    echo "$url"
    ;;
  promote)
    dir=$(cd "$dir" && pwd)
    # -w waits until the server has left recovery: it takes writes from then on.
    as_owner "$PGBIN/pg_ctl" -D "$dir/data" -w -t 60 promote >/dev/null
    ;;
  pause)
    as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
    ;;
  resume)
    dir=$(cd "$dir" && pwd)
    pg_start
    ;;
  stop)
    if [ -f "$dir/data/postmaster.pid" ]; then
      as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac
