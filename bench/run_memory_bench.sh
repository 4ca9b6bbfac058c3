#!/usr/bin/env bash
# sluice's memory and size: resident memory at rest and while PASTES small pastes are created
# through the API at full speed on the embedded store (SQLite and files under a fresh data dir),
# and the binary's size as built and stripped. Writes bench/results/memory.md (or OUT).
#
# Environment:
#   SLUICE_BIN=...   the binary to measure (default: build/dev/sluice, the dev preset's -O2 -g1)
#   PASTES=1000000   pastes to create           BODY_BYTES=128   bytes per paste
#   CHUNK=30         seconds per wrk run, RSS read from /proc after each
#   MAX_SECONDS=1200 stop creating after this long even if PASTES is not reached
#   CONNS=64         wrk connections            WRK_THREADS=2
#   OUT=bench/results/memory.md
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
source bench/lib.sh
require_tools wrk curl python3 strip

bin=$(realpath "${SLUICE_BIN:-build/dev/sluice}")
PASTES=${PASTES:-1000000}
BODY_BYTES=${BODY_BYTES:-128}
CHUNK=${CHUNK:-30}
MAX_SECONDS=${MAX_SECONDS:-1200}
CONNS=${CONNS:-64}
WRK_THREADS=${WRK_THREADS:-2}
OUT=${OUT:-bench/results/memory.md}

mkdir -p bench/work
work=$(mktemp -d "$repo/bench/work/mem.XXXXXX")
sluice_pid=""
cleanup() {
  local rc=$?
  set +e
  if [ -n "$sluice_pid" ] && kill -0 "$sluice_pid" 2>/dev/null; then
    kill -TERM "$sluice_pid"; wait "$sluice_pid" 2>/dev/null
  fi
  [ "$rc" -ne 0 ] && tail -n 20 "$work/sluice.log" >&2
  if [ "${KEEP_WORK:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# lifted_limits (bench/lib.sh): this measures memory, not the limiter.
"$bin" serve --listen 127.0.0.1:0 --data-dir "$work/data" "${lifted_limits[@]}" >"$work/sluice.log" 2>&1 &
sluice_pid=$!
url=$(wait_for_sluice_url "$work/sluice.log" "$sluice_pid")

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$sluice_pid/status"; }
hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$sluice_pid/status"; }
created() { curl -fsS "$url/metrics" | awk '/^sluice_http_requests_total\{route="create_api",status="201"\}/ {print $2 + 0}'; }

sleep 2
rss_start=$(rss_kb)
# At rest after a little work: one paste created and read, the view rendered once.
id=$(curl -fsS --data-binary 'hello' "$url/api/v1/pastes" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
curl -fsS -o /dev/null "$url/raw/$id"
curl -fsS -o /dev/null -H 'Accept: text/html' "$url/$id"
sleep 2
rss_rest=$(rss_kb)

rows=()
started=$(date +%s)
total=0
while :; do
  BODY_BYTES=$BODY_BYTES wrk -t"$WRK_THREADS" -c"$CONNS" -d"${CHUNK}s" -s bench/wrk/create.lua "$url" >"$work/wrk.txt" 2>&1
  require_created "$work/wrk.txt"
  kill -0 "$sluice_pid" || { echo "sluice died" >&2; exit 1; }
  total=$(created)
  elapsed=$(( $(date +%s) - started ))
  rows+=("| $elapsed | $total | $(( $(rss_kb) / 1024 )) | $(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$work/wrk.txt") |")
  echo "${rows[-1]}"
  [ "$total" -ge "$PASTES" ] && break
  [ "$elapsed" -ge "$MAX_SECONDS" ] && break
done
sleep 5
rss_after=$(rss_kb)
hwm=$(hwm_kb)
data_usage=$(du -sh "$work/data" | cut -f1)

size_built=$(stat -c %s "$bin")
cp "$bin" "$work/sluice.stripped"
strip --strip-all "$work/sluice.stripped"
size_stripped=$(stat -c %s "$work/sluice.stripped")
mb() { awk -v b="$1" 'BEGIN {printf "%.1f MB", b / 1e6}'; }

{
  echo "# sluice's memory and size"
  echo
  echo "| | |"
  echo "|---|---|"
  echo "| date | $(date -u +%Y-%m-%dT%H:%M:%SZ) |"
  echo "| git commit | $(git rev-parse --short HEAD 2>/dev/null || echo none) |"
  echo "| binary | \`${bin#"$repo"/}\` ($("$bin" --version 2>&1 | head -1)) |"
  echo "| nproc, memory | $(nproc), $(free -h | awk '/^Mem:/ {print $2}') |"
  echo "| load average at the end | $(cut -d' ' -f1-3 /proc/loadavg) |"
  echo "| command | \`SLUICE_BIN=${bin#"$repo"/} PASTES=$PASTES BODY_BYTES=$BODY_BYTES CHUNK=$CHUNK MAX_SECONDS=$MAX_SECONDS OUT=$OUT bench/run_memory_bench.sh\` |"
  echo
  echo "## Resident memory (VmRSS from /proc/PID/status)"
  echo
  echo "| when | RSS |"
  echo "|---|---:|"
  echo "| just started | $(( rss_start / 1024 )) MiB |"
  echo "| at rest (one paste created, read and viewed) | $(( rss_rest / 1024 )) MiB |"
  echo "| after $total pastes of $BODY_BYTES bytes (5 s after the last) | $(( rss_after / 1024 )) MiB |"
  echo "| peak (VmHWM) | $(( hwm / 1024 )) MiB |"
  echo
  echo "The paste cache (64 MiB by default, a charge of 256 bytes per entry on top of the body) and the"
  echo "render cache (32 MiB) bound what the process keeps of the pastes; SQLite's page cache and the"
  echo "allocator's free lists make up the rest. Data dir afterwards: $data_usage."
  echo
  echo "Creates with wrk -t$WRK_THREADS -c$CONNS, ${CHUNK}s at a time (201 only once durable):"
  echo
  echo "| seconds | pastes created | RSS MiB | creates/s in the chunk |"
  echo "|---:|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "## Size of the binary"
  echo
  echo "| build | bytes | |"
  echo "|---|---:|---:|"
  echo "| as built (\`${bin#"$repo"/}\`, with line tables) | $size_built | $(mb "$size_built") |"
  echo "| stripped (\`strip --strip-all\`) | $size_stripped | $(mb "$size_stripped") |"
} >"$OUT"
echo "written: $OUT"
