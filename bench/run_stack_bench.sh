#!/usr/bin/env bash
# Reproducible wrk benchmark of the scale-out stack (what `make bench` runs after the embedded one):
# scripts/stack.sh starts PostgreSQL, Redis, s3rver, PROCESSES sluice processes, nginx and Varnish
# on loopback; then
#   1. hot read of one 10 KB paste through Varnish (edge hits) and through nginx alone (each
#      process serves it from its cache), and the same read on one process directly;
#   2. creates of unique 10 KB pastes through nginx (PostgreSQL rows, s3rver bodies, Redis limits);
# beside the embedded figures of bench/results/embedded.md.
#
# Writes bench/results/stack.md and the raw wrk outputs to bench/work/raw/stack-*.txt.
# Environment: DURATION=10  CONNS=64  PROCESSES=2  WRK_THREADS=2  SLUICE_BIN=... (else a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
DURATION=${DURATION:-10}
CONNS=${CONNS:-64}
PROCESSES=${PROCESSES:-2}
WRK_THREADS=${WRK_THREADS:-2}
source bench/lib.sh
require_tools wrk nginx varnishd redis-server curl python3

bin=$(sluice_binary)
mkdir -p bench/work bench/work/raw
work=$(mktemp -d "$repo/bench/work/stack.XXXXXX")
chmod 755 "$work"
base=$(python3 - <<'PY'
import socket
for _ in range(100):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); base = s.getsockname()[1]; s.close()
    if base > 60000: continue
    try:
        held = []
        for p in range(base, base + 20):
            t = socket.socket(); t.bind(("127.0.0.1", p)); held.append(t)
        for t in held: t.close()
        print(base); break
    except OSError:
        pass
PY
)
cleanup() {
  local rc=$?
  SLUICE_BIN=$bin scripts/stack.sh down --dir "$work/stack" >/dev/null 2>&1 || true
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Limits lifted as in the embedded benchmark: this measures the path, not the limiter.
lifted=(--ip-create-rate 1000000 --ip-create-burst 1000000 --ip-create-bytes-rate 1e12
        --ip-create-bytes-burst 1e12 --global-create-rate 1000000 --global-create-burst 1000000
        --global-create-bytes-rate 1e12 --global-create-bytes-burst 1e12 --create-slots 1024
        --create-slot-bytes 1073741824 --ip-read-rate 1000000 --ip-read-burst 1000000
        --log-level warn)
SLUICE_BIN=$bin scripts/stack.sh up --processes "$PROCESSES" --base-port "$base" --dir "$work/stack" \
  -- "${lifted[@]}"
edge="http://127.0.0.1:$base"
balancer="http://127.0.0.1:$((base + 1))"
one="http://127.0.0.1:$((base + 10))"

python3 -c 'import sys; u = "sluice stack read body, naïve café ✓\n".encode(); sys.stdout.buffer.write((u * 400)[:10240])' >"$work/body"
paste_id=$(curl -fsS -X POST --data-binary @"$work/body" "$balancer/api/v1/pastes" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
for url in "$edge" "$balancer" "$one"; do
  curl -fsS -o "$work/got" "$url/raw/$paste_id"
  cmp "$work/body" "$work/got"
done
curl -fsS -D - -o /dev/null "$edge/raw/$paste_id" | grep -qi '^X-Cache: HIT' ||
  { echo "the edge does not cache /raw/{id}" >&2; exit 1; }

row() {  # row LABEL URL FILE
  local rps p50 p99 err
  rps=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$3")
  p50=$(to_ms "$(awk '$1 == "50%" {print $2}' "$3")")
  p99=$(to_ms "$(awk '$1 == "99%" {print $2}' "$3")")
  err=$(awk '/Socket errors:/ {gsub(/,/, ""); s += $4 + $6 + $8 + $10}
             /Non-2xx or 3xx responses:/ {s += $5} /^non_201 / {s += $2} END {print s + 0}' "$3")
  echo "| $1 | $2 | $rps | $p50 | $p99 | $err |"
}
run() {  # run NAME URL [wrk args]
  local name=$1 url=$2
  shift 2
  wrk -t"$WRK_THREADS" -c"$CONNS" -d2s "$url" >/dev/null 2>&1 || true
  echo "\$ wrk -t$WRK_THREADS -c$CONNS -d${DURATION}s --latency $* $url" >"bench/work/raw/stack-$name.txt"
  wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DURATION}s" --latency "$@" "$url" >>"bench/work/raw/stack-$name.txt" 2>&1
  echo "  $name done"
}
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
kernel_mark=$(kernel_log_mark)
run read-edge "$edge/raw/$paste_id"
run read-balancer "$balancer/raw/$paste_id"
run read-one-process "$one/raw/$paste_id"
run create-balancer "$balancer" -s bench/wrk/create.lua
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

embedded_read=$(grep '^| sluice (cache) | /raw/{id}' bench/results/embedded.md | head -1 || true)
embedded_create=$(grep -m1 '^| sluice | POST /api/v1/pastes | 64 ' bench/results/embedded.md || true)
{
  echo "# sluice scale-out stack benchmark"
  echo
  echo "| | |"
  echo "|---|---|"
  echo "| date | $(date -u +%Y-%m-%dT%H:%M:%SZ) |"
  echo "| cpu | $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo) |"
  echo "| nproc | $(nproc) |"
  echo "| load average before / after | $load_before / $load_after |"
  echo "| host events (kernel log) | $(host_events_since "$kernel_mark") |"
  echo "| git commit | $(git rev-parse --short HEAD) |"
  echo "| stack | Varnish $(varnishd -V 2>&1 | grep -o 'varnish-[0-9.]*' | head -1) -> $(nginx -v 2>&1 | cut -d' ' -f3) least_conn -> $PROCESSES x sluice on PostgreSQL 15, Redis $(redis-server --version | grep -o 'v=[0-9.]*'), s3rver $(node -p 'require("./node_modules/s3rver/package.json").version') |"
  echo "| command | \`DURATION=$DURATION CONNS=$CONNS PROCESSES=$PROCESSES bench/run_stack_bench.sh\` |"
  echo
  echo "Everything (wrk, Varnish, nginx, $PROCESSES sluice processes, PostgreSQL, Redis, s3rver) shares"
  echo "the same $(nproc) cores: the figures say what the path costs, not what a fleet of machines does."
  echo "Admission limits lifted as in the embedded benchmark."
  echo
  echo "## Hot read of a 10 KB paste ($CONNS connections, ${DURATION}s)"
  echo
  echo "| path | URL | req/s | p50 ms | p99 ms | errors |"
  echo "|---|---|---:|---:|---:|---:|"
  row "Varnish edge (hits)" "/raw/{id}" bench/work/raw/stack-read-edge.txt
  row "nginx -> $PROCESSES processes (their caches)" "/raw/{id}" bench/work/raw/stack-read-balancer.txt
  row "one process directly (its cache)" "/raw/{id}" bench/work/raw/stack-read-one-process.txt
  [ -n "$embedded_read" ] && echo "$embedded_read" | sed 's/^| sluice (cache) |/| embedded, from bench\/results\/embedded.md |/'
  echo
  echo "## Creates of unique 10 KB pastes through nginx ($CONNS connections, ${DURATION}s)"
  echo
  echo "| path | URL | req/s | p50 ms | p99 ms | errors |"
  echo "|---|---|---:|---:|---:|---:|"
  row "nginx -> $PROCESSES processes (PostgreSQL + s3rver + Redis)" "POST /api/v1/pastes" bench/work/raw/stack-create-balancer.txt
  [ -n "$embedded_create" ] && echo "$embedded_create"
  echo
  echo "Creates cannot go through the edge faster than through nginx: Varnish passes POSTs."
} >bench/results/stack.md
cat bench/results/stack.md
