#!/usr/bin/env bash
# Builds the admission benchmarks alone (no Boost, no server) in Release and writes the figures
# to bench/results/admission.txt (or $OUT). Usage: bench/run_admission_bench.sh [extra benchmark flags]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/bench-adm
jobs=${JOBS:-2}
cmake -S . -B "$build" -DSLUICE_ONLY_ADMISSION=ON -DSLUICE_BUILD_BENCH=ON -DSLUICE_BUILD_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$jobs" --target admission_bench
mkdir -p bench/results
out=${OUT:-bench/results/admission.txt}
cmd=("$build/admission_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true "$@")
{
  echo "# sluice admission benchmarks"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo none)"
  echo "cpu: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p')"
  echo "nproc: $(nproc)"
  echo "compiler: $(${CXX:-g++} --version | head -1)"
  echo "command: ${cmd[*]}"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews real time)"
  echo "reading: ns per operation. With threads:2 both threads share one object and 'Time' is"
  echo "wall time per operation summed over the threads (perfect scaling would halve it)."
  echo
  "${cmd[@]}" 2>&1
} | tee "$out"
