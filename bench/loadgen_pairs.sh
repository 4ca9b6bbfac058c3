#!/bin/bash
# Interleaved pairs of one scenario suite with loadgen's two engines (issue 44,
# bench/results/loadgen.md): the thread pool ("threads") against the one-thread selector loop
# ("selectors"), alternating which goes first so that a change in the machine's other work lands
# on both. Each run's start lags go to $OUT (one JSON line per run_streams call, with the test's
# result after it).
#
# usage: bench/loadgen_pairs.sh TEST PAIRS [loaded]     e.g. bench/loadgen_pairs.sh test_neighbour_crawl 3 loaded
# "loaded" runs stress-ng --cpu 2 --hdd 1 --hdd-opts sync (the flake hunt's load) beside each
# run, started in the same session as the test, under SCHED_IDLE: the test cannot raise its own
# priority here (below), so the hogs are lowered instead, as the scenarios' nice -10 put them
# behind the test in the flake hunt.
#
# The machine is shared with a timed run: everything here runs in a session group of nice 19 and
# without CAP_SYS_NICE, so the scenario's run_ahead_of_background_work cannot raise it (it
# returns None and the suite runs at nice 19 like its hogs); its scenario lock is private
# (TMPDIR), so it never waits for, or holds up, a suite of the other run.
set -u
TEST=$1 PAIRS=$2 LOAD=${3:-}
WT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/loadgen-pairs.jsonl}
export TMPDIR=${LG_TMPDIR:-/tmp/lg-tmp} PYTHONPATH=$WT/tests/lib
export SLUICE_BIN=${SLUICE_BIN:-/work/main/build/dev/sluice} SLUICE_LOADGEN_LOG=$OUT
mkdir -p "$TMPDIR"
echo 19 > /proc/self/autogroup
cd "$WT/tests/scenario"
one() {  # engine
    local hog=
    if [ "$LOAD" = loaded ]; then
        ionice -c 3 chrt -i 0 stress-ng --cpu 2 --hdd 1 --hdd-opts sync --hdd-bytes 64m --temp-path "$TMPDIR" -q &
        hog=$!
        sleep 1
    fi
    echo "{\"test\": \"$TEST\", \"engine\": \"$1\", \"load\": \"${LOAD:-quiet}\", \"begin\": $(date +%s)}" >> "$OUT"
    SLUICE_LOADGEN_ENGINE=$1 nice -n 19 setpriv --inh-caps=-sys_nice --bounding-set=-sys_nice \
        python3 -m unittest "$TEST" > "/tmp/lg-$TEST-$1.log" 2>&1
    local rc=$?
    echo "{\"test\": \"$TEST\", \"engine\": \"$1\", \"load\": \"${LOAD:-quiet}\", \"rc\": $rc}" >> "$OUT"
    [ -n "$hog" ] && kill "$hog" && wait "$hog" 2>/dev/null
    return 0
}
for p in $(seq 1 "$PAIRS"); do
    if [ $((p % 2)) = 1 ]; then one threads; one selectors; else one selectors; one threads; fi
done
