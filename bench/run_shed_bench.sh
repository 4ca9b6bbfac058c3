#!/usr/bin/env bash
# Latency and server CPU of a shed answer (503 from the create cap, 429 from the per-client limit)
# at far more than 10x the server's create capacity.
#
# wrk is closed-loop and wrk2 is not packaged in Debian, so instead of an open-loop tool at a fixed
# rate past a large capacity, the server's create capacity is made tiny and the offered load is
# 100x or more of it:
#   a) 503 from the create cap: --create-slots 4 and a 2 s injected latency on every body write
#      (blob.put:latency=2s; put-timeout and create-budget raised so those 4 finish as 201s), every
#      other create limit lifted: goodput 2 creates/s, everything else is shed with 503 create_slots;
#   b) 429 from the per-client create limit at its defaults (1/s, burst 10), one client (127.0.0.1).
# Each case runs three measurements against a fresh server:
#   1. bench/shed_probe.py alone: open loop, PROBE_RATE requests/s on new connections, PROBE_COUNT
#      requests; per-request latency of the shed answers (p50/p90/p99/p99.9/max) and server CPU;
#   2. wrk -c64 with bench/wrk/create.lua (10 KB POSTs, statuses counted) for DURATION seconds:
#      shed answers per second at saturation, wrk's latency distribution (all answers; see below)
#      and server CPU per answer;
#   3. the probe again at LOADED_RATE while the same wrk run saturates the machine: shed latency
#      when the two cores are busy.
# A refused create is answered from the headers with `Connection: close`, without reading the
# body, so every shed request opens a new connection: connection setup is part of each figure
# (the probe's "conn" latency includes connect(); wrk starts its clock after connect).
#
# Writes bench/results/shed.md (overwritten) and raw outputs to bench/work/raw-shed/.
# Environment:
#   DURATION=15      seconds per wrk run          SLUICE_BIN=...  use this binary, skip the build
#   PROBE_RATE=200   probe requests/s (alone)     PROBE_COUNT=2000
#   LOADED_RATE=100  probe requests/s under wrk   WRK_THREADS=2   WRK_CONNS=64    JOBS=2
#   KEEP_WORK=1      keep bench/work/shed.* afterwards
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

DURATION=${DURATION:-15}
PROBE_RATE=${PROBE_RATE:-200}
PROBE_COUNT=${PROBE_COUNT:-2000}
LOADED_RATE=${LOADED_RATE:-100}
WRK_THREADS=${WRK_THREADS:-2}
WRK_CONNS=${WRK_CONNS:-64}
JOBS=${JOBS:-2}
BODY_BYTES=10240
if [ "$DURATION" -lt 6 ]; then echo "DURATION must be at least 6" >&2; exit 2; fi
source bench/lib.sh
require_tools wrk curl python3

bin=$(sluice_binary)

mkdir -p bench/work
work=$(mktemp -d "$repo/bench/work/shed.XXXXXX")
raw=$work/raw
mkdir -p "$raw"
sluice_pid=""
wrk_pid=""
cleanup() {
  local rc=$?
  set +e
  if [ -n "$wrk_pid" ] && kill -0 "$wrk_pid" 2>/dev/null; then kill -TERM "$wrk_pid"; wait "$wrk_pid" 2>/dev/null; fi
  if [ -n "$sluice_pid" ] && kill -0 "$sluice_pid" 2>/dev/null; then
    kill -TERM "$sluice_pid"; wait "$sluice_pid" 2>/dev/null
  fi
  if [ "$rc" -ne 0 ]; then
    echo "shed benchmark failed (exit $rc); last log lines:" >&2
    tail -n 20 "$work"/sluice-*.log >&2 2>/dev/null
  fi
  if [ "${KEEP_WORK:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

hz=$(getconf CLK_TCK)
# Every create limit lifted, so that only the one under test refuses.
lifted=(--ip-create-rate 1000000 --ip-create-burst 1000000
        --ip-create-bytes-rate 1e12 --ip-create-bytes-burst 1e12
        --global-create-rate 1000000 --global-create-burst 1000000
        --global-create-bytes-rate 1e12 --global-create-bytes-burst 1e12
        --create-slot-bytes 1073741824)
case_a=(--fault-injection true --faults "blob.put:latency=2s" --put-timeout 5s --create-budget 10s
        "${lifted[@]}" --create-slots 4)
case_b=()  # the per-client create limit at its defaults: --ip-create-rate 1 --ip-create-burst 10

start_sluice() {  # start_sluice NAME [flags...]: sets sluice_pid, sluice_url, sluice_log
  local name=$1
  shift
  rm -rf "$work/data-$name"
  mkdir -p "$work/data-$name"
  sluice_log=$work/sluice-$name.log
  "$bin" serve --listen 127.0.0.1:0 --data-dir "$work/data-$name" "$@" >"$sluice_log" 2>&1 &
  sluice_pid=$!
  sluice_url=""
  for _ in $(seq 100); do
    sluice_url=$(grep -o 'listening on http://127\.0\.0\.1:[0-9]*' "$sluice_log" | sed 's/listening on //' || true)
    [ -n "$sluice_url" ] && break
    kill -0 "$sluice_pid" 2>/dev/null || { echo "sluice exited" >&2; cat "$sluice_log" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$sluice_url" ] || { echo "sluice did not report its address" >&2; exit 1; }
}
stop_sluice() {
  kill -TERM "$sluice_pid"
  wait "$sluice_pid" 2>/dev/null || true
  sluice_pid=""
}
alive() { kill -0 "$sluice_pid" 2>/dev/null || { echo "sluice (pid $sluice_pid) is gone" >&2; tail -n 5 "$sluice_log" >&2; exit 1; }; }
ticks() { awk '{print $14 + $15}' "/proc/$sluice_pid/stat"; }  # utime + stime, in clock ticks
# Responses the server counted on the create route, by status (from /metrics).
answers() { curl -fsS "$sluice_url/metrics" | awk '/^sluice_http_requests_total\{/ && /route="create_(api|form)"/ {s += $NF} END {print s + 0}'; }
metrics() { curl -fsS "$sluice_url/metrics" | grep -E '^sluice_(http_requests_total|admission_rejections_total|http_request_duration_seconds_(bucket|sum|count)\{route="create_api")' >"$1"; }
# cpu_line TICKS_BEFORE TICKS_AFTER ANSWERS -> "cpu_seconds us_per_answer"
cpu_line() { awk -v a="$1" -v b="$2" -v n="$3" -v hz="$hz" 'BEGIN {c = (b - a) / hz; printf "%.2f %.1f", c, (n > 0 ? c / n * 1e6 : 0)}'; }

run_case() {  # run_case NAME EXPECTED_STATUS [flags...]
  local name=$1 expect=$2
  shift 2
  echo "== case $name (expecting $expect) =="
  start_sluice "$name" "$@"
  echo "sluice ${*:-(defaults)}" >"$raw/$name-flags.txt"
  # A few answers first (connections, first-request allocations), not reported.
  python3 bench/shed_probe.py "$sluice_url/api/v1/pastes" 50 50 "$BODY_BYTES" >"$raw/$name-warmup.txt"

  # idle CPU of the server (timers, background workers), to subtract from the probe's figure
  local t0 t1 n0 n1 e0 e1
  t0=$(ticks); sleep 5; t1=$(ticks)
  echo "idle_ticks_per_s $(awk -v a="$t0" -v b="$t1" 'BEGIN {print (b - a) / 5}')" >"$raw/$name-idle.txt"

  # 1. the probe alone
  metrics "$raw/$name-metrics-before.txt"
  n0=$(answers); t0=$(ticks); e0=$(date +%s.%N)
  python3 bench/shed_probe.py "$sluice_url/api/v1/pastes" "$PROBE_RATE" "$PROBE_COUNT" "$BODY_BYTES" \
    >"$raw/$name-probe.txt"
  t1=$(ticks); e1=$(date +%s.%N); n1=$(answers)
  alive
  echo "answers $((n1 - n0))" >>"$raw/$name-probe.txt"
  echo "elapsed $(awk -v a="$e0" -v b="$e1" 'BEGIN {printf "%.2f", b - a}')" >>"$raw/$name-probe.txt"
  echo "cpu_minus_idle $(awk -v a="$t0" -v b="$t1" -v n="$((n1 - n0))" -v hz="$hz" -v e0="$e0" -v e1="$e1" \
    -v idle="$(awk '{print $2}' "$raw/$name-idle.txt")" \
    'BEGIN {c = (b - a - idle * (e1 - e0)) / hz; printf "%.2f %.1f", c, (n > 0 ? c / n * 1e6 : 0)}')" >>"$raw/$name-probe.txt"
  echo "cpu $(cpu_line "$t0" "$t1" "$((n1 - n0))")" >>"$raw/$name-probe.txt"
  grep -E '^(status|reason|error|lat (shed|all)|cpu)' "$raw/$name-probe.txt" | sed 's/^/  probe: /'

  # 2. wrk at saturation, with 3. the probe at LOADED_RATE inside it
  sleep 2  # let case a's admitted slow creates finish
  n0=$(answers); t0=$(ticks)
  local cmd=(wrk -t"$WRK_THREADS" -c"$WRK_CONNS" -d"${DURATION}s" --timeout 10s --latency -s bench/wrk/shed.lua "$sluice_url")
  echo "\$ ${cmd[*]}" >"$raw/$name-wrk.txt"
  "${cmd[@]}" >>"$raw/$name-wrk.txt" 2>&1 &
  wrk_pid=$!
  sleep 2
  local loaded_count=$(( LOADED_RATE * (DURATION - 4) ))
  python3 bench/shed_probe.py "$sluice_url/api/v1/pastes" "$LOADED_RATE" "$loaded_count" "$BODY_BYTES" \
    >"$raw/$name-probe-under-wrk.txt"
  wait "$wrk_pid"
  wrk_pid=""
  t1=$(ticks); n1=$(answers)
  alive
  metrics "$raw/$name-metrics-after.txt"
  echo "answers_server $((n1 - n0))" >>"$raw/$name-wrk.txt"
  echo "cpu $(cpu_line "$t0" "$t1" "$((n1 - n0))")" >>"$raw/$name-wrk.txt"
  grep -E '^(status|Requests/sec|cpu|.*Socket errors)' "$raw/$name-wrk.txt" | sed 's/^/  wrk: /'
  grep -E '^(status|reason|error|lat shed)' "$raw/$name-probe-under-wrk.txt" | sed 's/^/  probe under wrk: /'
  stop_sluice
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
kernel_mark=$(kernel_log_mark)
run_case create-cap 503 "${case_a[@]}"
load_mid=$(cut -d' ' -f1-3 /proc/loadavg)
run_case per-client 429 "${case_b[@]}"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- report ---------------------------------------------------------------------------------------
pv() {  # pv FILE GROUP KIND FIELD: a probe latency field (n p50 p90 p99 p999 max -> 1..6)
  awk -v g="$2" -v k="$3" -v f="$4" '$1 == "lat" && $2 == g && $3 == k {print $(3 + f)}' "$1"
}
kv() { awk -v k="$2" '$1 == k {print $2}' "$1"; }
statuses() { grep '^status ' "$1" | awk '{printf "%s%s x %s", (NR > 1 ? ", " : ""), $2, $3}'; }
reasons() { grep '^reason ' "$1" | awk '{printf "%s%s %s x %s", (NR > 1 ? ", " : ""), $2, $3, $4}'; }
errs() { awk '$1 == "error" {printf "%s%s x %s", (n++ ? ", " : ""), $2, $3} END {if (!n) printf "none"}' "$1"; }
# server_hist BEFORE AFTER: the create route's answers in the window and the share within 1 ms / 10 ms
server_hist() {
  awk '/route="create_api"/ && /_bucket/ && (/le="0.001"/ || /le="0.01"/ || /le="\+Inf"/) {
         match($0, /le="[^"]*"/); k = substr($0, RSTART + 4, RLENGTH - 5)
         if (FILENAME == ARGV[1]) b[k] = $NF; else a[k] = $NF }
       END { n = a["+Inf"] - b["+Inf"]
             printf "%d answers, %.3f%% within 1 ms, %.3f%% within 10 ms of header read to response written",
                    n, 100 * (a["0.001"] - b["0.001"]) / n, 100 * (a["0.01"] - b["0.01"]) / n }' "$1" "$2"
}
wl() { awk -v p="$2" '$1 == "latency_pct" && $2 == p {print $3}' "$1"; }
wrk_rps() { awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$1"; }
wrk_sock() { awk '/Socket errors:/ {print $3, $4, $5, $6, $7, $8, $9, $10}' "$1"; }
probe_row() {  # probe_row FILE LABEL GROUP
  local f=$1
  echo "| $2 | $(kv "$f" offered_rate)/s | $(pv "$f" "$3" sched 1) | $(pv "$f" "$3" sched 2) | $(pv "$f" "$3" sched 3) | $(pv "$f" "$3" sched 4) | $(pv "$f" "$3" sched 5) | $(pv "$f" "$3" sched 6) | $(pv "$f" "$3" conn 2) | $(pv "$f" "$3" conn 4) |"
}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo none)
if [ -n "$(git status --porcelain --untracked-files=no -- src include CMakeLists.txt 2>/dev/null)" ]; then
  commit="$commit (with uncommitted changes to src/include)"
fi
out=bench/results/shed.md
{
  echo "# sluice shed-latency benchmark"
  echo
  echo "| | |"
  echo "|---|---|"
  echo "| date | $(date -u +%Y-%m-%dT%H:%M:%SZ) |"
  echo "| cpu | $(lscpu | sed -n 's/^Model name:[[:space:]]*//p') |"
  echo "| nproc | $(nproc) |"
  echo "| memory | $(free -h | awk '/^Mem:/ {print $2}') |"
  echo "| kernel | $(uname -sr) |"
  echo "| load average before / between cases / after | $load_before / $load_mid / $load_after |"
  echo "| host events (kernel log) | $(host_events_since "$kernel_mark") |"
  echo "| git commit | $commit |"
  echo "| sluice | $("$bin" --version 2>&1 | head -1), event-loop threads: default (one per core) |"
  echo "| wrk | $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}'), -t$WRK_THREADS -c$WRK_CONNS, on the same machine |"
  echo "| probe | bench/shed_probe.py, $(python3 --version), open loop, one new connection per request |"
  echo "| command | \`DURATION=$DURATION PROBE_RATE=$PROBE_RATE PROBE_COUNT=$PROBE_COUNT LOADED_RATE=$LOADED_RATE bench/run_shed_bench.sh\` |"
  echo
  echo "Every request is a POST /api/v1/pastes of a $BODY_BYTES-byte UTF-8 body. Client and server share"
  echo "the same $(nproc) cores."
  echo
  echo "**Overload.** wrk is closed-loop and Debian has no wrk2, so the server's create capacity is made tiny"
  echo "and the offered load is far past it: (a) \`--create-slots 4\` with a 2 s injected latency on every"
  echo "body write gives a goodput of 2 creates/s; (b) the per-client limit at its defaults (1 create/s,"
  echo "burst 10) gives one client 1 create/s. The probe offers $PROBE_RATE/s (alone) and $LOADED_RATE/s (under"
  echo "wrk), i.e. 50x to 200x the capacity; wrk offers whatever the machine can push (thousands/s)."
  echo
  echo "**Connections.** A refused create is answered from the headers with \`Connection: close\` and"
  echo "the body is never read, so every shed request opens a new connection. The probe's *sched*"
  echo "latency runs from the request's due time (open loop) to the last byte of the answer, and its"
  echo "*conn* latency from the start of connect() to the last byte: both include connection setup."
  echo "wrk starts its clock after connect."
  echo
  echo "Server flags:"
  echo
  echo "- (a) create cap: \`sluice serve --listen 127.0.0.1:0 --data-dir DIR ${case_a[*]}\`"
  echo "- (b) per-client: \`sluice serve --listen 127.0.0.1:0 --data-dir DIR\` (defaults: --ip-create-rate 1 --ip-create-burst 10)"
  echo
  echo "## Per-request latency of the shed answers (open-loop probe, ms)"
  echo
  echo "| case, condition | offered | shed answers | p50 | p90 | p99 | p99.9 | max | conn p50 | conn p99 |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  probe_row "$raw/create-cap-probe.txt" "(a) 503 create cap, probe alone" shed
  probe_row "$raw/create-cap-probe-under-wrk.txt" "(a) 503 create cap, under wrk -c$WRK_CONNS" shed
  probe_row "$raw/per-client-probe.txt" "(b) 429 per-client, probe alone" shed
  probe_row "$raw/per-client-probe-under-wrk.txt" "(b) 429 per-client, under wrk -c$WRK_CONNS" shed
  echo
  echo "Shed answers counted in each row (the rest are the few admitted creates, 201):"
  echo
  for f in create-cap-probe create-cap-probe-under-wrk per-client-probe per-client-probe-under-wrk; do
    echo "- $f: $(kv "$raw/$f.txt" requests) requests at $(kv "$raw/$f.txt" achieved_rate)/s achieved;" \
      "statuses $(statuses "$raw/$f.txt"); reasons $(reasons "$raw/$f.txt");" \
      "client errors: $(errs "$raw/$f.txt"); started >1 ms late: $(kv "$raw/$f.txt" late_starts)"
  done
  echo
  echo "## Shed answers at saturation (wrk -t$WRK_THREADS -c$WRK_CONNS, ${DURATION}s, all answers, ms)"
  echo
  echo "| case | answers/s | p50 | p90 | p99 | p99.9 | p99.99 | max | mean | answers/s x mean (<= $WRK_CONNS if real) | statuses | socket errors |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
  for c in create-cap per-client; do
    f=$raw/$c-wrk.txt
    echo "| $c | $(wrk_rps "$f") | $(wl "$f" 50) | $(wl "$f" 90) | $(wl "$f" 99) | $(wl "$f" 99.9) | $(wl "$f" 99.99) | $(kv "$f" latency_max) | $(kv "$f" latency_mean) | $(awk -v r="$(wrk_rps "$f")" -v m="$(kv "$f" latency_mean)" 'BEGIN {printf "%.0f", r * m / 1000}') | $(statuses "$f") | $(wrk_sock "$f") |"
  done
  echo
  echo "Server side, from before the probe alone to after wrk (/metrics histogram of the create route, every status):"
  echo
  for c in create-cap per-client; do
    echo "- $c: $(server_hist "$raw/$c-metrics-before.txt" "$raw/$c-metrics-after.txt")"
  done
  echo
  echo "wrk times every answer together and starts its clock after connect. The admitted creates (4"
  echo "per 2 s in (a), 1 per s in (b)) are under 0.1% of the answers, so they cannot move p50..p99.9."
  echo "Little's law checks wrk's figures: with $WRK_CONNS connections, answers/s x mean latency"
  echo "cannot exceed $WRK_CONNS. Where it does, wrk's latency figures of that row are not real time"
  echo "(a wrk accounting artifact: its histogram holds fewer, older-stamped samples than answers) and"
  echo "the probe and the server's histogram are the figures to use. The answers/s include the probe's"
  echo "$LOADED_RATE/s that ran inside the same window."
  echo
  echo "## Server CPU per shed answer (utime + stime of the sluice process / create answers it counted)"
  echo
  echo "| case | run | answers | elapsed s | server CPU s | CPU us per answer |"
  echo "|---|---|---:|---:|---:|---:|"
  for c in create-cap per-client; do
    f=$raw/$c-probe.txt
    read -r cs cu <<<"$(awk '$1 == "cpu_minus_idle" {print $2, $3}' "$f")"
    echo "| $c | probe alone at $PROBE_RATE/s, idle CPU subtracted | $(kv "$f" answers) | $(kv "$f" elapsed) | $cs | $cu |"
    f=$raw/$c-wrk.txt
    read -r cs cu <<<"$(awk '$1 == "cpu" {print $2, $3}' "$f")"
    echo "| $c | wrk + probe (saturated) | $(kv "$f" answers_server) | $DURATION | $cs | $cu |"
  done
  echo
  echo "Idle CPU of the server (before each probe, 5 s): $(kv "$raw/create-cap-idle.txt" idle_ticks_per_s)"
  echo "and $(kv "$raw/per-client-idle.txt" idle_ticks_per_s) ticks/s (create-cap, per-client), $hz ticks per CPU second."
  echo "/proc accounting is in ${hz}ths of a second, so the probe-alone rows (a fraction of a CPU"
  echo "second) are coarse; the saturated rows are the better per-answer figure, and include the"
  echo "kernel's connection setup and teardown charged to the server. The rejection counters and the"
  echo "create route's server-side latency histogram are in the raw metrics snapshots."
  echo
  echo "Raw outputs: bench/work/raw-shed/."
} >"$out.tmp"
mkdir -p bench/work/raw-shed
rm -f bench/work/raw-shed/*.txt
cp "$raw"/*.txt bench/work/raw-shed/
sed -i "s#$work#bench/work/shed.XXXXXX#g" bench/work/raw-shed/*.txt
mv "$out.tmp" "$out"
echo
cat "$out"
