#!/usr/bin/env bash
# What the content blocklist costs a create (docs/moderation.md, "Takedowns that stick"): two
# servers on the embedded store, side by side with the same lifted limits, one whose blocklist
# holds ENTRIES random digests (seeded into meta.db before it starts) and one whose list is empty.
# wrk alternates between them, ROUNDS rounds of DURATION seconds of 10 KB creates each, and the
# figure is the ratio of their creates per second. Also: each server's resident memory once the
# list is loaded, whose difference is the list's memory, and the time the full one took to load it.
#
#   bench/run_blocklist_bench.sh                       # release build, 1,000,000 entries
#   SLUICE_BIN=build/dev/sluice ENTRIES=1000000 ROUNDS=3 DURATION=10 bench/run_blocklist_bench.sh
#
# Prints a Markdown report on stdout (bench/results/blocklist.md is one).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
require_tools wrk curl python3
bin=$(sluice_binary)
entries=${ENTRIES:-1000000}
rounds=${ROUNDS:-3}
duration=${DURATION:-10}
conns=${CONNS:-16}
export BODY_BYTES=${BODY_BYTES:-10240}
bench_work blocklist
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# The full server's data dir: made by the binary itself (its migrations), then seeded.
mkdir -p "$work/full"
"$bin" serve --listen 127.0.0.1:0 --admin-listen "" --data-dir "$work/full/data" \
  >"$work/full/seed.log" 2>&1 &
seed_pid=$!
wait_for_sluice_url "$work/full/seed.log" "$seed_pid" >/dev/null
kill "$seed_pid"
wait "$seed_pid" 2>/dev/null || true
python3 - "$work/full/data/meta.db" "$entries" <<'PY'
import os, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n = int(sys.argv[2])
with db:
    db.executemany(
        "INSERT INTO blocked_contents (sha256, added_at, source, reason) VALUES (?, 0, 'admin', 'bench')",
        ((os.urandom(32),) for _ in range(n)))
    db.execute("UPDATE blocked_contents_state SET version = version + 1, entries = ? WHERE slot = 0",
               (n,))
PY

metric_of() {  # URL NAME: the value of an unlabelled series on URL/metrics
  curl -fsS "$1/metrics" | awk -v n="$2" '$1 == n {print $2}'
}
rss_kib() { awk '$1 == "VmRSS:" {print $2}' "/proc/$1/status"; }

start_labelled_sluice empty "$bin"
empty_url=$sluice_url
empty_pid=${pids[-1]}
started=$(date +%s.%N)
start_labelled_sluice full "$bin"
full_url=$sluice_url
full_pid=${pids[-1]}
# Loaded when its gauge says so (the first refresh reads the list at start).
for _ in $(seq 600); do
  [ "$(metric_of "$full_url" sluice_blocked_contents)" = "$entries" ] && break
  sleep 0.1
done
[ "$(metric_of "$full_url" sluice_blocked_contents)" = "$entries" ] || {
  echo "the full server did not load $entries entries" >&2; exit 1; }
loaded_s=$(python3 -c "import time; print(f'{time.time() - $started:.2f}')")

declare -A rate
for r in $(seq "$rounds"); do
  for label in empty full; do
    url=${empty_url}; [ "$label" = full ] && url=$full_url
    wrk -t1 -c4 -d1s -s bench/wrk/create.lua "$url" >/dev/null 2>&1
    wrk -t2 -c"$conns" -d"${duration}s" --latency -s bench/wrk/create.lua "$url" \
      >"$work/$label.$r.out" 2>&1
    require_created "$work/$label.$r.out"
    rate[$label.$r]=$(awk -v d="$(wrk_seconds "$work/$label.$r.out")" \
      '$1 == "status" && $2 == 201 {n = $3} END {printf "%.0f", (d > 0 ? n / d : 0)}' \
      "$work/$label.$r.out")
  done
done
rss_empty=$(rss_kib "$empty_pid")
rss_full=$(rss_kib "$full_pid")
refused=$(curl -fsS "$full_url/metrics" | awk '$1 ~ /^sluice_creates_refused_total/ {s += $2} END {print s + 0}')

sum() { local t=0 v; for v in "$@"; do t=$((t + v)); done; echo "$t"; }
empty_rates=(); full_rates=()
for r in $(seq "$rounds"); do empty_rates+=("${rate[empty.$r]}"); full_rates+=("${rate[full.$r]}"); done
empty_total=$(sum "${empty_rates[@]}")
full_total=$(sum "${full_rates[@]}")

cat <<EOF
# What the content blocklist costs a create

| | |
|---|---|
| date | $(date -u +%Y-%m-%dT%H:%M:%SZ) |
| cpu | $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo) |
| nproc | $(nproc) |
| memory | $(free -g | awk '/Mem:/ {print $2}') GiB |
| kernel | $(uname -r) |
| load average before / after | $load_before / $(cut -d' ' -f1-3 /proc/loadavg) |
| git commit | $(git rev-parse --short HEAD) |
| sluice | $("$bin" --version 2>/dev/null | head -1) ($bin) |
| command | \`SLUICE_BIN=$bin ENTRIES=$entries ROUNDS=$rounds DURATION=$duration CONNS=$conns bench/run_blocklist_bench.sh\` |

Two servers on the embedded store with the admission limits lifted, one with $entries random
digests in its content blocklist and one with none; wrk (-t2 -c$conns, $BODY_BYTES-byte creates,
none of them blocked) alternates between them, $rounds rounds of ${duration} s each. wrk and both
servers share the machine's cores, so differences of a few percent are noise.

| | empty list | $entries entries | ratio (full / empty) |
|---|---:|---:|---:|
| creates/s, per round | ${empty_rates[*]} | ${full_rates[*]} | |
| creates/s, sum of rounds | $empty_total | $full_total | $(python3 -c "print(f'{$full_total / $empty_total:.3f}')") |
| resident memory after the runs | $((rss_empty / 1024)) MiB | $((rss_full / 1024)) MiB | +$(((rss_full - rss_empty) / 1024)) MiB |

- The list took ${loaded_s} s from the full server's start until its gauge showed $entries entries
  (the read of the whole list, in pages of 10,000, and the sort).
- Memory per million entries: 32 MB of digests in one sorted array (32 bytes each, no per-entry
  allocation); the resident difference above also holds whatever the allocator kept from reading
  the list.
- Creates refused by the full server: $refused (must be 0: the bench's bodies are not blocked).
EOF
