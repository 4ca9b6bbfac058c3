#!/usr/bin/env bash
# Creates and cold reads just after a restart with the page cache dropped, on the store of 10
# million pastes that bench/run_growth_bench.sh leaves in bench/work/growth-after/, for an older
# binary and this tree's release build in one run (bench/cold_start.py says how). As root (it
# drops the page cache). About 6 minutes; writes bench/results/cold-start.md.
#
#   BEFORE=path/to/old/sluice bench/run_cold_start_bench.sh
#   BEFORE=... WINDOWS=9 bench/run_cold_start_bench.sh   # 90 s of creates after each start
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
require_tools wrk
[ "$(id -u)" = 0 ] || { echo "run as root: it drops the page cache" >&2; exit 2; }
[ -n "${BEFORE:-}" ] || { echo "BEFORE=path/to/an/older/sluice is required" >&2; exit 2; }
bin=$(sluice_binary)
commit=$(git rev-parse --short HEAD)
/usr/bin/python3 bench/cold_start.py --store "${STORE:-bench/work/growth-after}" \
  --before "before=$(realpath "$BEFORE")" --after "$commit=$bin" \
  --windows "${WINDOWS:-3}" \
  --command "BEFORE=$BEFORE${WINDOWS:+ WINDOWS=$WINDOWS} bench/run_cold_start_bench.sh"
