#!/usr/bin/env bash
# The rendered view's rate (GET /{id} as a browser asks it, Accept: text/html) of two or more
# binaries serving the same paste, in turn for ROUNDS rounds of wrk, all servers up for the whole
# session so a round's runs differ only in the server. Made for a change to the view's page
# (bench/results/line-anchors.md: line anchors before and after).
#
#   bench/view_pairs.sh 5 before=/tmp/sluice-before after=build/dev/sluice
#
# DURATION=5 CONNS=32 WRK_THREADS=2 LANG=cpp BODY=FILE (10,240 bytes of it; default: this
# repository's src/http/pages.cc, C++ of a usual line length).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
require_tools wrk curl python3
[ $# -ge 2 ] || { echo "usage: $0 ROUNDS LABEL=BINARY..." >&2; exit 2; }
rounds=$1
shift
DURATION=${DURATION:-5}
CONNS=${CONNS:-32}
WRK_THREADS=${WRK_THREADS:-2}
PASTE_LANG=${LANG_NAME:-cpp}
bench_work views

paste_of_10k "${BODY:-src/http/pages.cc}" "$work/paste10k.txt"
labels=()
urls=()
for pair in "$@"; do
  label=${pair%%=*}
  bin=$(realpath "${pair#*=}")
  start_labelled_sluice "$label" "$bin"
  url=$sluice_url
  id=$(create_paste "$url" "$work/paste10k.txt" "lang=$PASTE_LANG")
  curl -fsS -H 'Accept: text/html' -o "$work/$label/page" "$url/$id"
  echo "# $label: page of $(wc -c <"$work/$label/page") bytes, $(grep -c 'class="l"' "$work/$label/page") lines"
  labels+=("$label")
  urls+=("$url/$id")
done

echo "# $(git rev-parse --short HEAD), $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# wrk -t$WRK_THREADS -c$CONNS -d${DURATION}s --latency -H 'Accept: text/html', in turn: ${labels[*]}"
for r in $(seq "$rounds"); do
  for i in "${!labels[@]}"; do
    out="$work/${labels[$i]}-round$r.txt"
    wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DURATION}s" --latency -H 'Accept: text/html' \
      "${urls[$i]}" >"$out" 2>&1
    printf '%s round %d: %s req/s, p50 %s ms, p99 %s ms\n' "${labels[$i]}" "$r" \
      "$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$out")" \
      "$(to_ms "$(awk '$1 == "50%" {print $2}' "$out")")" \
      "$(to_ms "$(awk '$1 == "99%" {print $2}' "$out")")" | tee -a "$work/lines.txt"
  done
done
echo
echo "median (min-max) of $rounds rounds"
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
