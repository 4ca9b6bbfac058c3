#!/usr/bin/env bash
# Creates and reads per second with the bodies on Ceph RGW against s3rver, in one run, with the
# same build and load (bench/rgw_vs_s3rver.py says how); writes OUT, the section of
# bench/results/ceph-rgw.md.
#
#   bench/run_rgw_vs_s3rver_bench.sh                 # 3 rounds of s3rver, RGW on memstore and on
#                                                    # BlueStore, 15 s of creates and of reads each
#   ROUNDS=5 SECONDS_EACH=20 STORES=s3rver,ceph-memstore bench/run_rgw_vs_s3rver_bench.sh
#
# Environment: ROUNDS=3 SECONDS_EACH=15 CONNS=64 STORES=s3rver,ceph-memstore,ceph-bluestore
#              DEADLINES=patient|production OUT=bench/work/rgw-vs-s3rver.md
#              SLUICE_BIN=... (else a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
require_tools wrk radosgw ceph-osd ceph-mon ceph-mgr
[ -x node_modules/s3rver/bin/s3rver.js ] || { echo "no s3rver (npm ci)" >&2; exit 2; }
bin=$(sluice_binary)
ROUNDS=${ROUNDS:-3}
SECONDS_EACH=${SECONDS_EACH:-15}
CONNS=${CONNS:-64}
STORES=${STORES:-s3rver,ceph-memstore,ceph-bluestore}
DEADLINES=${DEADLINES:-patient}
OUT=${OUT:-bench/work/rgw-vs-s3rver.md}
mkdir -p "$(dirname "$OUT")"
/usr/bin/python3 bench/rgw_vs_s3rver.py --bin "$bin" --stores "$STORES" --rounds "$ROUNDS" \
  --seconds "$SECONDS_EACH" --conns "$CONNS" --deadlines "$DEADLINES" --out "$OUT" \
  --command "ROUNDS=$ROUNDS SECONDS_EACH=$SECONDS_EACH CONNS=$CONNS STORES=$STORES DEADLINES=$DEADLINES bench/run_rgw_vs_s3rver_bench.sh"
