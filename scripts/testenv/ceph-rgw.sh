#!/usr/bin/env bash
# A real S3 for the blob-store tests: a one-node Ceph cluster (one monitor, one manager, one OSD)
# and its RADOS Gateway, from Debian's packages, everything under one folder.
#
#   ceph-rgw.sh start DIR PORT [BUCKET]   start it with the gateway on 127.0.0.1:PORT (0: a free
#                                         port) over HTTP, and over HTTPS on another free port
#                                         with a throw-away CA (DIR/ca.pem) and a certificate for
#                                         localhost and 127.0.0.1 (tls-cert.sh); creates an S3
#                                         user with new keys and BUCKET (default sluice-test);
#                                         returns once a signed S3 request on the bucket is
#                                         answered. Writes DIR/endpoint, DIR/tls_endpoint,
#                                         DIR/access_key, DIR/secret_key and DIR/bucket; prints
#                                         the endpoint.
#   ceph-rgw.sh start-gateway DIR         start the gateway of DIR's cluster again (after a test
#                                         killed it) and wait until it answers a signed request
#   ceph-rgw.sh stop DIR                  stop what was started with DIR (pids in DIR/*.pid)
#
# Nothing outside DIR is read or written: the configuration is DIR/ceph.conf (every command gets
# --conf), the cluster's fsid is new each start, the keys are cephx keys in DIR (never
# /etc/ceph), the daemons run in the foreground of this script's children (no systemd) and only
# the pids recorded here are ever signalled. The gateway's pid is DIR/radosgw.pid, for the tests
# that stop it (SIGSTOP) or kill it.
#
# The OSD's object store is CEPH_RGW_OBJECTSTORE: memstore (the default; the objects live in the
# OSD's memory, which suits a throw-away cluster whose data is a few MB) or bluestore (on a
# sparse 10 GiB file, DIR/osd.0/block). bench/results/ceph-rgw.md measures both. For a cluster
# that holds more than a test's few MB (the growth bench's million pastes), CEPH_RGW_BLOCK_BYTES
# sizes BlueStore's file (sparse: only what is written takes disk) and CEPH_RGW_CACHE_BYTES its
# cache (default 64 MiB, a shared machine's test cluster). CEPH_RGW_PATIENCE (default 60) is how
# many seconds one ceph or radosgw-admin command, and the wait for the bucket, may take: on a
# machine whose cores are taken by others, a niced ceph command (Python) took over 60 s to start.
set -euo pipefail
testenv=$(cd "$(dirname "$0")" && pwd)

usage() {
  echo "usage: $0 start DIR PORT [BUCKET] | start-gateway DIR | stop DIR" >&2
  exit 2
}

# Runs a daemon in the foreground of a child of this script, its pid in DIR/NAME.pid.
start_daemon() {  # DIR NAME command...
  local dir=$1 name=$2
  shift 2
  nice -n "${CEPH_RGW_NICE:-0}" "$@" -f >>"$dir/log/$name.out" 2>&1 &
  echo $! >"$dir/$name.pid"
}

# Sends each "METHOD URL" SigV4-signed, again every 0.1 s until it is answered 2xx, all within
# CEPH_RGW_PATIENCE (60) s and while the gateway runs; fails with the last answer otherwise. One
# Python for them all: importing botocore takes seconds on a busy machine. curl 7.88's
# --aws-sigv4 signs S3 requests that RGW refuses (SignatureDoesNotMatch), so botocore signs, as
# it checks signatures in tests/backend/sigv4_checking_proxy.py.
s3_until_ok() {  # DIR "METHOD URL"...
  local dir=$1
  shift
  "${PYTHON:-/usr/bin/python3}" - "$(cat "$dir/access_key")" "$(cat "$dir/secret_key")" \
    "$dir/ca.pem" "$(cat "$dir/radosgw.pid")" "$@" <<'PY'
import os, ssl, sys, time, urllib.error, urllib.request
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

key, secret, cafile, pid = sys.argv[1:5]
context = ssl.create_default_context(cafile=cafile)
deadline = time.monotonic() + int(os.environ.get("CEPH_RGW_PATIENCE", "60"))


def send(method, url):
    request = AWSRequest(method=method, url=url, data=b"")
    S3SigV4Auth(Credentials(key, secret), "s3", "us-east-1").add_auth(request)
    prepared = urllib.request.Request(url, method=method, headers=dict(request.headers.items()))
    tls = context if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(prepared, timeout=10, context=tls) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError as error:
        return 0, str(error).encode()


for step in sys.argv[5:]:
    method, url = step.split(" ", 1)
    while True:
        status, body = send(method, url)
        if 200 <= status < 300:  # a DELETE answers 204
            break
        try:
            os.kill(int(pid), 0)
        except OSError:
            sys.exit(f"ceph-rgw: the gateway exited; {method} {url} answered {status}")
        if time.monotonic() > deadline:
            sys.exit(f"ceph-rgw: {method} {url} answered {status}: {body.decode(errors='replace')}")
        time.sleep(0.1)
PY
}

# Whether PID runs: a killed daemon stays a zombie until init reaps it, and kill -0 still finds it.
running() {  # PID
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ -n "$state" && "$state" != Z* ]]
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Signals the daemons in reverse order of start, waits up to 10 s for each, then kills it.
stop_all() {
  local dir=$1 name pid
  for name in radosgw mgr osd mon; do
    [[ -f "$dir/$name.pid" ]] || continue
    pid=$(cat "$dir/$name.pid")
    # A test may have left it stopped (SIGSTOP): let it run so it can take the TERM.
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      running "$pid" || break
      sleep 0.1
    done
    if running "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
    rm -f "$dir/$name.pid"
  done
  rm -f "$dir/endpoint"
}

# Fails (status 1) with the end of the daemon's log when it has exited. During a start, the ERR
# trap then stops the rest.
check_alive() {
  local dir=$1 name=$2
  running "$(cat "$dir/$name.pid")" && return 0
  echo "ceph-rgw: $name exited; the end of its log:" >&2
  tail -n 30 "$dir/log/$name.out" 2>/dev/null >&2 || true
  return 1
}

[[ $# -ge 2 ]] || usage
cmd=$1
dir=$2

case "$cmd" in
  start)
    [[ $# -ge 3 ]] || usage
    port=$3
    bucket=${4:-sluice-test}
    objectstore=${CEPH_RGW_OBJECTSTORE:-memstore}
    for tool in ceph-mon ceph-osd ceph-mgr radosgw radosgw-admin ceph ceph-authtool monmaptool; do
      command -v "$tool" >/dev/null || {
        echo "$tool not found (apt-get install ceph-mon ceph-osd ceph-mgr radosgw ceph-common)" >&2
        exit 1
      }
    done
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [[ -f "$dir/mon.pid" ]] && running "$(cat "$dir/mon.pid")"; then
      echo "ceph-rgw already running for $dir (mon pid $(cat "$dir/mon.pid"))" >&2
      exit 1
    fi
    # A new cluster each start: what a previous run left is not this cluster's.
    rm -rf "$dir/mon.a" "$dir/osd.0" "$dir/mgr.x" "$dir/rgw" "$dir/log" "$dir/run" \
      "$dir/keyring" "$dir/ceph.conf" "$dir/endpoint" "$dir/tls_endpoint" "$dir/access_key" \
      "$dir/secret_key" "$dir/bucket" "$dir/monmap"
    mkdir -p "$dir/mon.a" "$dir/osd.0" "$dir/mgr.x" "$dir/rgw" "$dir/log" "$dir/run"
    mon_port=$(free_port)
    [[ "$port" == 0 ]] && port=$(free_port)
    tls_port=$(free_port)
    # The gateway speaks both: HTTP on PORT, HTTPS (beast's ssl_endpoint) on TLS_PORT. One
    # cluster serves the plain and the TLS runs of the suite.
    "$testenv/tls-cert.sh" "$dir" DNS:localhost,IP:127.0.0.1
    frontend="beast endpoint=127.0.0.1:$port ssl_endpoint=127.0.0.1:$tls_port"
    frontend+=" ssl_certificate=$dir/server.pem ssl_private_key=$dir/server.key"
    # Idle keep-alive connections are closed after 5 s, as s3rver (Node) does, so the tests of a
    # connection the peer closed while idle run here too; RGW's own default is 65 s.
    frontend+=" request_timeout_ms=5000"

    cat >"$dir/ceph.conf" <<EOF
# Written by scripts/testenv/ceph-rgw.sh for a throw-away one-node cluster.
[global]
fsid = $(uuidgen)
mon host = v2:127.0.0.1:$mon_port
public addr = 127.0.0.1
ms bind msgr1 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
log to stderr = false
err to stderr = true
mon cluster log file = $dir/log/cluster.log
# One OSD: pools of one replica, placed on OSDs rather than hosts, few placement groups.
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon max pg per osd = 1000
# A throw-away disk that is nearly full is still good enough for tests.
mon osd full ratio = .99
mon osd backfillfull ratio = .99
mon osd nearfull ratio = .99
osd failsafe full ratio = .995
mon data avail warn = 1
mon data avail crit = 0

[client.admin]
keyring = $dir/keyring

[mon]
mon data = $dir/mon.a
keyring = $dir/mon.a/keyring
# Small caches: the cluster runs beside the rest of the suite on a shared machine.
rocksdb cache size = 33554432
mon osd cache size = 50
mon memory target = 268435456
# Each pool the gateway makes is a new OSD map; a monitor that proposes every second (its
# default) makes the first start wait a second a pool.
paxos propose interval = 0.1
paxos min wait = 0.01

[mgr]
mgr data = $dir/mgr.x
keyring = $dir/mgr.x/keyring
# The manager's Python modules are most of its memory: only those Pacific always runs are loaded.
mgr initial modules =
mgr disabled modules = alerts diskprediction_local influx insights iostat localpool mirroring nfs osd_perf_query osd_support prometheus restful selftest snap_schedule stats telegraf test_orchestrator zabbix

[osd]
osd data = $dir/osd.0
keyring = $dir/osd.0/keyring
osd objectstore = $objectstore
osd memory target = 939524096
osd memory cache min = 67108864
bluestore cache autotune = false
bluestore cache size = ${CEPH_RGW_CACHE_BYTES:-67108864}
bluestore block create = true
bluestore block size = ${CEPH_RGW_BLOCK_BYTES:-10737418240}
memstore device bytes = 2147483648
osd op num shards = 1
osd op num threads per shard = 2
osd scrub during recovery = false
osd max scrubs = 0

[client.rgw.a]
rgw frontends = $frontend
rgw data = $dir/rgw
keyring = $dir/rgw/keyring
rgw thread pool size = 64
rgw enable usage log = false
rgw dns name = localhost
EOF
    conf=(--conf "$dir/ceph.conf")
    # When each phase ended, in seconds since the start (bench/results/ceph-rgw.md reads them).
    started=$(date +%s.%N)
    phase() { awk -v name="$1" -v a="$(date +%s.%N)" -v b="$started" \
      'BEGIN { printf "%s %.1f\n", name, a - b }' >>"$dir/log/phases"; }
    # Whatever fails below, nothing started here is left running.
    trap 'stop_all "$dir"' ERR

    # Monitor: its key and the admin's in one keyring, a monitor map of one, then its store.
    ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
    ceph-authtool "$dir/keyring" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' \
      --cap mgr 'allow *' --cap mds 'allow *' >/dev/null
    fsid=$(sed -n 's/^fsid = //p' "$dir/ceph.conf")
    monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" "$dir/monmap" >/dev/null
    ceph-mon "${conf[@]}" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/keyring" \
      >"$dir/log/mon.mkfs" 2>&1
    rm "$dir/monmap"
    start_daemon "$dir" mon ceph-mon "${conf[@]}" -i a
    patience=${CEPH_RGW_PATIENCE:-60}
    ceph_cli() { timeout "$patience" ceph "${conf[@]}" --connect-timeout 30 "$@"; }
    for _ in $(seq 1 300); do
      ceph_cli mon stat >/dev/null 2>&1 && break
      check_alive "$dir" mon
      sleep 0.1
    done
    check_alive "$dir" mon
    phase monitor_answers

    # Manager.
    ceph_cli auth get-or-create mgr.x mon 'allow profile mgr' osd 'allow *' mds 'allow *' \
      -o "$dir/mgr.x/keyring"
    start_daemon "$dir" mgr ceph-mgr "${conf[@]}" -i x

    # OSD: registered under a new uuid, its store made, its key given to the monitor.
    osd_uuid=$(uuidgen)
    osd_id=$(ceph_cli osd new "$osd_uuid")
    [[ "$osd_id" == 0 ]] || { echo "ceph-rgw: expected osd.0, got osd.$osd_id" >&2; exit 1; }
    ceph-osd "${conf[@]}" --no-mon-config -i 0 --mkfs --mkkey --osd-uuid "$osd_uuid" >"$dir/log/osd.mkfs" 2>&1 || {
      echo "ceph-rgw: ceph-osd --mkfs failed:" >&2
      cat "$dir/log/osd.mkfs" >&2
      stop_all "$dir"
      exit 1
    }
    ceph_cli auth add osd.0 -i "$dir/osd.0/keyring" osd 'allow *' mon 'allow profile osd' \
      mgr 'allow profile osd' >/dev/null 2>"$dir/log/osd.auth"
    start_daemon "$dir" osd ceph-osd "${conf[@]}" -i 0
    phase osd_started

    # Gateway: its key, then the daemon; it makes its pools once the OSD is up.
    ceph_cli auth get-or-create client.rgw.a mon 'allow rw' osd 'allow rwx' mgr 'allow rw' \
      -o "$dir/rgw/keyring"
    start_daemon "$dir" radosgw radosgw "${conf[@]}" -n client.rgw.a

    # Ready for the user when the gateway answers HTTP (an anonymous listing).
    endpoint="http://127.0.0.1:$port"
    ready=""
    for _ in $(seq 1 $((patience * 20))); do
      if curl -s -o /dev/null "$endpoint/" 2>/dev/null; then
        ready=1
        break
      fi
      for name in mon mgr osd radosgw; do check_alive "$dir" "$name"; done
      sleep 0.1
    done
    [[ -n "$ready" ]] || {
      echo "ceph-rgw: the gateway did not answer on port $port within $((patience * 2)) s" >&2
      stop_all "$dir"
      exit 1
    }
    phase gateway_answers

    # The S3 user, with keys made here, then the bucket by a signed S3 request: the readiness
    # check is a real S3 request answered, not a sleep.
    access_key=$(openssl rand -hex 10 | tr a-f A-F)
    secret_key=$(openssl rand -base64 30)
    timeout "$patience" radosgw-admin "${conf[@]}" user create --uid sluice --display-name sluice \
      --access-key "$access_key" --secret-key "$secret_key" >"$dir/log/user.json" \
      2>"$dir/log/user.err"
    echo "$access_key" >"$dir/access_key"
    echo "$secret_key" >"$dir/secret_key"
    chmod 600 "$dir/secret_key"
    echo "$bucket" >"$dir/bucket"
    phase user_created
    # The bucket made, then listed over HTTP and over HTTPS, by name so that the certificate's
    # host name is what gets verified.
    s3_until_ok "$dir" "PUT $endpoint/$bucket" "GET $endpoint/$bucket?list-type=2&max-keys=1" \
      "GET https://localhost:$tls_port/$bucket?list-type=2&max-keys=1"
    phase bucket_listed
    # An object written and removed: the gateway makes its data pool at the first write (a new
    # OSD map, its placement groups created), which took a first PUT 6.7 s on a busy machine, past
    # sluice's 1 s put_timeout. Made here, the cluster is ready for the first paste.
    s3_until_ok "$dir" "PUT $endpoint/$bucket/ceph-rgw-probe" \
      "DELETE $endpoint/$bucket/ceph-rgw-probe"
    phase object_written
    echo "https://localhost:$tls_port" >"$dir/tls_endpoint"
    echo "$endpoint" >"$dir/endpoint"
    cat "$dir/endpoint"
    ;;
  start-gateway)
    [[ -f "$dir/ceph.conf" && -f "$dir/endpoint" ]] || { echo "no cluster started in $dir" >&2; exit 1; }
    dir=$(cd "$dir" && pwd)
    if [[ -f "$dir/radosgw.pid" ]] && running "$(cat "$dir/radosgw.pid")"; then
      echo "the gateway of $dir is running (pid $(cat "$dir/radosgw.pid"))" >&2
      exit 1
    fi
    start_daemon "$dir" radosgw radosgw --conf "$dir/ceph.conf" -n client.rgw.a
    s3_until_ok "$dir" "GET $(cat "$dir/endpoint")/$(cat "$dir/bucket")?list-type=2&max-keys=1"
    ;;
  stop)
    [[ -d "$dir" ]] || exit 0
    stop_all "$dir"
    ;;
  *)
    usage
    ;;
esac
