#!/usr/bin/env bash
# Reproducible wrk benchmark of sluice's embedded store (what `make bench` runs).
#
#   1. hot read of one 10 KB paste (GET /raw/{id}, served from the in-process cache) beside nginx
#      serving the same 10,240 bytes as a static file, and the highlighted view of the same paste
#      (GET /{id} as a browser asks for it, from the render cache), interleaved nginx/raw/view for
#      ROUNDS rounds at 64 connections; the reported row of each is its median-req/s round;
#   2. durable creates of unique 10 KB UTF-8 pastes (POST /api/v1/pastes) at 64 and 16 connections;
#   3. an fsync probe of the data dir's disk, for context beside the create figure.
#
# Writes bench/results/embedded.md (overwritten) and the raw wrk outputs to bench/work/raw/
# (git keeps the report, which holds every round, not the raw files).
# Environment:
#   CREATES=1       0: the reads only (no fsync probe, no creates), for a quick read comparison
#   OUT=bench/results/embedded.md  the report      RAW_DIR=bench/work/raw  the raw outputs
#   DURATION=15     seconds per wrk run           ROUNDS=3       read rounds per server (>= 2)
#   SLUICE_BIN=...  use this binary, skip build   JOBS=2         build parallelism
#   WRK_THREADS=2   wrk threads                   READ_CONNS=64  connections of the read runs
#   SLUICE_THREADS  passed as --threads if set    KEEP_WORK=1    keep bench/work/run.* afterwards
#   PROBE_SECONDS=3 seconds per fsync-probe test
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

DURATION=${DURATION:-15}
ROUNDS=${ROUNDS:-3}
JOBS=${JOBS:-2}
WRK_THREADS=${WRK_THREADS:-2}
READ_CONNS=${READ_CONNS:-64}
PROBE_SECONDS=${PROBE_SECONDS:-3}
CREATES=${CREATES:-1}
OUT=${OUT:-bench/results/embedded.md}
RAW_DIR=${RAW_DIR:-bench/work/raw}
BODY_BYTES=10240
if [ "$ROUNDS" -lt 2 ]; then echo "ROUNDS must be at least 2" >&2; exit 2; fi
source bench/lib.sh
require_tools wrk nginx curl python3 cmp

# ---- build ----------------------------------------------------------------------------------------
bin=$(sluice_binary)

# ---- work dir and cleanup -------------------------------------------------------------------------
mkdir -p bench/work "$RAW_DIR"
work=$(mktemp -d "$repo/bench/work/run.XXXXXX")
# Raw outputs go to the work dir first and replace $RAW_DIR only when the run completes.
raw=$work/raw
mkdir -p "$raw"
sluice_pid=""
nginx_pid=""
cleanup() {
  local rc=$?
  set +e
  if [ -n "$sluice_pid" ] && kill -0 "$sluice_pid" 2>/dev/null; then
    kill -TERM "$sluice_pid"; wait "$sluice_pid" 2>/dev/null
  fi
  if [ -n "$nginx_pid" ] && kill -0 "$nginx_pid" 2>/dev/null; then
    kill -QUIT "$nginx_pid"; wait "$nginx_pid" 2>/dev/null
  fi
  if [ "$rc" -ne 0 ]; then
    echo "benchmark failed (exit $rc); logs:" >&2
    tail -n 20 "$work/sluice.log" "$work/nginx/logs/error.log" >&2 2>/dev/null
  fi
  if [ "${KEEP_WORK:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

alive() {  # a server that died mid-run makes every later figure meaningless: stop here
  kill -0 "$sluice_pid" 2>/dev/null || { echo "sluice (pid $sluice_pid) is gone; last log lines:" >&2; tail -n 3 "$work/sluice.log" >&2; exit 1; }
  kill -0 "$nginx_pid" 2>/dev/null || { echo "nginx (pid $nginx_pid) is gone" >&2; exit 1; }
}

# ---- the 10 KB body (UTF-8, exactly 10,240 bytes) -------------------------------------------------
mkdir -p "$work/www"
python3 - "$work/www/paste10k.txt" "$BODY_BYTES" <<'PY'
import sys
path, size = sys.argv[1], int(sys.argv[2])
unit = "sluice hot-read body — naïve café, Grüße, 日本語, ✓ 🚀\n".encode()
data = (unit * (size // len(unit) + 1))[:size]
while True:  # cut on a character boundary, pad with ASCII to the exact size
    try:
        data.decode("utf-8"); break
    except UnicodeDecodeError:
        data = data[:-1]
data += b"." * (size - len(data))
open(path, "wb").write(data)
PY
[ "$(stat -c %s "$work/www/paste10k.txt")" -eq "$BODY_BYTES" ]

# ---- sluice ---------------------------------------------------------------------------------------
mkdir -p "$work/data"
# lifted_limits (bench/lib.sh): this measures the store and the HTTP path, not the limiter.
sluice_args=(serve --listen 127.0.0.1:0 --data-dir "$work/data" "${lifted_limits[@]}")
if [ -n "${SLUICE_THREADS:-}" ]; then sluice_args+=(--threads "$SLUICE_THREADS"); fi
"$bin" "${sluice_args[@]}" >"$work/sluice.log" 2>&1 &
sluice_pid=$!
sluice_url=$(wait_for_sluice_url "$work/sluice.log" "$sluice_pid")

# ---- nginx ----------------------------------------------------------------------------------------
start_static_nginx "$work/nginx" "$work/www" paste10k.txt

# ---- the paste, and both URLs return the same bytes -----------------------------------------------
create_json=$(curl -fsS -X POST -H 'Content-Type: text/plain; charset=utf-8' \
  --data-binary @"$work/www/paste10k.txt" "$sluice_url/api/v1/pastes")
paste_id=$(printf '%s' "$create_json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
curl -fsS -o "$work/from_nginx" "$nginx_url/paste10k.txt"
curl -fsS -o "$work/from_sluice" "$sluice_url/raw/$paste_id"
cmp "$work/www/paste10k.txt" "$work/from_nginx"
cmp "$work/www/paste10k.txt" "$work/from_sluice"
echo "verified: $nginx_url/paste10k.txt and $sluice_url/raw/$paste_id both return the same $BODY_BYTES bytes"
curl -fsS -D - -o /dev/null "$nginx_url/paste10k.txt" >"$raw/headers-nginx.txt"
curl -fsS -D - -o /dev/null "$sluice_url/raw/$paste_id" >"$raw/headers-sluice.txt"
# The view as a browser asks for it; its first request renders and fills the render cache.
view_accept='Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8'
curl -fsS -H "$view_accept" -o "$work/view.html" "$sluice_url/$paste_id"
curl -fsS -H "$view_accept" -D - -o /dev/null "$sluice_url/$paste_id" >"$raw/headers-sluice-view.txt"
grep -qi '^X-Sluice-Rung: cached' "$raw/headers-sluice-view.txt" ||
  { echo "the view is not served from the render cache:" >&2; cat "$raw/headers-sluice-view.txt" >&2; exit 1; }
view_bytes=$(stat -c %s "$work/view.html")

# ---- wrk helpers ----------------------------------------------------------------------------------
# parse FILE -> "rps p50_ms p99_ms errors", errors = socket errors + non-2xx/3xx (+ non-201 for creates).
parse() {
  local f=$1 rps p50 p99 err
  rps=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$f")
  p50=$(to_ms "$(awk '$1 == "50%" {print $2}' "$f")")
  p99=$(to_ms "$(awk '$1 == "99%" {print $2}' "$f")")
  err=$(awk '/Socket errors:/ {gsub(/,/, ""); s += $4 + $6 + $8 + $10}
             /Non-2xx or 3xx responses:/ {s += $5} /^non_201 / {s += $2} END {print s + 0}' "$f")
  echo "$rps $p50 $p99 $err"
}
run_wrk() {  # run_wrk OUTFILE CONNS [wrk args...]
  local out=$1 conns=$2
  shift 2
  local cmd=(wrk -t"$WRK_THREADS" -c"$conns" -d"${DURATION}s" --latency "$@")
  echo "\$ ${cmd[*]}" >"$out"
  "${cmd[@]}" >>"$out" 2>&1
  alive
  echo "  $(basename "$out" .txt): $(parse "$out" | awk '{printf "%s req/s, p50 %s ms, p99 %s ms, errors %s", $1, $2, $3, $4}')"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
kernel_mark=$(kernel_log_mark)

# ---- hot reads, interleaved -----------------------------------------------------------------------
echo "warm-up (2 s each, not reported)"
wrk -t"$WRK_THREADS" -c"$READ_CONNS" -d2s "$nginx_url/paste10k.txt" >"$raw/warmup-nginx.txt" 2>&1
wrk -t"$WRK_THREADS" -c"$READ_CONNS" -d2s "$sluice_url/raw/$paste_id" >"$raw/warmup-sluice.txt" 2>&1
wrk -t"$WRK_THREADS" -c"$READ_CONNS" -d2s -H "$view_accept" "$sluice_url/$paste_id" \
  >"$raw/warmup-view.txt" 2>&1
echo "hot read, $ROUNDS rounds of ${DURATION}s at $READ_CONNS connections, nginx, sluice raw and view interleaved"
round_loads=()
for r in $(seq "$ROUNDS"); do
  round_loads+=("$(cut -d' ' -f1 /proc/loadavg)")
  run_wrk "$raw/read-nginx-round$r.txt" "$READ_CONNS" "$nginx_url/paste10k.txt"
  run_wrk "$raw/read-sluice-round$r.txt" "$READ_CONNS" "$sluice_url/raw/$paste_id"
  run_wrk "$raw/read-view-round$r.txt" "$READ_CONNS" -H "$view_accept" "$sluice_url/$paste_id"
done
# median round by req/s (for an even ROUNDS, the lower middle)
median_round() {
  for r in $(seq "$ROUNDS"); do echo "$(parse "$raw/read-$1-round$r.txt" | cut -d' ' -f1) $r"; done |
    sort -n | awk -v n="$ROUNDS" 'NR == int((n + 1) / 2) {print $2}'
}
nginx_round=$(median_round nginx)
sluice_round=$(median_round sluice)
view_round=$(median_round view)
read -r n_rps n_p50 n_p99 n_err <<<"$(parse "$raw/read-nginx-round$nginx_round.txt")"
read -r s_rps s_p50 s_p99 s_err <<<"$(parse "$raw/read-sluice-round$sluice_round.txt")"
read -r v_rps v_p50 v_p99 v_err <<<"$(parse "$raw/read-view-round$view_round.txt")"
ratio=$(awk -v s="$s_rps" -v n="$n_rps" 'BEGIN {printf "%.2f", s / n}')
view_ratio=$(awk -v v="$v_rps" -v s="$s_rps" 'BEGIN {printf "%.2f", v / s}')
# The ratios of each round too: a noisy machine moves whole rounds, and a round's servers ran
# within a minute of each other.
round_ratios() {
  for r in $(seq "$ROUNDS"); do
    awk -v n="$(parse "$raw/read-nginx-round$r.txt" | cut -d' ' -f1)" \
        -v s="$(parse "$raw/read-sluice-round$r.txt" | cut -d' ' -f1)" \
        -v v="$(parse "$raw/read-view-round$r.txt" | cut -d' ' -f1)" 'BEGIN {printf "%.2f %.2f\n", s / n, v / s}'
  done
}
median_of() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
raw_ratio_median=$(round_ratios | cut -d' ' -f1 | median_of)
view_ratio_median=$(round_ratios | cut -d' ' -f2 | median_of)
cache_hits=$(curl -fsS "$sluice_url/metrics" | awk '/^sluice_paste_cache_total\{outcome="hit"\}/ {print $2}')
cache_misses=$(curl -fsS "$sluice_url/metrics" | awk '/^sluice_paste_cache_total\{outcome="miss"\}/ {print $2}')

if [ "$CREATES" = 1 ]; then
  # ---- disk probe (before the creates fill the page cache with dirty bodies) -----------------------
  echo "fsync probe of $work (${PROBE_SECONDS}s per test)"
  python3 bench/fsync_probe.py "$work" "$PROBE_SECONDS" | tee "$raw/fsync-probe.txt"
  probe() { awk -v k="$1" '$1 == k {print $2}' "$raw/fsync-probe.txt"; }

  # ---- creates --------------------------------------------------------------------------------------
  # /metrics snapshots, without the histogram buckets of routes the benchmark does not use.
  metrics() { curl -fsS "$sluice_url/metrics" | grep -Ev '_bucket\{route="(create_form|delete|healthz|index|metrics|other|view)"' >"$1"; }
  metrics "$raw/metrics-before-creates.txt"
  echo "durable creates of ${BODY_BYTES}-byte pastes, ${DURATION}s each"
  # If perf can count syscall tracepoints, count the server's flushes during each create run: two
  # syncfs per body batch and about one fdatasync per SQLite commit give the mean batch sizes.
  perf_ok=0
  if command -v perf >/dev/null && perf stat -x, -e syscalls:sys_enter_syncfs true >/dev/null 2>&1; then perf_ok=1; fi
  for c in 64 16; do
    perf_pid=""
    if [ "$perf_ok" = 1 ]; then
      perf stat -x, -o "$raw/flushes-c$c.txt" -p "$sluice_pid" \
        -e syscalls:sys_enter_syncfs,syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync -- sleep "$DURATION" &
      perf_pid=$!
    fi
    run_wrk "$raw/create-c$c.txt" "$c" -s bench/wrk/create.lua "$sluice_url"
    require_created "$raw/create-c$c.txt"
    if [ -n "$perf_pid" ]; then wait "$perf_pid" || true; fi
    metrics "$raw/metrics-after-create-c$c.txt"
  done
  # batches CONNS -> "syncfs/s fdatasync/s mean-body-batch mean-row-batch" (or "n/a")
  batches() {
    local f="$raw/flushes-c$1.txt" created
    [ -s "$f" ] || { echo "n/a n/a n/a n/a"; return; }
    created=$(awk '$1 == "status" && $2 == 201 {print $3}' "$raw/create-c$1.txt")
    awk -F, -v n="${created:-0}" -v d="$DURATION" '
      $3 ~ /sys_enter_syncfs/ {s = $1} $3 ~ /sys_enter_fdatasync/ {f += $1} $3 ~ /sys_enter_fsync/ {f += $1}
      END { printf "%.0f %.0f %s %s", s / d, f / d, (s > 0 ? sprintf("%.1f", n / (s / 2)) : "n/a"),
            (f > 0 ? sprintf("%.1f", n / f) : "n/a") }' "$f"
  }
  read -r b64_syncfs b64_fsync b64_body b64_row <<<"$(batches 64)"
  read -r b16_syncfs b16_fsync b16_body b16_row <<<"$(batches 16)"
  read -r c64_rps c64_p50 c64_p99 c64_err <<<"$(parse "$raw/create-c64.txt")"
  read -r c16_rps c16_p50 c16_p99 c16_err <<<"$(parse "$raw/create-c16.txt")"
  statuses() { grep '^status ' "$1" | awk '{printf "%s%s x %s", (NR > 1 ? ", " : ""), $2, $3}'; }
  data_usage=$(du -sh "$work/data" | cut -f1)
  blob_count=$(find "$work/data" -type f | wc -l)
fi

# ---- report ---------------------------------------------------------------------------------------
fs_line=$(df -T "$work/data" | awk 'NR == 2 {print $1, $2, "mounted on", $7}')
mount_opts=$(awk -v m="$(df --output=target "$work/data" | tail -1)" '$2 == m {print $4}' /proc/mounts | tail -1)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo none)
if [ -n "$(git status --porcelain --untracked-files=no -- src include CMakeLists.txt 2>/dev/null)" ]; then
  commit="$commit (with uncommitted changes to src/include)"
fi
threads_note="default (one per core)"
[ -n "${SLUICE_THREADS:-}" ] && threads_note=$SLUICE_THREADS
out=$OUT
{
  echo "# sluice embedded-store benchmark"
  echo
  echo "| | |"
  echo "|---|---|"
  echo "| date | $(date -u +%Y-%m-%dT%H:%M:%SZ) |"
  echo "| cpu | $(lscpu | sed -n 's/^Model name:[[:space:]]*//p') |"
  echo "| nproc | $(nproc) |"
  echo "| memory | $(free -h | awk '/^Mem:/ {print $2}') |"
  echo "| kernel | $(uname -sr) |"
  echo "| load average before / after | $load_before / $(cut -d' ' -f1-3 /proc/loadavg) |"
  echo "| host events (kernel log) | $(host_events_since "$kernel_mark") |"
  echo "| data dir filesystem | $fs_line ($mount_opts) |"
  echo "| git commit | $commit |"
  echo "| sluice | $("$bin" --version 2>&1 | head -1), event-loop threads: $threads_note |"
  echo "| nginx | $(nginx -v 2>&1 | sed 's/^nginx version: //'), worker_processes auto, sendfile on, access_log off, keepalive_requests 1000000 (bench/lib.sh) |"
  echo "| wrk | $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}'), -t$WRK_THREADS, on the same machine |"
  echo "| command | \`DURATION=$DURATION ROUNDS=$ROUNDS CREATES=$CREATES bench/run_embedded_bench.sh\` |"
  echo "| load average (1 min) at the start of each read round | ${round_loads[*]} |"
  echo
  echo "wrk, the server and nginx share the same $(nproc) cores: every figure is client-plus-server on one box."
  echo
  echo "sluice runs with its admission limits lifted (\`${lifted_limits[*]}\`): the benchmark measures"
  echo "the store and the HTTP path, not the limiter, whose own cost is in bench/results/admission.txt"
  echo "(and the latency of its shed answers in bench/results/shed.md). At the defaults one client may"
  echo "create 1 paste/s."
  echo
  echo "## Hot read of a 10 KB paste ($READ_CONNS connections, ${DURATION}s, median of $ROUNDS interleaved rounds by req/s)"
  echo
  echo "| server | URL | req/s | p50 ms | p99 ms | errors |"
  echo "|---|---|---:|---:|---:|---:|"
  echo "| nginx (static file) | /paste10k.txt | $n_rps | $n_p50 | $n_p99 | $n_err |"
  echo "| sluice (cache) | /raw/{id} | $s_rps | $s_p50 | $s_p99 | $s_err |"
  echo "| sluice view (render cache, $view_bytes-byte page) | /{id}, Accept: text/html | $v_rps | $v_p50 | $v_p99 | $v_err |"
  echo "| **ratio sluice raw/nginx** | | **$ratio** | | | |"
  echo "| **ratio sluice view/raw** | | **$view_ratio** | | | |"
  echo
  echo "Median of the rounds' own ratios (each round ran its three servers back to back): raw/nginx"
  echo "**$raw_ratio_median**, view/raw **$view_ratio_median**."
  echo
  echo "sluice's paste cache over the read runs: ${cache_hits:-?} hits, ${cache_misses:-?} misses (hot: every read from memory)."
  echo
  echo "All rounds (req/s, p50 ms, p99 ms, errors; raw/nginx, view/raw):"
  echo
  for r in $(seq "$ROUNDS"); do
    echo "- round $r (load ${round_loads[$((r - 1))]}): nginx $(parse "$raw/read-nginx-round$r.txt"); sluice $(parse "$raw/read-sluice-round$r.txt"); view $(parse "$raw/read-view-round$r.txt"); ratios $(round_ratios | sed -n "${r}p")"
  done
  echo
  if [ "$CREATES" = 1 ]; then
    echo "## Durable creates of 10 KB UTF-8 pastes (${DURATION}s each; 201 only after body and row are on disk)"
    echo
    echo "| connections | creates/s | p50 ms | p99 ms | errors and non-201 | statuses |"
    echo "|---:|---:|---:|---:|---:|---|"
    echo "| 64 | $c64_rps | $c64_p50 | $c64_p99 | $c64_err | $(statuses "$raw/create-c64.txt") |"
    echo "| 16 | $c16_rps | $c16_p50 | $c16_p99 | $c16_err | $(statuses "$raw/create-c16.txt") |"
    echo
    echo "Data dir after the run: $data_usage in $blob_count files."
    echo
    echo "Flushes issued by sluice during the runs (perf syscall tracepoints; mean batch = creates per"
    echo "flush: a body batch costs two syncfs, a row batch about one fdatasync, SQLite checkpoints add a few):"
    echo
    echo "| connections | syncfs/s | fdatasync+fsync/s | mean body batch | mean row batch |"
    echo "|---:|---:|---:|---:|---:|"
    echo "| 64 | $b64_syncfs | $b64_fsync | $b64_body | $b64_row |"
    echo "| 16 | $b16_syncfs | $b16_fsync | $b16_body | $b16_row |"
    echo
    echo "## The disk's limits (bench/fsync_probe.py, 10 KB files, ${PROBE_SECONDS}s per test, same filesystem)"
    echo
    echo "| test | files/s |"
    echo "|---|---:|"
    echo "| serial: write + fsync, one thread | $(probe serial_fsync) |"
    echo "| write + fsync from 16 threads | $(probe fsync_16threads) |"
    echo "| batches of 16, one syncfs each | $(probe syncfs_batch_16) |"
    echo "| batches of 64, one syncfs each | $(probe syncfs_batch_64) |"
    echo "| batches of 256, one syncfs each | $(probe syncfs_batch_256) |"
    echo "| sluice's protocol, batches of 64: temp files, syncfs, rename, syncfs | $(probe sluice_batch_64) |"
    echo
    echo "syncfs flushes the whole filesystem, so these figures (and sluice's) move with whatever else"
    echo "writes to it at the time. Raw wrk outputs and /metrics snapshots: $RAW_DIR/ (not kept by git)."
    echo
  else
    echo "Creates, the fsync probe: not run (CREATES=0)."
    echo
  fi
  echo "What limits the read ratio and the create rate (perf and vmstat, taken by hand, check their"
  echo "date against this run's): bench/results/profile/README.md."
} >"$out.tmp"
rm -f "$RAW_DIR"/*.txt
cp "$raw"/*.txt "$RAW_DIR"/
sed -i "s#$work#bench/work/run.XXXXXX#g" "$RAW_DIR"/*.txt
mv "$out.tmp" "$out"

echo
echo "================ summary ================"
echo "hot read 10 KB @ $READ_CONNS conns (median of $ROUNDS): nginx $n_rps req/s (p50 $n_p50 ms, p99 $n_p99 ms);" \
  "sluice $s_rps req/s (p50 $s_p50 ms, p99 $s_p99 ms); ratio $ratio"
echo "view (render cache) @ $READ_CONNS conns (median of $ROUNDS): $v_rps req/s (p50 $v_p50 ms," \
  "p99 $v_p99 ms); view/raw $view_ratio (median of the rounds' ratios: raw/nginx $raw_ratio_median," \
  "view/raw $view_ratio_median)"
if [ "$CREATES" = 1 ]; then
  echo "creates 10 KB @ 64 conns: $c64_rps /s (p50 $c64_p50 ms, p99 $c64_p99 ms, errors $c64_err)"
  echo "creates 10 KB @ 16 conns: $c16_rps /s (p50 $c16_p50 ms, p99 $c16_p99 ms, errors $c16_err)"
  echo "mean group-commit batch (body/row): $b64_body/$b64_row at 64 conns, $b16_body/$b16_row at 16 conns"
  echo "disk: serial fsync $(probe serial_fsync)/s, 16-thread fsync $(probe fsync_16threads)/s," \
    "syncfs batch of 64 $(probe syncfs_batch_64)/s"
fi
echo "written: $out and $RAW_DIR/"
