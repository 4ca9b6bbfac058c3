#!/usr/bin/env bash
# What the one-node Ceph cluster of scripts/testenv/ceph-rgw.sh costs: its start time (each
# phase), the resident memory of each daemon after the start and after the S3 suite ran against
# it (peak, VmHWM), the suite's wall time, and the stop time; once per OSD object store (memstore,
# bluestore on a file), ROUNDS times each, interleaved. Writes bench/results/ceph-rgw.md (or OUT).
#
# Environment:
#   ROUNDS=2            rounds per object store      STORES="memstore bluestore"
#   CEPH_RGW_NICE=N     the daemons' nice value (ceph-rgw.sh), on a machine shared with others
#   SUITE=build/dev/s3_backend_tests (skipped if absent)
#   OUT=bench/results/ceph-rgw.md
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
ROUNDS=${ROUNDS:-2}
STORES=${STORES:-memstore bluestore}
SUITE=${SUITE:-build/dev/s3_backend_tests}
OUT=${OUT:-bench/results/ceph-rgw.md}

mkdir -p bench/work
work=$(mktemp -d "$repo/bench/work/ceph.XXXXXX")
cleanup() {
  local rc=$?
  set +e
  [[ -f "$work/cluster/mon.pid" ]] && scripts/testenv/ceph-rgw.sh stop "$work/cluster"
  if [ "${KEEP_WORK:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }
field_kb() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }

rows=()
for round in $(seq 1 "$ROUNDS"); do
  for store in $STORES; do
    dir="$work/cluster"
    rm -rf "$dir"
    load=$(cut -d' ' -f1 /proc/loadavg)
    t0=$(now)
    CEPH_RGW_OBJECTSTORE=$store scripts/testenv/ceph-rgw.sh start "$dir" 0 >/dev/null
    start_s=$(since "$t0")
    phases=$(awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2 }' "$dir/log/phases")
    rest=""
    total=0
    for d in mon mgr osd radosgw; do
      kb=$(field_kb "$(cat "$dir/$d.pid")" VmRSS)
      total=$((total + kb))
      rest+=" $(mib "$kb") |"
    done
    rest+=" $(mib "$total") |"
    suite_s="-"
    peak=""
    if [[ -x "$SUITE" ]]; then
      t1=$(now)
      if SLUICE_TEST_S3_DIR="$dir" SLUICE_TEST_S3_VERIFIES_SIGNATURES=1 "$SUITE" \
        >"$work/suite.log" 2>&1; then
        suite_s=$(since "$t1")
      else
        suite_s="$(since "$t1") (failed: $(grep -c '^\[  FAILED' "$work/suite.log") lines)"
      fi
      total=0
      for d in mon mgr osd radosgw; do
        kb=$(field_kb "$(cat "$dir/$d.pid")" VmHWM)
        total=$((total + kb))
        peak+=" $(mib "$kb") |"
      done
      peak+=" $(mib "$total") |"
    else
      peak=" - | - | - | - | - |"
    fi
    t2=$(now)
    scripts/testenv/ceph-rgw.sh stop "$dir"
    stop_s=$(since "$t2")
    rows+=("| $round | $store | $load | $start_s | $phases |$rest$peak $suite_s | $stop_s |")
    echo "${rows[-1]}" >&2
  done
done

{
  echo "# Ceph RGW as the tests' S3: start time and memory"
  echo
  echo "A one-node cluster (one monitor, one manager, one OSD) and its RADOS Gateway from Debian 12's"
  echo "packages (Ceph $(ceph --version | awk '{print $3}')), started by scripts/testenv/ceph-rgw.sh;"
  echo "the S3 suite (s3_backend_tests) run against it over HTTP with signatures checked."
  echo
  nice_note=""
  [[ -n "${CEPH_RGW_NICE:-}" ]] && nice_note="CEPH_RGW_NICE=$CEPH_RGW_NICE nice -n $CEPH_RGW_NICE "
  echo "- Command: \`ROUNDS=$ROUNDS STORES=\"$STORES\" ${nice_note}bench/run_ceph_rgw_bench.sh\`"
  # shellcheck disable=SC1091
  echo "- Machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB, $(. /etc/os-release && echo "$PRETTY_NAME"), kernel $(uname -r); $(date -u +%Y-%m-%d)"
  echo "- Load: the 1-minute load average when each start began (the machine is shared)."
  echo "- RSS in MiB from /proc (VmRSS after the start; VmHWM, the peak, after the suite)."
  echo
  echo "| round | object store | load | start, s | phases, s since the start | mon | mgr | osd | rgw | total | mon peak | mgr peak | osd peak | rgw peak | total peak | suite, s | stop, s |"
  echo "|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
} >"$OUT"
echo "wrote $OUT" >&2
