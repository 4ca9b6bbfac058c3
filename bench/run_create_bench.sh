#!/usr/bin/env bash
# Durable creates, quiet and beside a co-tenant writer, for one or more sluice binaries in one go.
#
#   1. bench/fsync_probe.py on the data dir's filesystem: the disk's group-commit capacity now;
#   2. for ROUNDS rounds, for each binary in turn (interleaved, so the machine's drift hits all),
#      on a fresh server and an empty data dir each time:
#        quiet:    wrk creates of unique BODY_BYTES UTF-8 pastes at CONNS connections for DURATION s;
#      then ROUNDS rounds the same way of
#        cotenant: the same, while `dd if=/dev/zero of=FILE bs=1M count=DD_MB` (no fsync) writes
#                  to the same filesystem, started with wrk: a log shipper or a backup next door;
#      after each run the server is stopped, its data and the dd file removed, and `sync` run;
#   3. the median round of each binary and mode by creates/s, and the ratio cotenant/quiet;
#   4. the machine's speed in the same run: in each quiet round, before the binaries, nginx serving
#      a 10 KB static file to the same wrk (-t WRK_THREADS -c CONNS, DURATION s). This box's speed
#      varies by half between hours (bench/README.md); creates per 1,000 of those reads, round by
#      round, compare runs taken hours apart. REFERENCE=0 skips it.
#
# Writes OUT (default bench/results/creates.md, overwritten: it holds every round) and the raw
# outputs to bench/work/raw-<name of OUT without .md>/ (git keeps the report, not the raw files).
# Environment:
#   BINS="before=PATH after=PATH"  the binaries to compare (default: after=$(sluice_binary))
#   DURATION=10  seconds per wrk run    ROUNDS=3      rounds per binary (>= 1)
#   CONNS=64     wrk connections        WRK_THREADS=2 wrk threads
#   DD_MB=3000   co-tenant size (MB)    PROBE_SECONDS=2 seconds per fsync-probe test
#   DD_MB_PER_S=  unset: `dd` as fast as the page cache takes it (the co-tenant of every figure so
#                 far, whose weight varies between runs); a number: bench/paced_writer.py writes
#                 DD_MB at that rate instead, the same weight in every round
#   KEEP_WORK=1  keep bench/work/creates.* afterwards
#   BODY_BYTES=10240  bytes per paste (bench/wrk/create.lua); over inline_body_bytes (65536) a body
#                     is a file of its own (the file protocol), at or under it a row of meta.db
#   BODY=code         what the pastes hold: `code`, windows of this repository's own sources (C++,
#                     Python, shell: text as compressible as pastes are); `noise`, windows of base64
#                     of random bytes (text that does not compress); `synthetic`, one line of mixed
#                     UTF-8 repeated (the body of every figure before 2026-12-01 evening, and far
#                     more compressible than real text)
#   OUT=bench/results/creates.md  the report, e.g. bench/results/creates-large.md for large bodies
#   REFERENCE=1  0: no nginx reference runs
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-64}
WRK_THREADS=${WRK_THREADS:-2}
DD_MB=${DD_MB:-3000}
DD_MB_PER_S=${DD_MB_PER_S:-}
PROBE_SECONDS=${PROBE_SECONDS:-2}
BODY_BYTES=${BODY_BYTES:-10240}
export BODY_BYTES  # read by bench/wrk/create.lua
BODY=${BODY:-code}
case $BODY in code|noise|synthetic) ;; *) echo "BODY must be code, noise or synthetic" >&2; exit 2;; esac
OUT=${OUT:-bench/results/creates.md}
REFERENCE=${REFERENCE:-1}
raw_out=bench/work/raw-$(basename "$OUT" .md)
mkdir -p "$(dirname "$OUT")"
case $BODY_BYTES in ''|*[!0-9]*) echo "BODY_BYTES must be a number of bytes" >&2; exit 2;; esac
if [ "$ROUNDS" -lt 1 ]; then echo "ROUNDS must be at least 1" >&2; exit 2; fi
source bench/lib.sh
require_tools wrk curl python3 dd

# ---- binaries -------------------------------------------------------------------------------------
labels=()
declare -A bin_of
if [ -n "${BINS:-}" ]; then
  for pair in $BINS; do
    label=${pair%%=*}
    path=${pair#*=}
    [ -x "$path" ] || { echo "not an executable: $path" >&2; exit 2; }
    labels+=("$label")
    bin_of[$label]=$(realpath "$path")
  done
else
  labels=(after)
  bin_of[after]=$(sluice_binary)
fi

# ---- work dir and cleanup -------------------------------------------------------------------------
mkdir -p bench/work
work=$(mktemp -d "$repo/bench/work/creates.XXXXXX")
raw=$work/raw
mkdir -p "$raw"
sluice_pid=""
dd_pid=""
nginx_pid=""
stop_server() {
  if [ -n "$sluice_pid" ] && kill -0 "$sluice_pid" 2>/dev/null; then
    kill -TERM "$sluice_pid"
    wait "$sluice_pid" 2>/dev/null || true
  fi
  sluice_pid=""
}
cleanup() {
  local rc=$?
  set +e
  stop_server
  if [ -n "$dd_pid" ] && kill -0 "$dd_pid" 2>/dev/null; then kill "$dd_pid"; wait "$dd_pid"; fi
  if [ -n "$nginx_pid" ] && kill -0 "$nginx_pid" 2>/dev/null; then
    kill -QUIT "$nginx_pid"
    wait "$nginx_pid" 2>/dev/null
  fi
  rm -f "$work/cotenant.bin"
  if [ "$rc" -ne 0 ]; then
    echo "benchmark failed (exit $rc); last server log lines:" >&2
    tail -n 20 "$work/sluice.log" >&2 2>/dev/null
  fi
  if [ "${KEEP_WORK:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the bodies' text (bench/wrk/create.lua, CORPUS) ---------------------------------------------
case $BODY in
  code)
    write_code_corpus "$work/corpus.txt"
    export CORPUS=$work/corpus.txt ;;
  noise)
    head -c 3000000 /dev/urandom | base64 -w 76 >"$work/corpus.txt"
    export CORPUS=$work/corpus.txt ;;
  synthetic) unset CORPUS ;;
esac
# stored_bytes LABEL MODE ROUND: what the stopped server's meta.db holds for the bodies it took,
# against what it was sent (the body codec's saving, include/sluice/store/body_codec.h).
stored_bytes() {
  python3 - "$work/data/meta.db" >>"$raw/$1-$2-round$3.txt" <<'PY'
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
# In their rows since schema 22, in inline_bodies before (a binary of before may be compared).
in_rows = any(r[1] == "body" for r in conn.execute("PRAGMA table_info(pastes)"))
n, stored, sent = conn.execute(
    "SELECT count(*), COALESCE(sum(length(body)), 0), COALESCE(sum(size_bytes), 0) "
    "FROM pastes WHERE body IS NOT NULL" if in_rows else
    "SELECT count(*), COALESCE(sum(length(b.body)), 0), COALESCE(sum(p.size_bytes), 0) "
    "FROM pastes p JOIN inline_bodies b ON b.n = p.body_n").fetchone()
print(f"stored_body_ratio {stored / sent if sent else 0:.3f}")
PY
}

# lifted_limits (bench/lib.sh): this measures the store, not the limiter.
sluice_url=""
start_server() {  # start_server LABEL
  start_lifted_sluice "${bin_of[$1]}" "$work/data" "$work/sluice.log"
}

# ---- wrk helpers (the same parsing as bench/run_embedded_bench.sh) --------------------------------
# parse FILE -> "creates/s p50_ms p99_ms errors": creates/s counts 201s only (a shed 503 is quick
# and would inflate wrk's req/s); errors = socket errors + non-201 answers. The latencies are wrk's,
# over every answer.
parse() {
  local f=$1 rps p50 p99 err
  rps=$(awk -v d="$(wrk_seconds "$f")" '$1 == "status" && $2 == 201 {n = $3}
             END {printf "%.0f", (d > 0 ? n / d : 0)}' "$f")
  p50=$(to_ms "$(awk '$1 == "50%" {print $2}' "$f")")
  p99=$(to_ms "$(awk '$1 == "99%" {print $2}' "$f")")
  err=$(awk '/Socket errors:/ {gsub(/,/, ""); s += $4 + $6 + $8 + $10}
             /^non_201 / {s += $2} END {print s + 0}' "$f")
  echo "$rps $p50 $p99 $err"
}
# cpu_jiffies -> "busy idle iowait" over all cores since boot (/proc/stat), for the machine's share
# of CPU used during a run: on 2 cores shared by wrk, the server, dd and the kernel's writeback, a
# co-tenant costs CPU as well as disk time.
cpu_jiffies() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9, $5, $6}' /proc/stat; }
# The server's own CPU (user + system, every thread) in clock ticks: CPU per create is what decides
# the rate on a machine where the server, wrk and a co-tenant share two cores.
server_ticks() { awk '{print $14 + $15}' "/proc/$sluice_pid/stat"; }
run_creates() {  # run_creates OUTFILE
  local out=$1 before after server_before server_after
  local cmd=(wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DURATION}s" --latency -s bench/wrk/create.lua "$sluice_url")
  echo "\$ ${cmd[*]}" >"$out"
  before=$(cpu_jiffies)
  server_before=$(server_ticks)
  "${cmd[@]}" >>"$out" 2>&1
  after=$(cpu_jiffies)
  server_after=$(server_ticks)
  echo "$before $after" | awk '{b = $4 - $1; i = $5 - $2; w = $6 - $3; t = b + i + w;
    printf "cpu_busy_pct %.0f\ncpu_iowait_pct %.0f\n", 100 * b / t, 100 * w / t}' >>"$out"
  awk -v t=$((server_after - server_before)) -v hz="$(getconf CLK_TCK)" \
    '$1 == "status" && $2 == 201 {n = $3}
     END {printf "server_cpu_s %.2f\nserver_cpu_us_per_create %.0f\n", t / hz, (n > 0 ? 1e6 * t / hz / n : 0)}' \
    "$out" >>"$out"
  kill -0 "$sluice_pid" 2>/dev/null || { echo "sluice is gone mid-run" >&2; exit 1; }
  require_created "$out"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
kernel_mark=$(kernel_log_mark)

# ---- the disk's capacity --------------------------------------------------------------------------
echo "fsync probe of $work (${PROBE_SECONDS}s per test)"
python3 bench/fsync_probe.py "$work" "$PROBE_SECONDS" | tee "$raw/fsync-probe.txt"
probe() { awk -v k="$1" '$1 == k {print $2}' "$raw/fsync-probe.txt"; }

# ---- the machine's reference: nginx and a 10 KB static file --------------------------------------
if [ "$REFERENCE" = 1 ]; then
  require_tools nginx
  mkdir -p "$work/www"
  python3 -c 'import sys; sys.stdout.buffer.write(("the machine reference, 10 KB ✓\n" * 400).encode()[:10240])' \
    >"$work/www/paste10k.txt"
  start_static_nginx "$work/nginx" "$work/www" paste10k.txt
fi
run_reference() {  # run_reference OUTFILE
  local cmd=(wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DURATION}s" --latency "$nginx_url/paste10k.txt")
  echo "\$ ${cmd[*]}" >"$1"
  "${cmd[@]}" >>"$1" 2>&1
}
reads_per_s() { awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$1"; }

# ---- rounds ---------------------------------------------------------------------------------------
# Every quiet round first, then every co-tenant round: a quiet run must not follow a co-tenant one,
# whose 3 GB the filesystem is still writing back and discarding (the mount has `discard`) after
# the file is gone. Each run starts a fresh server on an empty data dir.
warm_up() {
  # The first creates open files and grow the database; not measured.
  wrk -t1 -c4 -d1s -s bench/wrk/create.lua "$sluice_url" >/dev/null 2>&1
  sync
}
for r in $(seq "$ROUNDS"); do
  if [ "$REFERENCE" = 1 ]; then
    run_reference "$raw/nginx-reference-round$r.txt"
    echo "round $r: nginx reference $(reads_per_s "$raw/nginx-reference-round$r.txt") reads/s"
  fi
  for label in "${labels[@]}"; do
    start_server "$label"
    warm_up
    run_creates "$raw/$label-quiet-round$r.txt"
    stop_server
    [ "$BODY_BYTES" -gt 65536 ] || stored_bytes "$label" quiet "$r"
    cp "$work/sluice.log" "$raw/$label-sluice-quiet-round$r.log"
    rm -rf "$work/data"
    sync
    echo "round $r $label: quiet $(parse "$raw/$label-quiet-round$r.txt")"
  done
done
for r in $(seq "$ROUNDS"); do
  for label in "${labels[@]}"; do
    start_server "$label"
    warm_up
    if [ -n "$DD_MB_PER_S" ]; then
      python3 bench/paced_writer.py "$work/cotenant.bin" "$DD_MB" "$DD_MB_PER_S" \
        >"$work/dd-time.txt" &
    else
      /usr/bin/time -f "%U %S %e" -o "$work/dd-time.raw" \
        dd if=/dev/zero of="$work/cotenant.bin" bs=1M count="$DD_MB" status=none &
    fi
    dd_pid=$!
    run_creates "$raw/$label-cotenant-round$r.txt"
    # The co-tenant's own time (it writes to the page cache; the flush is the kernel's, afterwards).
    wait "$dd_pid"
    dd_pid=""
    # user + system CPU seconds of the co-tenant itself, and its wall time
    [ -n "$DD_MB_PER_S" ] ||
      awk '{printf "dd_cpu_s %.1f\ndd_wall_s %.1f\n", $1 + $2, $3}' "$work/dd-time.raw" >"$work/dd-time.txt"
    cat "$work/dd-time.txt" >>"$raw/$label-cotenant-round$r.txt"
    stop_server
    [ "$BODY_BYTES" -gt 65536 ] || stored_bytes "$label" cotenant "$r"
    cp "$work/sluice.log" "$raw/$label-sluice-cotenant-round$r.log"
    rm -rf "$work/data" "$work/cotenant.bin"
    sync
    echo "round $r $label: cotenant $(parse "$raw/$label-cotenant-round$r.txt")"
  done
done

# median LABEL MODE -> the round number of the median-creates/s round (for even ROUNDS, the lower)
median_round() {
  for r in $(seq "$ROUNDS"); do echo "$(parse "$raw/$1-$2-round$r.txt" | cut -d' ' -f1) $r"; done |
    sort -n | awk -v n="$ROUNDS" 'NR == int((n + 1) / 2) {print $2}'
}

# ---- report ---------------------------------------------------------------------------------------
fs_line=$(df -T "$work" | awk 'NR == 2 {print $1, $2, "mounted on", $7}')
mount_opts=$(awk -v m="$(df --output=target "$work" | tail -1)" '$2 == m {print $4}' /proc/mounts | tail -1)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo none)
bins_note=""
for label in "${labels[@]}"; do
  bins_note+="$label: ${bin_of[$label]#"$repo/"} ($("${bin_of[$label]}" --version 2>&1 | head -1)); "
done
out=$OUT
body_bytes_text=$(echo "$BODY_BYTES" | sed -e ':a' -e 's/\B[0-9]\{3\}\>/,&/' -e 'ta')  # 102,400
{
  echo "# Durable creates, quiet and beside a co-tenant writer"
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
  echo "| binaries | ${bins_note%; } |"
  echo "| wrk | $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}'), -t$WRK_THREADS -c$CONNS -d${DURATION}s, bench/wrk/create.lua (unique ${body_bytes_text}-byte UTF-8 bodies, BODY=$BODY$([ -n "${CORPUS:-}" ] && echo ": a window of a $(wc -c <"$CORPUS")-byte corpus per request")), on the same machine |"
  if [ -n "$DD_MB_PER_S" ]; then
    echo "| co-tenant | \`bench/paced_writer.py FILE $DD_MB $DD_MB_PER_S\`: $DD_MB MB at $DD_MB_PER_S MB/s, 1 MiB at a time, on the same filesystem, no fsync, started with wrk |"
  else
    echo "| co-tenant | \`dd if=/dev/zero of=FILE bs=1M count=$DD_MB\` on the same filesystem, no fsync, started with wrk |"
  fi
  echo "| command | \`$([ "$REFERENCE" = 1 ] || echo "REFERENCE=0 ")${DD_MB_PER_S:+DD_MB_PER_S=$DD_MB_PER_S }BODY=$BODY BODY_BYTES=$BODY_BYTES OUT=$OUT BINS=\"${BINS:-after=...}\" DURATION=$DURATION ROUNDS=$ROUNDS bench/run_create_bench.sh\` |"
  echo
  echo "wrk and the server share the same $(nproc) cores, and the machine is shared with other builders:"
  echo "compare figures within this run (interleaved rounds), not across runs. A 201 means the body and"
  echo "the row are on disk; creates/s counts 201s only (503s, the server shedding what its store cannot"
  echo "take within the create budget, are counted under errors). Each run starts a fresh server on an"
  echo "empty data dir; every quiet round runs before the first co-tenant round."
  echo
  echo "## The disk's group-commit capacity (bench/fsync_probe.py, 10 KB files, ${PROBE_SECONDS}s per test)"
  echo
  echo "| test | files/s |"
  echo "|---|---:|"
  echo "| serial: write + fsync, one thread | $(probe serial_fsync) |"
  echo "| write + fsync from 16 threads | $(probe fsync_16threads) |"
  echo "| batches of 16, one syncfs each | $(probe syncfs_batch_16) |"
  echo "| batches of 64, one syncfs each | $(probe syncfs_batch_64) |"
  echo "| batches of 256, one syncfs each | $(probe syncfs_batch_256) |"
  echo "| the old file protocol, batches of 64: temp files, syncfs, rename, syncfs | $(probe sluice_batch_64) |"
  echo "| the file protocol, batches of 64: temp files, sync_file_range + fdatasync each, rename into 64 folders, fsync each folder | $(probe files_batch_64) |"
  echo "| the WAL's protocol, batches of 16: appends to a file with its blocks, one fdatasync | $(probe wal_batch_16) |"
  echo "| the WAL's protocol, batches of 64 | $(probe wal_batch_64) |"
  echo
  if [ "$BODY_BYTES" -gt 65536 ]; then
    echo "The benchmark's bodies ($body_bytes_text bytes) are over \`inline_body_bytes\` (65,536): each is"
    echo "a file of its own (the file protocol, src/store/fs/fs_blob_store.cc), not a row of meta.db. The"
    echo "probe's files are 10 KB: its lines are the disk's shape, not these bodies' ceiling."
  else
    echo "Bodies up to \`inline_body_bytes\` (the benchmark's) take the WAL's protocol: the last two lines"
    echo "are the disk's ceiling for them; the file protocol is for larger bodies."
  fi
  echo
  echo "## Creates at $CONNS connections (median round of $ROUNDS by creates/s)"
  echo
  echo "| binary | quiet creates/s | p50 ms | p99 ms | errors | co-tenant creates/s | p50 ms | p99 ms | errors | **co-tenant/quiet** |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for label in "${labels[@]}"; do
    read -r q_rps q_p50 q_p99 q_err <<<"$(parse "$raw/$label-quiet-round$(median_round "$label" quiet).txt")"
    read -r c_rps c_p50 c_p99 c_err <<<"$(parse "$raw/$label-cotenant-round$(median_round "$label" cotenant).txt")"
    share=$(awk -v c="$c_rps" -v q="$q_rps" 'BEGIN {printf "%.2f", (q > 0 ? c / q : 0)}')
    echo "| $label | $q_rps | $q_p50 | $q_p99 | $q_err | $c_rps | $c_p50 | $c_p99 | $c_err | **$share** |"
  done
  echo
  if [ "$REFERENCE" = 1 ]; then
    echo "## The machine's speed in this run"
    echo
    echo "nginx serving a 10,240-byte static file (\`sendfile on\`, bench/lib.sh) to the same wrk, run in each"
    echo "quiet round just before the binaries: a reference that moves with the machine. Each binary's quiet"
    echo "creates per 1,000 of those reads, in the same round:"
    echo
    echo "| round | nginx reads/s |$(printf ' %s per 1,000 |' "${labels[@]}")"
    echo "|---:|---:|$(printf -- '---:|%.0s' "${labels[@]}")"
    for r in $(seq "$ROUNDS"); do
      reads=$(reads_per_s "$raw/nginx-reference-round$r.txt")
      row="| $r | $reads |"
      for label in "${labels[@]}"; do
        row+=" $(awk -v c="$(parse "$raw/$label-quiet-round$r.txt" | cut -d' ' -f1)" -v n="$reads" \
          'BEGIN {printf "%.1f", (n > 0 ? 1000 * c / n : 0)}') |"
      done
      echo "$row"
    done
    echo
  fi
  echo "All rounds (201s per second, p50 ms, p99 ms, errors and non-201); the quiet ones ran first:"
  echo
  for r in $(seq "$ROUNDS"); do
    for label in "${labels[@]}"; do
      echo "- round $r, $label: quiet $(parse "$raw/$label-quiet-round$r.txt"); co-tenant $(parse "$raw/$label-cotenant-round$r.txt")"
    done
  done
  echo
  echo "The machine's CPU during each run (all cores: busy, and waiting on the disk), the bytes meta.db"
  echo "holds for the quiet run's bodies against the bytes sent (1.000: stored as received), and the"
  echo "co-tenant's own CPU (dd copying into the page cache; the kernel's writeback of it is in the"
  echo "machine's busy share, not dd's):"
  echo
  echo "| round | binary | quiet: busy % | iowait % | server CPU us/create | stored/sent bytes | co-tenant: busy % | iowait % | server CPU us/create | dd CPU s | dd wall s |"
  echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for r in $(seq "$ROUNDS"); do
    for label in "${labels[@]}"; do
      q=$raw/$label-quiet-round$r.txt c=$raw/$label-cotenant-round$r.txt
      field() { awk -v k="$1" '$1 == k {print $2}' "$2"; }
      echo "| $r | $label | $(field cpu_busy_pct "$q") | $(field cpu_iowait_pct "$q") | $(field server_cpu_us_per_create "$q") | $(field stored_body_ratio "$q") | $(field cpu_busy_pct "$c") | $(field cpu_iowait_pct "$c") | $(field server_cpu_us_per_create "$c") | $(field dd_cpu_s "$c") | $(field dd_wall_s "$c") |"
    done
  done
  echo
  echo "Raw wrk outputs and server logs: $raw_out/."
} >"$out.tmp"
rm -rf "$raw_out"
mkdir -p "$raw_out"
cp "$raw"/* "$raw_out"/
sed -i "s#$work#bench/work/creates.XXXXXX#g" "$raw_out"/*
mv "$out.tmp" "$out"
echo
cat "$out"
