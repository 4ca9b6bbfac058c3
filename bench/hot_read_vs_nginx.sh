#!/usr/bin/env bash
# The hot read against nginx, both keeping their connections: README's hot-read figure.
#
# sluice (a release build, embedded store, admission limits lifted) serves one 10,240-byte paste
# from its cache (GET /raw/{id}); nginx serves the same bytes as a static file with
# keepalive_requests 1,000,000 and keepalive_timeout 300s (bench/lib.sh, start_static_nginx), so
# that neither server pays for reconnects: sluice has no per-connection request cap, and at
# nginx's default of 1,000 wrk reconnects each connection about once a second. Both stay up for
# the whole session. After a warm-up of each, PAIRS pairs of `wrk -t2 -c64 -dDURATIONs --latency`,
# one against each server, the order alternating (odd pairs sluice first, even pairs nginx first)
# so that a machine slowing down or speeding up within a pair counts against each side equally.
# The figure is each pair's ratio sluice/nginx of requests per second, as the median and the range
# over the pairs; p50 and p99 get the same treatment.
#
# Nothing is pinned: on 2 cores wrk, the server and anything else running share both. The report
# gives the load average before and after, and for every run what the rest of the machine used
# (the machine's busy CPU from /proc/stat less the servers' and wrk's own) and the steal time the
# hypervisor took, so that a run beside someone's build can be told from a quiet one.
#
#   bench/hot_read_vs_nginx.sh                          # this tree's release build, 5 pairs
#   SLUICE_BIN=build/release/sluice PAIRS=9 bench/hot_read_vs_nginx.sh
#   OLD_NGINX=1 bench/hot_read_vs_nginx.sh              # also nginx at keepalive_requests 1,000
#
# Environment:
#   PAIRS=5        pairs (>= 1)              DURATION=10   seconds per wrk run
#   CONNS=64       wrk connections           WRK_THREADS=2 wrk threads
#   WARMUP=5       seconds of unreported wrk against each server first
#   OLD_NGINX=0    1: after each pair, one more run against a second nginx at its default
#                  keepalive_requests (1,000), as bench/ configured it before 2026-12-04
#   SLUICE_BIN=... the binary to measure (default: a fresh `cmake --preset release` build)
#   OUT=bench/results/hot-read.md    the report (overwritten)
#   NOTES=FILE     a file of notes the report ends with, under "Reading this run" (what was found,
#                  written by hand: bench/results/hot-read-notes.md)
#   KEEP_WORK=1    keep bench/work/hot-read.* (wrk's outputs, the server log) afterwards
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
source bench/lib.sh
require_tools wrk nginx curl python3 cmp pgrep

PAIRS=${PAIRS:-5}
DURATION=${DURATION:-10}
CONNS=${CONNS:-64}
WRK_THREADS=${WRK_THREADS:-2}
WARMUP=${WARMUP:-5}
OLD_NGINX=${OLD_NGINX:-0}
OUT=${OUT:-bench/results/hot-read.md}
BODY_BYTES=10240
[ "$PAIRS" -ge 1 ] || { echo "PAIRS must be at least 1" >&2; exit 2; }
command_line="${SLUICE_BIN:+SLUICE_BIN=$SLUICE_BIN }PAIRS=$PAIRS DURATION=$DURATION CONNS=$CONNS WRK_THREADS=$WRK_THREADS WARMUP=$WARMUP OLD_NGINX=$OLD_NGINX ${NOTES:+NOTES=$NOTES }bench/hot_read_vs_nginx.sh"

bin=$(sluice_binary)

mkdir -p bench/work
work=$(mktemp -d "$repo/bench/work/hot-read.XXXXXX")
sluice_pid=""
nginx_pid=""
keep_pid=""
old_pid=""
cleanup() {
  local rc=$?
  set +e
  if [ -n "$sluice_pid" ]; then kill -TERM "$sluice_pid" 2>/dev/null && wait "$sluice_pid" 2>/dev/null; fi
  for p in $keep_pid $old_pid; do kill -QUIT "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  if [ "$rc" -ne 0 ]; then
    echo "failed (exit $rc); last lines of the logs:" >&2
    tail -n 5 "$work/sluice.log" "$work"/nginx*/logs/error.log >&2 2>/dev/null
  fi
  if [ "${KEEP_WORK:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the body: the first 10,240 bytes of the LICENSE (plain text, as pastes are, and stable) -----
mkdir -p "$work/www"
python3 - LICENSE "$work/www/paste10k.txt" "$BODY_BYTES" <<'PY'
import sys
text = open(sys.argv[1], "rb").read()
while len(text) < int(sys.argv[3]):
    text += text
open(sys.argv[2], "wb").write(text[:int(sys.argv[3])])
PY

# ---- the servers ----------------------------------------------------------------------------------
start_static_nginx "$work/nginx" "$work/www" paste10k.txt
keep_pid=$nginx_pid
keep_url=$nginx_url
if [ "$OLD_NGINX" = 1 ]; then
  start_static_nginx "$work/nginx-old" "$work/www" paste10k.txt 1000
  old_pid=$nginx_pid
  old_url=$nginx_url
fi
nginx_pid=""
start_lifted_sluice "$bin" "$work/data" "$work/sluice.log"
paste_id=$(curl -fsS -X POST -H 'Content-Type: text/plain; charset=utf-8' \
  --data-binary @"$work/www/paste10k.txt" "$sluice_url/api/v1/pastes" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
declare -A url=([sluice]="$sluice_url/raw/$paste_id" [nginx]="$keep_url/paste10k.txt")
if [ "$OLD_NGINX" = 1 ]; then url[nginx-1000]="$old_url/paste10k.txt"; fi
for server in "${!url[@]}"; do
  curl -fsS -o "$work/from-$server" "${url[$server]}"
  cmp "$work/www/paste10k.txt" "$work/from-$server"
  curl -fsS -D "$work/headers-$server.txt" -o /dev/null "${url[$server]}"
done

# ---- what one run measures --------------------------------------------------------------------
tick=$(getconf CLK_TCK)
# Ticks of CPU the machine spent busy (not idle, not waiting for I/O) and stolen by the host, and
# the seconds since boot: the window the ticks are shared over is longer than wrk's run (a busy
# machine is slow to start a process), so the cores below are over the window, not wrk's seconds.
machine_ticks() { awk '$1 == "cpu" {printf "%d %d ", $2 + $3 + $4 + $7 + $8, $9}' /proc/stat; cut -d' ' -f1 /proc/uptime; }
# Ticks of CPU a process and its threads used (fields 14 and 15 after the command's parentheses).
proc_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
# The servers' ticks: sluice, and each nginx's workers (the master only reads its config).
server_ticks() {
  local sum=0 p
  for p in "$sluice_pid" $(pgrep -P "$keep_pid") ${old_pid:+$(pgrep -P "$old_pid")}; do
    sum=$((sum + $(proc_ticks "$p")))
  done
  echo "$sum"
}
# This shell's waited-for children's ticks (cutime + cstime): wrk's own, once it has exited.
children_ticks() { sed 's/.*) //' /proc/$$/stat | awk '{print $14 + $15}'; }
# Connections nginx accepted so far (stub_status), to show it kept them.
nginx_accepts() { curl -fsS "$1/nginx_status" | awk 'NR == 3 {print $1}'; }

# run SERVER PAIR: one wrk run, one line in $work/runs.tsv.
run() {
  local server=$1 pair=$2 out="$work/wrk-$1-$2.txt" load busy0 steal0 up0 busy1 steal1 up1 srv0 \
    srv1 kids0 kids1 acc0="" acc1="" base=""
  case $server in nginx) base=$keep_url ;; nginx-1000) base=$old_url ;; esac
  load=$(cut -d' ' -f1 /proc/loadavg)
  if [ -n "$base" ]; then acc0=$(nginx_accepts "$base"); fi
  read -r busy0 steal0 up0 <<<"$(machine_ticks)"
  srv0=$(server_ticks)
  kids0=$(children_ticks)
  wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DURATION}s" --latency "${url[$server]}" >"$out" 2>&1
  kids1=$(children_ticks)
  srv1=$(server_ticks)
  read -r busy1 steal1 up1 <<<"$(machine_ticks)"
  if [ -n "$base" ]; then acc1=$(nginx_accepts "$base"); fi
  kill -0 "$sluice_pid" || { echo "sluice is gone" >&2; exit 1; }
  local rps p50 p99 errors
  rps=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$out")
  p50=$(to_ms "$(awk '$1 == "50%" {print $2}' "$out")")
  p99=$(to_ms "$(awk '$1 == "99%" {print $2}' "$out")")
  errors=$(awk '/Socket errors:/ {gsub(/,/, ""); s += $4 + $6 + $8 + $10}
                /Non-2xx or 3xx responses:/ {s += $5} END {print s + 0}' "$out")
  # Cores: ticks / CLK_TCK / the window's seconds. What the rest of the machine used is the busy
  # total less the servers and wrk (the idle servers' few ticks are in the servers' sum too).
  local cores
  cores=$(awk -v b=$((busy1 - busy0)) -v s=$((srv1 - srv0)) -v w=$((kids1 - kids0)) \
    -v st=$((steal1 - steal0)) -v t="$tick" -v d="$(awk -v a="$up0" -v b="$up1" 'BEGIN {print b - a}')" \
    'BEGIN {o = b - s - w; if (o < 0) o = 0; printf "%.2f %.2f %.2f %.2f", s / t / d, w / t / d, o / t / d, st / t / d}')
  local accepts="-"
  if [ -n "$base" ]; then accepts=$((acc1 - acc0 - 1)); fi  # less the stub_status request itself
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$pair" "$server" "$rps" "$p50" "$p99" "$errors" \
    "$accepts" "$load" "$cores" | tr ' ' '\t' >>"$work/runs.tsv"
  echo "  pair $pair $server: $rps req/s, p50 $p50 ms, p99 $p99 ms, errors $errors, accepts $accepts, load $load"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
mark=$(kernel_log_mark)
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
echo "warm-up: ${WARMUP}s of wrk against each server"
for server in "${!url[@]}"; do
  wrk -t"$WRK_THREADS" -c"$CONNS" -d"${WARMUP}s" "${url[$server]}" >"$work/warmup-$server.txt" 2>&1
done
echo "$PAIRS pairs of wrk -t$WRK_THREADS -c$CONNS -d${DURATION}s, the order alternating"
: >"$work/runs.tsv"
for pair in $(seq "$PAIRS"); do
  if [ $((pair % 2)) = 1 ]; then order=(sluice nginx); else order=(nginx sluice); fi
  for server in "${order[@]}"; do run "$server" "$pair"; done
  if [ "$OLD_NGINX" = 1 ]; then run nginx-1000 "$pair"; fi
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
host_events=$(host_events_since "$mark")

# ---- the report ---------------------------------------------------------------------------------
commit=$(git rev-parse --short HEAD)
[ -z "$(git status --porcelain --untracked-files=no -- src include CMakeLists.txt)" ] ||
  commit="$commit (with uncommitted changes to src/include)"
python3 - "$work/runs.tsv" "$OUT.tmp" <<PY
import statistics, sys

rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
runs = {}
for pair, server, rps, p50, p99, errors, accepts, load, srv, wrk, others, steal in rows:
    runs[(int(pair), server)] = dict(rps=int(rps), p50=float(p50), p99=float(p99), errors=int(errors),
                                     accepts=accepts, load=float(load), srv=float(srv),
                                     wrk=float(wrk), others=float(others), steal=float(steal))
pairs = sorted({p for p, _ in runs})
old = any(s == "nginx-1000" for _, s in runs)


def spread(values, digits=2):
    return (f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-"
            f"{max(values):.{digits}f})")


ratio = {k: [runs[(p, "sluice")][k] / runs[(p, "nginx")][k] for p in pairs]
         for k in ("rps", "p50", "p99")}
others = [r["others"] for r in runs.values()]
steal = [r["steal"] for r in runs.values()]
load_before = float("$load_before".split()[0])
out = [
    "# Hot read of a 10 KB paste against nginx, both keeping their connections",
    "",
    "Written by \`bench/hot_read_vs_nginx.sh\`; its header says what it measures and how. wrk, the",
    "server and nginx share the machine's cores: every figure is client plus server on one box, and",
    "the figure is the ratio within a pair.",
    "",
    "| | |",
    "|---|---|",
    "| command | \`$command_line\` |",
    "| date | $started |",
    "| machine | $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), nproc $(nproc), $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo), $(uname -sr) |",
    "| git commit | $commit |",
    "| sluice | $("$bin" --version 2>&1 | head -1), embedded store, admission limits lifted (bench/lib.sh), event-loop threads: default (one per core) |",
    "| nginx | $(nginx -v 2>&1 | sed 's/^nginx version: //'), worker_processes auto, sendfile on, access_log off, keepalive_requests 1000000, keepalive_timeout 300s (bench/lib.sh) |",
    "| wrk | $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}'), -t$WRK_THREADS -c$CONNS -d${DURATION}s --latency, after ${WARMUP} s of warm-up against each server |",
    "| body | 10,240 bytes, the same from both (checked with cmp); sluice: $(awk 'tolower($1) == "content-type:" {sub(/\r$/, ""); $1 = ""; print substr($0, 2)}' "$work/headers-sluice.txt"), nginx: $(awk 'tolower($1) == "content-type:" {sub(/\r$/, ""); $1 = ""; print substr($0, 2)}' "$work/headers-nginx.txt") |",
    "| load average before / after | $load_before / $load_after |",
    "| host events (kernel log) | $host_events |",
    "",
    "## The figure",
    "",
    f"Median (range) over {len(pairs)} interleaved pairs of the ratio sluice / nginx within each pair:",
    "",
    "| | sluice / nginx |",
    "|---|---:|",
    f"| requests/s | **{spread(ratio['rps'])}** |",
    f"| p50 latency | {spread(ratio['p50'])} |",
    f"| p99 latency | {spread(ratio['p99'])} |",
    "",
    "Median (range) of each server's runs:",
    "",
    "| server | requests/s | p50 ms | p99 ms |",
    "|---|---:|---:|---:|",
]
for server in ("sluice", "nginx") + (("nginx-1000",) if old else ()):
    mine = [runs[(p, server)] for p in pairs]
    name = {"sluice": "sluice \`/raw/{id}\`", "nginx": "nginx, connections kept",
            "nginx-1000": "nginx at keepalive_requests 1,000 (before 2026-12-04)"}[server]
    out.append(f"| {name} | {spread([r['rps'] for r in mine], 0)} | "
               f"{spread([r['p50'] for r in mine])} | {spread([r['p99'] for r in mine])} |")
if old:
    old_ratio = [runs[(p, "sluice")]["rps"] / runs[(p, "nginx-1000")]["rps"] for p in pairs]
    kept = [runs[(p, "nginx-1000")]["rps"] / runs[(p, "nginx")]["rps"] for p in pairs]
    out += ["", f"Against nginx at its default keepalive_requests, run after each pair, sluice's ratio "
            f"would be {spread(old_ratio)}; that nginx made {spread(kept)} of the requests/s of the "
            "one that keeps its connections."]
out += [
    "",
    "## The machine during the run",
    "",
    f"Others (the machine's busy CPU less the servers' and wrk's) used {spread(others)} cores during a",
    f"run and the hypervisor stole {spread(steal)}; the 1-minute load average was {load_before:.2f} before",
    "the servers started.",
]
if load_before > 1.0 or statistics.median(others) > 0.25:
    out += ["**The machine was busy with other work**: the servers and wrk had less than the 2 cores,",
            "which lowers both rates; the ratio within a pair is what still compares."]
out += [
    "",
    "## Every run",
    "",
    "In the order run. accepts: connections nginx accepted during the run (stub_status; wrk's $CONNS",
    "and one more when they are kept). Cores: the servers', wrk's, the rest of the machine's, and",
    "steal; load: the 1-minute load average at the run's start.",
    "",
    "| pair | server | requests/s | p50 ms | p99 ms | errors | accepts | servers | wrk | others | steal | load |",
    "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
]
for pair, server, *_ in rows:
    r = runs[(int(pair), server)]
    out.append(f"| {pair} | {server} | {r['rps']:,} | {r['p50']:.2f} | {r['p99']:.2f} | {r['errors']} | "
               f"{r['accepts']} | {r['srv']:.2f} | {r['wrk']:.2f} | {r['others']:.2f} | "
               f"{r['steal']:.2f} | {r['load']:.2f} |")
out.append("")
if "${NOTES:-}":
    out += ["## Reading this run", "", open("${NOTES:-}").read()]
open(sys.argv[2], "w").write("\n".join(out))
print(f"sluice / nginx requests/s, median (range) of {len(pairs)} pairs: {spread(ratio['rps'])}; "
      f"p99 {spread(ratio['p99'])}")
PY
mv "$OUT.tmp" "$OUT"
echo "wrote $OUT"
