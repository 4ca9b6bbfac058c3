#!/usr/bin/env bash
# Where sluice's CPU goes on its two hot paths, for bench/results/profile/: a perf profile of the
# hot read (GET /raw/{id} of one cached 10 KB paste), of its view from the render cache, and of durable 10 KB creates, each taken during
# a wrk run against a release binary with the admission limits lifted (the same server as
# bench/run_embedded_bench.sh), plus the server's CPU per answer from perf stat.
#
# Writes PREFIX-read.txt and PREFIX-create.txt (perf report, flat and by caller) and prints a
# summary line per path. Needs perf (Debian's linux-perf) and permission to profile (root, or
# kernel.perf_event_paranoid <= 1).
# Environment:
#   SLUICE_BIN=...   the binary (default: a fresh release build)
#   PREFIX=bench/results/profile/after   where the reports go
#   DURATION=12      seconds of wrk per path; perf records the middle RECORD seconds
#   RECORD=6         CONNS=64   WRK_THREADS=2
#   PATHS="read view create"   which paths to profile
#   CORPUS=FILE      the creates' text (bench/wrk/create.lua); default: this repository's sources,
#                    as bench/run_create_bench.sh's BODY=code, so the two measure the same creates
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
source bench/lib.sh
require_tools wrk curl python3 perf

DURATION=${DURATION:-12}
RECORD=${RECORD:-6}
CONNS=${CONNS:-64}
WRK_THREADS=${WRK_THREADS:-2}
PREFIX=${PREFIX:-bench/results/profile/after}
PATHS=${PATHS:-read view create}
bin=$(sluice_binary)

mkdir -p bench/work "$(dirname "$PREFIX")"
work=$(mktemp -d "$repo/bench/work/profile.XXXXXX")
corpus_note=${CORPUS:-}
if [ -z "$corpus_note" ]; then
  write_code_corpus "$work/corpus.txt"
  export CORPUS=$work/corpus.txt
  corpus_note="this repository's sources"
fi
sluice_pid=""
cleanup() {
  set +e
  [ -n "$sluice_pid" ] && kill -TERM "$sluice_pid" 2>/dev/null && wait "$sluice_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

"$bin" serve --listen 127.0.0.1:0 --data-dir "$work/data" "${lifted_limits[@]}" >"$work/sluice.log" 2>&1 &
sluice_pid=$!
url=$(wait_for_sluice_url "$work/sluice.log" "$sluice_pid")

python3 -c 'import sys; sys.stdout.buffer.write(("hot read body, naïve café ✓\n" * 400).encode()[:10240])' \
  >"$work/body.txt"
id=$(curl -fsS -X POST -H 'Content-Type: text/plain; charset=utf-8' --data-binary @"$work/body.txt" \
  "$url/api/v1/pastes" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
curl -fsS -o /dev/null "$url/raw/$id"

# profile NAME [wrk args...]: wrk for DURATION s; perf records RECORD s from the middle of it.
profile() {
  local name=$1
  shift
  wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DURATION}s" --latency "$@" >"$work/wrk-$name.txt" 2>&1 &
  local wrk_pid=$!
  sleep $(((DURATION - RECORD) / 2))
  perf stat -e task-clock,context-switches -p "$sluice_pid" -o "$work/stat-$name.txt" -- sleep 2
  perf record -q -F 999 -g -p "$sluice_pid" -o "$work/perf-$name.data" -- sleep "$RECORD" 2>/dev/null
  wait "$wrk_pid"
  local out=$PREFIX-$name.txt rps cpus
  rps=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$work/wrk-$name.txt")
  cpus=$(awk '/CPUs utilized/ {print $5}' "$work/stat-$name.txt")
  {
    echo "# $name: $(git rev-parse --short HEAD), $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# wrk -t$WRK_THREADS -c$CONNS -d${DURATION}s $*: $rps req/s; sluice used $cpus CPUs; creates' text: $corpus_note"
    echo "# server CPU per answer: $(awk -v c="$cpus" -v r="$rps" 'BEGIN {printf "%.1f us", c * 1e6 / r}')"
    echo
    cat "$work/wrk-$name.txt" "$work/stat-$name.txt"
    echo
    echo "## flat (self time), symbols over 0.5%"
    perf report -i "$work/perf-$name.data" --no-children --percent-limit 0.5 --stdio -g none 2>/dev/null |
      grep -E '^ +[0-9]' | head -60 || true  # head stops the pipe early: not a failure
    echo
    echo "## with children, over 3%"
    perf report -i "$work/perf-$name.data" --children --percent-limit 3 --stdio -g none 2>/dev/null |
      grep -E '^ +[0-9]' | head -50 || true
  } >"$out"
  echo "$name: $rps req/s, sluice $cpus CPUs, $(sed -n 3p "$out" | cut -d: -f2) per answer -> $out"
}

# The view from the render cache (GET /{id} as a browser asks) next to the raw read: the same paste,
# one page more of markup, and the handler's content negotiation and render-cache lookup.
curl -fsS -o /dev/null -H 'Accept: text/html' "$url/$id"
for path in $PATHS; do
  case $path in
    read) profile read "$url/raw/$id" ;;
    view) profile view -H 'Accept: text/html' "$url/$id" ;;
    create) profile create -s bench/wrk/create.lua "$url" ;;
    *) echo "unknown path $path (read, view, create)" >&2 && exit 2 ;;
  esac
done
