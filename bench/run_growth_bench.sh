#!/usr/bin/env bash
# What each operation costs as the embedded store grows: fills one store through the API to each
# of SIZES live pastes and measures creates, hot and cold reads, 404s, deletes, the expiry sweep,
# an online backup, start-up, memory and disk at each (bench/growth.py says how), then writes
# bench/results/growth.md and its plots. As root (cold reads drop the page cache). The store and
# the raw results live in bench/work/growth-LABEL/ (about 2 GB a million pastes).
#
#   bench/run_growth_bench.sh                       # this tree's release build, to 10 million
#   SIZES=0,1000000 bench/run_growth_bench.sh       # a shorter curve
#   BEFORE=path/to/old/sluice bench/run_growth_bench.sh   # the same curve for an older binary
#                                                   # first (to 3 million), both in the report
#   FLEET=2 bench/run_growth_bench.sh               # PostgreSQL behind 2 processes and nginx,
#                                                   # to 3 million: bench/results/growth-postgres.md
#   FLEET=2 BODIES=ceph bench/run_growth_bench.sh   # the same with the bodies in a bucket of Ceph
#                                                   # RGW (scripts/testenv/ceph-rgw.sh, BlueStore),
#                                                   # to 1 million: bench/results/growth-ceph-rgw.md
#
# About 50 minutes to 10 million on 2 cores, most of it the fill; about 70 to 3 million with
# FLEET=2 (PostgreSQL with fsync on, a file a body: 700-1,400 creates/s on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
require_tools wrk nginx sqlite3
[ -z "${FLEET:-}" ] || require_tools /usr/lib/postgresql/15/bin/postgres
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null ||
  { echo "missing matplotlib (apt-get install -y python3-matplotlib)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run as root: cold reads drop the page cache" >&2; exit 2; }
bin=$(sluice_binary)
commit=$(git rev-parse --short HEAD)
runs=()
if [ -n "${FLEET:-}" ] && [ "${BODIES:-files}" = ceph ]; then
  require_tools radosgw ceph-osd ceph-mon ceph-mgr
  SIZES=${SIZES:-0,1000000}
  /usr/bin/python3 bench/growth.py --bin "$bin" --fleet "$FLEET" --bodies ceph \
    --work bench/work/growth-ceph --sizes "$SIZES" --port 19900
  /usr/bin/python3 bench/growth.py --report bench/results/growth-ceph-rgw.md \
    --runs "$commit=bench/work/growth-ceph/growth.json" \
    --notes bench/results/growth-ceph-rgw-notes.md \
    --command "FLEET=$FLEET BODIES=ceph bench/run_growth_bench.sh (SIZES=$SIZES)"
  echo "wrote bench/results/growth-ceph-rgw.md"
  exit 0
fi
if [ -n "${FLEET:-}" ]; then
  SIZES=${SIZES:-0,1000000,3000000}
  /usr/bin/python3 bench/growth.py --bin "$bin" --fleet "$FLEET" --work bench/work/growth-pg \
    --sizes "$SIZES" --port 19800
  /usr/bin/python3 bench/growth.py --report bench/results/growth-postgres.md \
    --runs "$commit=bench/work/growth-pg/growth.json" --notes bench/results/growth-postgres-notes.md \
    --command "FLEET=$FLEET bench/run_growth_bench.sh (SIZES=$SIZES)"
  echo "wrote bench/results/growth-postgres.md"
  exit 0
fi
SIZES=${SIZES:-0,1000000,3000000,10000000}
if [ -n "${BEFORE:-}" ]; then
  /usr/bin/python3 bench/growth.py --bin "$BEFORE" --work bench/work/growth-before \
    --sizes "${BEFORE_SIZES:-0,1000000,3000000}" --sweep-seconds 40 --port 19600
  runs+=("before ($BEFORE)=bench/work/growth-before/growth.json")
fi
/usr/bin/python3 bench/growth.py --bin "$bin" --work bench/work/growth-after --sizes "$SIZES"
runs+=("$commit=bench/work/growth-after/growth.json")
/usr/bin/python3 bench/growth.py --report bench/results/growth.md --runs "${runs[@]}" \
  --notes bench/results/growth-notes.md --command "bench/run_growth_bench.sh (SIZES=$SIZES${BEFORE:+ BEFORE=$BEFORE})"
echo "wrote bench/results/growth.md"
