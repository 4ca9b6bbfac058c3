#!/usr/bin/env bash
# Limiter-decision latency (p50/p99) of the hiredis adapter and of sluice's RESP client, in one run
# against one throwaway redis-server; writes bench/results/redis-client.md.
#
# The hiredis adapter (and bench/redis/redis_client_bench.cc, which drives both clients) was removed
# right after this comparison, so the benchmark is built from the last commit that had both: the
# parent of the commit that deleted src/state/redis/redis_connection.cc, or BENCH_REV, exported
# with git archive into build/redis-bench-src. It reruns the same comparison from any later
# checkout (Debian's libhiredis-dev must be installed for it).
# Usage: bench/run_redis_client_bench.sh [DECISIONS_PER_CLIENT]   (default 20000)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
decisions=${1:-20000}
jobs=${JOBS:-2}
rev=${BENCH_REV:-}
src=$repo
if [ ! -f src/state/redis/redis_connection.cc ]; then
  rev=${rev:-$(git log --format=%H -1 -- src/state/redis/redis_connection.cc)^}
fi
if [ -n "$rev" ]; then
  src=$repo/build/redis-bench-src
  rm -rf "$src"
  mkdir -p "$src"
  git archive "$rev" | tar -x -C "$src"
fi
build=$repo/build/redis-bench${rev:+-archive}
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSLUICE_BUILD_BENCH=ON \
  -DSLUICE_BUILD_TESTS=OFF -DSLUICE_BUILD_SERVER=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target redis_client_bench >/dev/null

dir=$(mktemp -d /tmp/sluice-redis-bench.XXXXXX)
trap 'bash "$repo/scripts/testenv/redis.sh" stop "$dir"; rm -rf "$dir"' EXIT
bash scripts/testenv/redis.sh start "$dir" 0
port=$(cat "$dir/port")

out=bench/results/redis-client.md
cmd="$build/redis_client_bench $port $decisions"
result=$($cmd)
{
  echo "# Redis client: limiter-decision latency, hiredis adapter vs sluice's RESP client"
  echo
  echo "One decision is what the shared limiter's TakeAll sends (EVALSHA of the bucket script over"
  echo "two buckets), from a caller thread through the client's io thread to redis-server and back."
  echo "Both clients in one process, one redis-server on loopback, alternating rounds."
  echo "The RESP client sends an ECHO of a tag after each command (src/state/redis/redis_client.h);"
  echo "its cost is included. On a shared 2-core machine the p99 is mostly the scheduler (other"
  echo "builds, the io thread and the callers competing for 2 cores): compare the rows of one run,"
  echo "not figures between runs."
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- benchmark built from: $(git rev-parse --short "${rev:-HEAD}") (Release)"
  echo "- command: \`bench/run_redis_client_bench.sh $decisions\` (runs \`redis_client_bench PORT $decisions\`)"
  echo "- redis-server: $(redis-server --version | cut -d' ' -f3)"
  echo "- nproc: $(nproc); load before: $(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared)"
  echo
  echo '```'
  lscpu | head
  echo '```'
  echo
  echo '```'
  echo "$result"
  echo '```'
} > "$out"
cat "$out"
