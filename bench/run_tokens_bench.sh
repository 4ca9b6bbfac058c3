#!/usr/bin/env bash
# What a creator token costs a create (docs/admission.md, "Creator tokens"): one server on the
# embedded store with the admission limits lifted, and a token minted on its admin listener with a
# budget as lifted. wrk alternates between three kinds of 1 KB creates on that one server, ROUNDS
# rounds of DURATION seconds each: anonymous; with the token (a shape check, a SHA-256 and a
# lookup, then its own buckets); and with a fresh random, well-formed, unknown token per request
# (the stranger's flood: each answered 401 invalid_token, with no store query). The figures are
# ratios in one run: token creates/s over anonymous creates/s, and 401s/s over anonymous creates/s.
#
#   bench/run_tokens_bench.sh                                   # release build
#   SLUICE_BIN=build/dev/sluice ROUNDS=3 DURATION=10 bench/run_tokens_bench.sh
#
# Prints a Markdown report on stdout (bench/results/tokens.md is one).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
require_tools wrk curl python3
bin=$(sluice_binary)
rounds=${ROUNDS:-3}
duration=${DURATION:-10}
conns=${CONNS:-16}
export BODY_BYTES=${BODY_BYTES:-1024}
bench_work tokens
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

admin_token=bench-admin-token-0123456789
echo "$admin_token" >"$work/admin.token"
admin_port=$(free_port)
"$bin" serve --listen 127.0.0.1:0 --admin-listen "127.0.0.1:$admin_port" \
  --admin-token-file "$work/admin.token" --data-dir "$work/data" "${lifted_limits[@]}" \
  >"$work/log" 2>&1 &
pids+=($!)
url=$(wait_for_sluice_url "$work/log" "$!")
secret=$(curl -fsS -X POST -H "Authorization: Bearer $admin_token" \
  -H 'Content-Type: application/json' \
  --data '{"label": "bench", "rate": "1000000/s", "burst": "1000000", "bytes_rate": "1000GB/s"}' \
  "http://127.0.0.1:$admin_port/admin/tokens" | python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])')

declare -A rate
kinds=(anonymous token stranger)
for r in $(seq "$rounds"); do
  for kind in "${kinds[@]}"; do
    env_args=()
    want=201
    case $kind in
      token) env_args=(AUTHORIZATION="Bearer $secret") ;;
      stranger) env_args=(RANDOM_BEARER=1); want=401 ;;
    esac
    env "${env_args[@]}" wrk -t1 -c4 -d1s -s bench/wrk/create.lua "$url" >/dev/null 2>&1
    env "${env_args[@]}" wrk -t2 -c"$conns" -d"${duration}s" --latency -s bench/wrk/create.lua \
      "$url" >"$work/$kind.$r.out" 2>&1
    rate[$kind.$r]=$(awk -v d="$(wrk_seconds "$work/$kind.$r.out")" -v want="$want" \
      '$1 == "status" && $2 == want {n = $3} END {printf "%.0f", (d > 0 ? n / d : 0)}' \
      "$work/$kind.$r.out")
    [ "${rate[$kind.$r]}" -gt 0 ] || { echo "no $want answers for $kind:" >&2; cat "$work/$kind.$r.out" >&2; exit 1; }
  done
done
refusals=$(curl -fsS "$url/metrics" | awk '$1 == "sluice_creator_token_refusals_total" {print $2}')
token_creates=$(curl -fsS "$url/metrics" | awk '$1 ~ /^sluice_creator_token_creates_total/ {s += $2} END {print s + 0}')
leaked=$(grep -c "${secret#slt_}" "$work/log" || true)

sum() { local t=0 v; for v in "$@"; do t=$((t + v)); done; echo "$t"; }
declare -A total per_round
for kind in "${kinds[@]}"; do
  list=()
  for r in $(seq "$rounds"); do list+=("${rate[$kind.$r]}"); done
  per_round[$kind]="${list[*]}"
  total[$kind]=$(sum "${list[@]}")
done
ratio() { python3 -c "print(f'{$1 / $2:.3f}')"; }

cat <<EOF2
# What a creator token costs a create

| | |
|---|---|
| date | $(date -u +%Y-%m-%dT%H:%M:%SZ) |
| cpu | $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo) |
| nproc | $(nproc) |
| memory | $(free -g | awk '/Mem:/ {print $2}') GiB |
| kernel | $(uname -r) |
| load average before / after | $load_before / $(cut -d' ' -f1-3 /proc/loadavg) |
| git commit | $(git rev-parse --short HEAD) |
| sluice | $("$bin" --version 2>/dev/null | head -1) ($bin) |
| command | \`SLUICE_BIN=$bin ROUNDS=$rounds DURATION=$duration CONNS=$conns BODY_BYTES=$BODY_BYTES bench/run_tokens_bench.sh\` |

One server on the embedded store with the admission limits lifted and one creator token with as
lifted a budget; wrk (-t2 -c$conns, $BODY_BYTES-byte creates) alternates between three kinds of
request to it, $rounds rounds of ${duration} s each. wrk and the server share the machine's cores,
so differences of a few percent are noise.

| | anonymous (201/s) | with the token (201/s) | random unknown tokens (401/s) |
|---|---:|---:|---:|
| per round | ${per_round[anonymous]} | ${per_round[token]} | ${per_round[stranger]} |
| sum of rounds | ${total[anonymous]} | ${total[token]} | ${total[stranger]} |
| ratio to anonymous | 1 | $(ratio "${total[token]}" "${total[anonymous]}") | $(ratio "${total[stranger]}" "${total[anonymous]}") |

- Creates counted for the token (sluice_creator_token_creates_total): $token_creates.
- Bearer tokens refused (sluice_creator_token_refusals_total): $refusals; none of them asked the
  store (the tokens are in memory; the store is asked only by the poll of their version).
- Lines of the server's log holding the token's secret: $leaked (must be 0).
EOF2
