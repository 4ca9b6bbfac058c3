#!/usr/bin/env bash
# What the JSON create's envelope costs: the create rate of POST /api/v1/pastes with a raw body
# beside the same 10 KB texts wrapped as {"content": ...} (application/json), one server, runs
# interleaved (raw, json, raw, json ...) in one sitting. Admission limits are lifted: this measures
# decoding and the store path, not the limiter.
#
# Writes bench/results/clients.md (overwritten). Environment:
#   DURATION=10   seconds per wrk run    ROUNDS=2   rounds    CONNS=16   WRK_THREADS=2
#   SLUICE_BIN=...   use this binary, skip build
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-2}
CONNS=${CONNS:-16}
WRK_THREADS=${WRK_THREADS:-2}
source bench/lib.sh
require_tools wrk python3

bin=$(sluice_binary)
mkdir -p bench/work bench/results
work=$(mktemp -d "$repo/bench/work/clients.XXXXXX")
server_pid=""
cleanup() {
  local rc=$?
  set +e
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"
    wait "$server_pid" 2>/dev/null
  fi
  [ "$rc" -ne 0 ] && tail -n 20 "$work/server.log" >&2
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$bin" serve --listen 127.0.0.1:0 --data-dir "$work/data" "${lifted_limits[@]}" >"$work/server.log" 2>&1 &
server_pid=$!
url=$(wait_for_sluice_url "$work/server.log" "$server_pid")

declare -A sum
sum[raw]=0 sum[json]=0
rows=""
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq "$ROUNDS"); do
  for format in raw json; do
    out="$work/$format-$round.txt"
    FORMAT=$format wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DURATION}s" --latency \
      -s bench/wrk/create.lua "$url" >"$out" 2>&1
    rps=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$out")
    p99=$(awk '$1 == "99%" {print $2}' "$out")
    bad=$(awk '/^non_201 / {print $2}' "$out")
    codes=$(grep '^status ' "$out" | awk '{printf "%s%s x %s", (NR > 1 ? ", " : ""), $2, $3}')
    echo "round $round $format: $rps creates/s, p99 $p99, non-201 $bad ($codes)"
    rows+="| $round | $format | $rps | $p99 | $codes |"$'\n'
    sum[$format]=$((sum[$format] + rps))
  done
done
raw_avg=$((sum[raw] / ROUNDS))
json_avg=$((sum[json] / ROUNDS))
{
  echo "# The JSON create beside the raw create"
  echo
  echo "\`bench/run_clients_bench.sh\` on $(date -u +%Y-%m-%d), $(nproc) cores (load before: $load_before;"
  echo "the machine is shared, so compare the two columns of one run, not runs of different days)."
  echo "One sluice process, embedded SQLite and files, admission limits lifted; unique 10 KB UTF-8"
  echo "texts with newlines and quotes, $CONNS connections, ${DURATION}s per run, raw and JSON runs"
  echo "interleaved."
  echo
  echo "| round | route | creates/s | p99 | statuses |"
  echo "|---|---|---|---|---|"
  printf "%s" "$rows"
  echo
  echo "Mean: raw $raw_avg creates/s, JSON $json_avg creates/s."
} >bench/results/clients.md
echo "wrote bench/results/clients.md: raw $raw_avg, json $json_avg creates/s"
