#!/usr/bin/env bash
# Quick interleaved create runs, quiet only: for ROUNDS rounds, each binary in turn on a fresh
# server and an empty data dir, 1 s of warm-up, then wrk -t2 -c64 creates for DURATION seconds.
# One line per run: 201s per second, wrk's p99, the server's CPU per create (user + system, every
# thread), its write(2)-class calls per create (/proc/PID/io, syscw: the socket's and the files')
# and the data dir's size. For a first look at a change in a few minutes; the figures for
# the record come from bench/run_create_bench.sh (the disk's capacity, medians, a co-tenant).
#
#   bench/quick_create_pairs.sh 3 before=/tmp/sluice-old after=build/release/sluice
#   CORPUS=/tmp/corpus.txt BODY_BYTES=10240 bench/quick_create_pairs.sh 3 a=... b=...
#
# CORPUS and BODY_BYTES pass to bench/wrk/create.lua. DURATION=10.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
require_tools wrk curl
[ $# -ge 2 ] || { echo "usage: $0 ROUNDS LABEL=BINARY..." >&2; exit 2; }
rounds=$1
shift
export BODY_BYTES=${BODY_BYTES:-10240}
mkdir -p bench/work
work=$(mktemp -d "$(pwd)/bench/work/pairs.XXXXXX")
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill "$pid"; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
for r in $(seq "$rounds"); do
  for pair in "$@"; do
    label=${pair%%=*}
    bin=${pair#*=}
    start_lifted_sluice "$bin" "$work/data" "$work/log"
    pid=$sluice_pid
    wrk -t1 -c4 -d1s -s bench/wrk/create.lua "$sluice_url" >/dev/null 2>&1
    sync
    ticks_before=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    writes_before=$(awk '$1 == "syscw:" {print $2}' "/proc/$pid/io")
    wrk -t2 -c64 -d"${DURATION:-10}s" --latency -s bench/wrk/create.lua "$sluice_url" >"$work/out" 2>&1
    ticks_after=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    writes_after=$(awk '$1 == "syscw:" {print $2}' "/proc/$pid/io")
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=""
    awk -v r="$r" -v label="$label" -v t=$((ticks_after - ticks_before)) -v hz="$(getconf CLK_TCK)" \
      -v kb="$(du -sk "$work/data" | cut -f1)" -v w=$((writes_after - writes_before)) \
      -v d="$(wrk_seconds "$work/out")" '
      $1 == "99%" {p99 = $2}
      $1 == "status" && $2 == 201 {n = $3}
      END {printf "round %d %s: %.0f creates/s, p99 %s, %.0f us CPU/create, %.1f write calls/create, data %d KiB\n",
           r, label, (d > 0 ? n / d : 0), p99, (n > 0 ? 1e6 * t / hz / n : 0), (n > 0 ? w / n : 0), kb}' "$work/out"
    rm -rf "$work/data"
    sync
  done
done
