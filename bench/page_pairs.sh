#!/usr/bin/env bash
# The rate of the pages a browser asks most, served by two or more binaries in turn, for ROUNDS
# rounds of wrk, all servers up for the whole session so a round's runs differ only in the
# server. Made for a change to how pages are made (bench/results/templates.md: the page templates
# before and after). The pages:
#   view    GET /ID of a 10 KiB C++ paste, as a browser asks it (the render cache's prepared page)
#   create  GET /, the create page (made per request: every language and expiry)
#   fork    GET /new?from=ID, the create page filled with the same paste (made per request)
#   error   GET /ID of no paste: the 404 page (made per request)
#   abuse   GET /abuse (prepared per language and thread, src/http/public_contact.h)
#   security, robots   GET /.well-known/security.txt, /robots.txt (prepared; security.txt
#           answers 404 unless SLUICE_ABUSE_CONTACT is set, which the servers inherit)
#
#   bench/page_pairs.sh 5 before=/tmp/sluice-before after=build/dev/sluice
#
# A binary given as LABEL=BINARY@LANG is asked for its pages with Accept-Language: LANG
# (bench/results/i18n.md: the same binary in English and in German).
#
# DURATION=5 CONNS=32 WRK_THREADS=2 PAGES="view create fork error"
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
read -r -a pages <<<"${PAGES:-view create fork error}"
bench_work pages

# The same text in every server: 10 KiB of this repository's C++ (a usual line length).
paste_of_10k src/http/read_handlers.cc "$work/paste10k.txt"
labels=()
declare -A url
declare -A language
for pair in "$@"; do
  label=${pair%%=*}
  spec=${pair#*=}
  bin=$(realpath "${spec%@*}")
  language[$label]=""
  [[ $spec == *@* ]] && language[$label]=${spec##*@}
  start_labelled_sluice "$label" "$bin"
  base=$sluice_url
  id=$(create_paste "$base" "$work/paste10k.txt" lang=cpp)
  url[$label/view]="$base/$id"
  url[$label/create]="$base/"
  url[$label/fork]="$base/new?from=$id"
  url[$label/error]="$base/AAAAAAAAAAAAAAAA"
  url[$label/abuse]="$base/abuse"
  url[$label/security]="$base/.well-known/security.txt"
  url[$label/robots]="$base/robots.txt"
  sizes=""
  for page in "${pages[@]}"; do
    size=$(curl -sS -H 'Accept: text/html' ${language[$label]:+-H "Accept-Language: ${language[$label]}"} \
      -o /dev/null -w '%{size_download}' "${url[$label/$page]}")
    sizes+=" $page $size"
  done
  echo "# $label ($bin${language[$label]:+, Accept-Language: ${language[$label]}}): bytes of each page:$sizes"
  labels+=("$label")
done

echo "# $(git rev-parse --short HEAD), $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# wrk -t$WRK_THREADS -c$CONNS -d${DURATION}s --latency -H 'Accept: text/html', in turn: ${labels[*]}"
for r in $(seq "$rounds"); do
  for page in "${pages[@]}"; do
    for label in "${labels[@]}"; do
      out="$work/$label-$page-round$r.txt"
      wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DURATION}s" --latency -H 'Accept: text/html' \
        ${language[$label]:+-H "Accept-Language: ${language[$label]}"} \
        "${url[$label/$page]}" >"$out" 2>&1
      printf '%s %s round %d: %s req/s, p50 %s ms, p99 %s ms\n' "$label" "$page" "$r" \
        "$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$out")" \
        "$(to_ms "$(awk '$1 == "50%" {print $2}' "$out")")" \
        "$(to_ms "$(awk '$1 == "99%" {print $2}' "$out")")" | tee -a "$work/lines.txt"
    done
  done
done
echo
echo "median (min-max) of $rounds rounds; the ratio is to the first binary's median"
for page in "${pages[@]}"; do
  first=""
  for label in "${labels[@]}"; do
    line=$(awk -v l="$label" -v p="$page" '$1 == l && $2 == p {rps[++n] = $5; p99[n] = $11}
      function median(a, k,   s, i, j, t) {
        for (i = 1; i <= k; i++) s[i] = a[i]
        for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (s[j] + 0 < s[i] + 0) { t = s[i]; s[i] = s[j]; s[j] = t }
        lo = s[1]; hi = s[k]
        return (k % 2) ? s[(k + 1) / 2] : (s[k / 2] + s[k / 2 + 1]) / 2
      }
      END {
        m = median(rps, n); rlo = lo; rhi = hi
        q = median(p99, n)
        printf "%.0f %s-%s %.2f %s-%s", m, rlo, rhi, q, lo, hi
      }' "$work/lines.txt")
    read -r m range q qrange <<<"$line"
    [ -n "$first" ] || first=$m
    printf '%-7s %-10s %7s req/s (%s), ratio %s, p99 %s ms (%s)\n' "$page" "$label" "$m" "$range" \
      "$(awk -v a="$m" -v b="$first" 'BEGIN {printf "%.3f", a / b}')" "$q" "$qrange"
  done
done
