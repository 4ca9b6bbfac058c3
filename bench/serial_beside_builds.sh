#!/bin/bash
# Two scenario suites of make test's serial stage, RUNS times each, beside a cold ASan build
# started the way make test started it before scripts/aside.sh ("both": idle class, autogroup
# nice 19, every CPU) or the way it does now ("aside": the same, off the first CPU), or alone
# ("none"). Prints each run's result and its load generator's start lags (p99, max, arrivals over
# 50 ms late); make test fails a scenario whose p99 passes 50 ms (tests/lib/loadgen.py).
# Figures: bench/results/make-test.md, "The host's 100 ms".
#
# usage: bench/serial_beside_builds.sh both|aside|none [RUNS]     (SLUICE_BIN: the dev server)
# The ASan build compiles with the compiler cache off in a scratch clone of HEAD
# ($WORK/clone), so it keeps both CPUs busy for the whole run.
set -eu
MODE=$1 RUNS=${2:-5}
WT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-$WT/bench/work/serial-beside-builds}
export SLUICE_BIN=${SLUICE_BIN:-$WT/build/dev/sluice} PYTHONPATH=$WT/tests/lib
export SLUICE_LOADGEN_LOG=$WORK/$MODE.jsonl
mkdir -p "$WORK" && : >"$SLUICE_LOADGEN_LOG"

builds=
if [ "$MODE" != none ]; then
    rm -rf "$WORK/clone" && git clone -q "$WT" "$WORK/clone"
    cd "$WORK/clone" && cmake --preset asan >/dev/null
    build=(env CCACHE_DISABLE=1 cmake --build build/asan -j2 --target sanitized_suite)
    case $MODE in
    both) setsid sh -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec "$@"' builds \
              chrt --idle 0 "${build[@]}" >"$WORK/build.log" 2>&1 & ;;
    aside) "$WT/scripts/aside.sh" start "${build[@]}" >"$WORK/build.log" 2>&1 & ;;
    *) echo "usage: $0 both|aside|none [RUNS]" >&2; exit 2 ;;
    esac
    builds=$!
    trap 'kill -- -$builds 2>/dev/null || true' EXIT
    sleep 20  # past cmake's configure checks, into the compiles
fi

cd "$WT/tests/scenario"
for i in $(seq "$RUNS"); do
    for suite in test_view_ladder test_refusal; do
        lines=$(wc -l <"$SLUICE_LOADGEN_LOG")
        if python3 -m unittest "$suite" >"$WORK/$MODE-$suite-$i.log" 2>&1; then result=passed
        elif grep -q "HARNESS FAILURE" "$WORK/$MODE-$suite-$i.log"; then result="harness failure"
        else result=failed; fi
        lags=$(tail -n +"$((lines + 1))" "$SLUICE_LOADGEN_LOG" | python3 -c '
import json, sys
runs = [json.loads(l) for l in sys.stdin if l.strip()]
print("; ".join("p99 %s ms, max %s ms, %s late" % (r["p99_ms"], r["max_ms"], r["late"]) for r in runs))')
        echo "| $MODE | $suite | $i | $result | $lags | $(cut -d' ' -f1 /proc/loadavg) |"
    done
done
