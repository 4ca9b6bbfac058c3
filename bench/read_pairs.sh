#!/usr/bin/env bash
# Quick interleaved hot reads: nginx serving a 10 KB file, then each binary serving the same bytes
# as a cached paste (GET /raw/{id}), in turn for ROUNDS rounds of wrk -t2 -c64 for DURATION seconds.
# Every server runs for the whole session (each sluice on its own empty data dir, without its
# admin listener), so a round's runs differ only in the server. One line per run (req/s, p50,
# p99), then each server's medians and the spread of its rounds. For a first look at a change to
# the read path; the figures for the record come from bench/run_embedded_bench.sh.
#
#   bench/read_pairs.sh 10 before=bench/work/sluice-old after=build/release/sluice
#
# DURATION=8 CONNS=64 WRK_THREADS=2 BODY=FILE (10,240 bytes of it; default: this script's text).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
require_tools wrk curl nginx python3
[ $# -ge 2 ] || { echo "usage: $0 ROUNDS LABEL=BINARY..." >&2; exit 2; }
rounds=$1
shift
DURATION=${DURATION:-8}
CONNS=${CONNS:-64}
WRK_THREADS=${WRK_THREADS:-2}
nginx_pid=""
bench_cleanup_extra() {
  [ -n "$nginx_pid" ] && kill -QUIT "$nginx_pid" 2>/dev/null && wait "$nginx_pid" 2>/dev/null
}
bench_work reads

mkdir -p "$work/www"
body_source=${BODY:-$0}
paste_of_10k "$body_source" "$work/www/paste10k.txt"
start_static_nginx "$work/nginx" "$work/www" paste10k.txt
labels=(nginx)
urls=("$nginx_url/paste10k.txt")
for pair in "$@"; do
  label=${pair%%=*}
  bin=$(realpath "${pair#*=}")
  start_labelled_sluice "$label" "$bin"
  url=$sluice_url
  id=$(create_paste "$url" "$work/www/paste10k.txt")
  curl -fsS -o "$work/$label/body" "$url/raw/$id"
  cmp "$work/www/paste10k.txt" "$work/$label/body"
  labels+=("$label")
  urls+=("$url/raw/$id")
done

echo "# $(git rev-parse --short HEAD), $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# wrk -t$WRK_THREADS -c$CONNS -d${DURATION}s --latency, servers in turn: ${labels[*]}"
mark=$(kernel_log_mark)
for r in $(seq "$rounds"); do
  for i in "${!labels[@]}"; do
    out="$work/${labels[$i]}-round$r.txt"
    wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DURATION}s" --latency "${urls[$i]}" >"$out" 2>&1
    printf '%s round %d: %s req/s, p50 %s ms, p99 %s ms\n' "${labels[$i]}" "$r" \
      "$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$out")" \
      "$(to_ms "$(awk '$1 == "50%" {print $2}' "$out")")" \
      "$(to_ms "$(awk '$1 == "99%" {print $2}' "$out")")" | tee -a "$work/lines.txt"
  done
done
echo
echo "median (min-max) of $rounds rounds; host events: $(host_events_since "$mark")"
for label in "${labels[@]}"; do
  awk -v l="$label" '$1 == l {rps[++n] = $4; p99[n] = $10}
    function median(a, k,   s, i, j, t) {
      for (i = 1; i <= k; i++) s[i] = a[i]
      for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (s[j] + 0 < s[i] + 0) { t = s[i]; s[i] = s[j]; s[j] = t }
      lo = s[1]; hi = s[k]
      return (k % 2) ? s[(k + 1) / 2] : (s[k / 2] + s[k / 2 + 1]) / 2
    }
    END {
      m = median(rps, n); rlo = lo; rhi = hi
      q = median(p99, n)
      printf "%-10s %7.0f req/s (%s-%s), p99 %.2f ms (%s-%s)\n", l, m, rlo, rhi, q, lo, hi
    }' "$work/lines.txt"
done
