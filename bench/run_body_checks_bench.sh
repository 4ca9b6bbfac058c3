#!/usr/bin/env bash
# What the body checks cost: create and read rates of the embedded store with `verify_bodies` on
# (the default: SHA-256 of each body at create, size and checksum checked on every body fetched)
# and off, in one run, on the same machine, two servers side by side and the runs interleaved.
#
#   1. durable creates of unique 10 KB pastes (POST /api/v1/pastes), CREATE_CONNS connections;
#   2. origin reads (cache_bytes = 0, so every read fetches row and body and checks them) of random
#      ids among READ_PASTES pastes, for 10 KB and for LARGE_BYTES bodies, READ_CONNS connections.
#
# Hot reads from the process cache are not checked again (the cache holds only checked bodies), so
# they cost the same either way and are not measured here (bench/results/embedded.md has them).
#
# Writes bench/results/body-checks.md (overwritten). Environment:
#   DURATION=10      seconds per wrk run         ROUNDS=2          rounds of on/off per figure
#   SLUICE_BIN=...   use this binary, skip build JOBS=2            build parallelism
#   WRK_THREADS=2    wrk threads                 CREATE_CONNS=16   READ_CONNS=32
#   READ_PASTES=100  pastes read per size        LARGE_BYTES=500000
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-2}
WRK_THREADS=${WRK_THREADS:-2}
CREATE_CONNS=${CREATE_CONNS:-16}
READ_CONNS=${READ_CONNS:-32}
READ_PASTES=${READ_PASTES:-100}
LARGE_BYTES=${LARGE_BYTES:-500000}
source bench/lib.sh
require_tools wrk curl python3 openssl

bin=$(sluice_binary)
mkdir -p bench/work bench/results
work=$(mktemp -d "$repo/bench/work/checks.XXXXXX")
declare -A pid url
cleanup() {
  local rc=$? k
  set +e
  for k in "${!pid[@]}"; do
    if kill -0 "${pid[$k]}" 2>/dev/null; then kill -TERM "${pid[$k]}"; wait "${pid[$k]}" 2>/dev/null; fi
  done
  if [ "$rc" -ne 0 ]; then
    echo "benchmark failed (exit $rc); logs:" >&2
    tail -n 20 "$work"/*.log >&2 2>/dev/null
  fi
  if [ "${KEEP_WORK:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# lifted_limits (bench/lib.sh): this measures the store path and the checks, not the limiter.
lifted=("${lifted_limits[@]}" --fill-cap-per-client 50)

start() {  # start NAME VERIFY CACHE_BYTES
  local name=$1 verify=$2 cache=$3 u=""
  mkdir -p "$work/$name"
  "$bin" serve --listen 127.0.0.1:0 --data-dir "$work/$name" --verify-bodies "$verify" \
    --cache-bytes "$cache" "${lifted[@]}" >"$work/$name.log" 2>&1 &
  pid[$name]=$!
  for _ in $(seq 100); do
    u=$(grep -o 'listening on http://127\.0\.0\.1:[0-9]*' "$work/$name.log" | sed 's/listening on //' || true)
    [ -n "$u" ] && break
    sleep 0.1
  done
  [ -n "$u" ] || { echo "$name did not report its address" >&2; exit 1; }
  url[$name]=$u
}

# seed NAME BYTES COUNT -> writes COUNT ids of BYTES-byte UTF-8 pastes to $work/NAME-BYTES.ids
seed() {
  python3 - "${url[$1]}" "$2" "$3" "$work/$1-$2.ids" <<'PY'
import http.client, json, sys, urllib.parse
base, size, count, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
u = urllib.parse.urlsplit(base)
conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
unit = "body check bench — ünïcödé ✓\n".encode()
ids = []
for i in range(count):
    head = f"{i:08d} ".encode()
    body = (head + unit * (size // len(unit) + 1))[:size]
    while True:
        try:
            body.decode("utf-8"); break
        except UnicodeDecodeError:
            body = body[:-1]
    body += b"." * (size - len(body))
    conn.request("POST", "/api/v1/pastes", body=body, headers={"Content-Length": str(len(body))})
    res = conn.getresponse()
    doc = json.loads(res.read())
    if res.status != 201:
        sys.exit(f"seeding answered {res.status}: {doc}")
    ids.append(doc["id"])
open(out, "w").write("\n".join(ids) + "\n")
PY
}

parse() {  # FILE -> "rps p50_ms p99_ms bad" (bad: socket errors and unexpected statuses)
  local f=$1
  echo "$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$f") $(to_ms "$(awk '$1 == "50%" {print $2}' "$f")") $(to_ms "$(awk '$1 == "99%" {print $2}' "$f")") $(awk '/Socket errors:/ {gsub(/,/, ""); s += $4 + $6 + $8 + $10} /^non_20[01] / {s += $2} END {print s + 0}' "$f")"
}
statuses() {  # FILE -> "201 x 7000, 503 x 3, timeouts 0"
  { grep '^status ' "$1" | awk '{printf "%s%s x %s", (NR > 1 ? ", " : ""), $2, $3}'
    awk '/Socket errors:/ {gsub(/,/, ""); printf ", socket errors %d (timeouts %d)", $4 + $6 + $8 + $10, $10}' "$1"; }
}
run() {  # run OUT CONNS wrk-args...
  local out=$1 conns=$2
  shift 2
  local cmd=(wrk -t"$WRK_THREADS" -c"$conns" -d"${DURATION}s" --latency "$@")
  echo "\$ ${cmd[*]}" >"$out"
  BODY_BYTES=10240 "${cmd[@]}" >>"$out" 2>&1
  echo "  $(basename "$out" .txt): $(parse "$out")"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
kernel_mark=$(kernel_log_mark)
start on true 0
start off false 0
echo "seeding $READ_PASTES pastes of 10240 and $LARGE_BYTES bytes on each server"
for name in on off; do
  seed "$name" 10240 "$READ_PASTES"
  seed "$name" "$LARGE_BYTES" "$READ_PASTES"
done
# Sanity: each server serves its pastes, and the checked one refuses a damaged body.
first=$(head -1 "$work/on-10240.ids")
curl -fsS -o /dev/null "${url[on]}/raw/$first"
curl -fsS -o /dev/null "${url[off]}/raw/$(head -1 "$work/off-10240.ids")"

echo "interleaved runs, ${DURATION}s each, $ROUNDS rounds"
for r in $(seq "$ROUNDS"); do
  for name in on off; do
    run "$work/create-$name-r$r.txt" "$CREATE_CONNS" -s bench/wrk/create.lua "${url[$name]}"
    run "$work/read10k-$name-r$r.txt" "$READ_CONNS" -s bench/wrk/read_ids.lua "${url[$name]}" -- "$work/$name-10240.ids"
    run "$work/readlarge-$name-r$r.txt" "$READ_CONNS" -s bench/wrk/read_ids.lua "${url[$name]}" -- "$work/$name-$LARGE_BYTES.ids"
  done
done
mismatches=$(curl -fsS "${url[on]}/metrics" | awk '/^sluice_body_mismatches_total/ {s += $2} END {print s + 0}')

# mean over rounds: FIGURE NAME -> "rps p50 p99 bad" (rps, p50, p99 averaged; bad summed)
mean() {
  for r in $(seq "$ROUNDS"); do parse "$work/$1-$2-r$r.txt"; done |
    awk '{rps += $1; p50 += $2; p99 += $3; bad += $4; n++} END {printf "%.0f %.2f %.2f %d", rps / n, p50 / n, p99 / n, bad}'
}
# range FIGURE NAME -> "min-max" of the rounds' req/s: the noise the means carry
range() {
  for r in $(seq "$ROUNDS"); do parse "$work/$1-$2-r$r.txt"; done |
    awk 'NR == 1 {lo = hi = $1} {if ($1 < lo) lo = $1; if ($1 > hi) hi = $1} END {printf "%d-%d", lo, hi}'
}
# hashing BYTES RPS -> "µs per body, share of one core at RPS" from OpenSSL's speed
hashing() {
  awk -v b="$1" -v r="$2" -v k="$sha" 'BEGIN {
    if (k + 0 <= 0) { print "?"; exit }
    us = b / (k * 1000) * 1e6; printf "%.1f µs per body, %.1f%% of one core at %s/s", us, us * r / 1e4, r }'
}
row() {  # row LABEL FIGURE BYTES
  read -r on_rps on_p50 on_p99 on_bad <<<"$(mean "$2" on)"
  read -r off_rps off_p50 off_p99 off_bad <<<"$(mean "$2" off)"
  echo "| $1 | $on_rps ($(range "$2" on)) | $off_rps ($(range "$2" off)) | $(awk -v a="$on_rps" -v b="$off_rps" 'BEGIN {printf "%+.1f%%", (a / b - 1) * 100}') | $on_p50 / $off_p50 | $on_p99 / $off_p99 | $on_bad / $off_bad | $(hashing "$3" "$on_rps") |"
}
sha=$(openssl speed -seconds 1 -bytes 10240 sha256 2>/dev/null | awk '/^sha256/ {sub(/k$/, "", $2); print $2}')
sha_large=$(openssl speed -seconds 1 -bytes 524288 sha256 2>/dev/null | awk '/^sha256/ {sub(/k$/, "", $2); print $2}')
commit=$(git rev-parse --short HEAD 2>/dev/null || echo none)
if [ -n "$(git status --porcelain --untracked-files=no -- src include 2>/dev/null)" ]; then
  commit="$commit (with uncommitted changes to src/include)"
fi
out=bench/results/body-checks.md
{
  echo "# What the body checks cost"
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
  echo "| git commit | $commit |"
  echo "| sluice | $("$bin" --version 2>&1 | head -1) ($bin) |"
  echo "| wrk | $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}'), -t$WRK_THREADS, on the same machine |"
  echo "| command | \`DURATION=$DURATION ROUNDS=$ROUNDS CREATE_CONNS=$CREATE_CONNS READ_CONNS=$READ_CONNS READ_PASTES=$READ_PASTES LARGE_BYTES=$LARGE_BYTES bench/run_body_checks_bench.sh\` |"
  echo
  echo "Two servers on the embedded store (SQLite + files), one with \`verify_bodies = true\` (the default)"
  echo "and one with \`false\`, run side by side with the same settings (admission limits lifted, \`cache_bytes = 0\`"
  echo "so every read fetches the row and the body and, when on, checks them); wrk alternates between them,"
  echo "$ROUNDS rounds of ${DURATION}s per figure, and the table gives the mean of the rounds. wrk and both"
  echo "servers share the same $(nproc) cores, so differences of a few percent are within the noise."
  echo
  echo "| figure | on: req/s (rounds' range) | off: req/s (range) | on vs off | p50 ms on / off | p99 ms on / off | errors on / off | SHA-256 work when on |"
  echo "|---|---:|---:|---:|---:|---:|---:|---|"
  row "durable creates, 10 KB, $CREATE_CONNS connections" create 10240
  row "origin reads, 10 KB, $READ_CONNS connections" read10k 10240
  row "origin reads, $LARGE_BYTES bytes, $READ_CONNS connections" readlarge "$LARGE_BYTES"
  echo
  echo "The last column is the hashing itself, from OpenSSL's SHA-256 speed on this machine"
  echo "(\`openssl speed sha256\`: ${sha:-?} kB/s for 10 KB blocks, ${sha_large:-?} kB/s for 512 KB blocks) and"
  echo "the measured rate: the part of the difference the checks can explain. When the rounds' ranges"
  echo "overlap, the on/off difference is the machine's noise, not the checks."
  echo
  echo "Body mismatches counted during the run (must be 0): $mismatches."
  echo
  echo "All rounds (req/s, p50 ms, p99 ms, errors):"
  echo
  for f in create read10k readlarge; do
    for r in $(seq "$ROUNDS"); do
      echo "- $f round $r: on $(parse "$work/$f-on-r$r.txt") [$(statuses "$work/$f-on-r$r.txt")]; off $(parse "$work/$f-off-r$r.txt") [$(statuses "$work/$f-off-r$r.txt")]"
    done
  done
  echo
  echo "Errors are wrk's socket errors (timeouts at 2 s) plus answers other than 201/200; the 503s are"
  echo "sluice shedding origin reads past its read budget (300 ms) or caps on a machine this loaded."
} >"$out"
echo "wrote $out"
cat "$out"
