#!/bin/bash
# Interleaved pairs of one scenario suite with loadgen's two engines (issue 44,
# bench/results/loadgen.md): the thread pool ("threads") against the one-thread selector loop
# ("selectors"), alternating which goes first so that a change in the machine's other work lands
# on both. Each run's start lags go to $OUT (one JSON line per run_streams call, with the test's
# result after it).
#
# usage: bench/loadgen_pairs.sh TEST PAIRS [loaded]     e.g. bench/loadgen_pairs.sh test_neighbour_crawl 3 loaded
# "loaded" runs the flake hunt's load beside each run (tests/flake_hunt.py: stress-ng with a
# matrix hog on every core and a writer syncing 64 MiB files), in the test's own session and at
# its priority, so the scenario's run_ahead_of_background_work puts the test ahead of it as it
# does in a loaded hunt.
#
# SHARED=1 is for a machine that another timed run is using: everything runs in a session group
# of nice 19 and without CAP_SYS_NICE (the scenario cannot raise itself, so the hogs go under
# SCHED_IDLE instead), with a private scenario lock (TMPDIR) so it never holds up the other run.
set -u
TEST=$1 PAIRS=$2 LOAD=${3:-}
SHARED=${SHARED:-0}
WT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/loadgen-pairs.jsonl}
export PYTHONPATH=$WT/tests/lib
export SLUICE_BIN=${SLUICE_BIN:-/work/main/build/dev/sluice} SLUICE_LOADGEN_LOG=$OUT
HOG_TMP=$(mktemp -d)
trap 'rm -rf "$HOG_TMP"' EXIT
declare -a run_prefix=() hog_prefix=()
if [ "$SHARED" = 1 ]; then
    export TMPDIR=${LG_TMPDIR:-/tmp/lg-tmp}
    mkdir -p "$TMPDIR"
    echo 19 > /proc/self/autogroup
    run_prefix=(nice -n 19 setpriv --inh-caps=-sys_nice --bounding-set=-sys_nice)
    hog_prefix=(ionice -c 3 chrt -i 0)
fi
cd "$WT/tests/scenario"
one() {  # engine
    local hog=
    if [ "$LOAD" = loaded ]; then
        "${hog_prefix[@]}" stress-ng --cpu "$(nproc)" --cpu-method matrixprod --hdd 1 \
            --hdd-bytes 64m --hdd-opts sync --temp-path "$HOG_TMP" --timeout 0 --quiet &
        hog=$!
        sleep 1
    fi
    echo "{\"test\": \"$TEST\", \"engine\": \"$1\", \"load\": \"${LOAD:-quiet}\", \"begin\": $(date +%s)}" >> "$OUT"
    SLUICE_LOADGEN_ENGINE=$1 "${run_prefix[@]}" python3 -m unittest "$TEST" > "/tmp/lg-$TEST-$1.log" 2>&1
    local rc=$?
    echo "{\"test\": \"$TEST\", \"engine\": \"$1\", \"load\": \"${LOAD:-quiet}\", \"rc\": $rc}" >> "$OUT"
    [ -n "$hog" ] && kill "$hog" && wait "$hog" 2>/dev/null
    return 0
}
for p in $(seq 1 "$PAIRS"); do
    if [ $((p % 2)) = 1 ]; then one threads; one selectors; else one selectors; one threads; fi
done
