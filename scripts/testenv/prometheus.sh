#!/usr/bin/env bash
# A throwaway Prometheus (Debian's prometheus package) for tests: scrapes the given targets every
# second and evaluates the given rule files every second, so that a test sees an alert within
# seconds of its condition (the rules' own windows are the test's business: see
# tests/stack/test_prometheus_live.py, which scales them).
#
#   prometheus.sh start DIR PORT RULES_FILE TARGET...   start it on 127.0.0.1:PORT (0: a free
#                                                       one), data in DIR/data, config in
#                                                       DIR/prometheus.yml; returns once it is
#                                                       ready; prints its URL (also DIR/url).
#                                                       A TARGET is HOST:PORT serving /metrics.
#   prometheus.sh stop DIR                              stop it (by its pid file) and remove DIR
set -euo pipefail

usage() { echo "usage: $0 start DIR PORT RULES_FILE TARGET... | stop DIR" >&2; exit 2; }
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

[ $# -ge 2 ] || usage
cmd=$1 dir=$2
case "$cmd" in
  start)
    [ $# -ge 5 ] || usage
    port=$3 rules=$4
    shift 4
    command -v prometheus >/dev/null || {
      echo "prometheus not found (apt-get install prometheus, or scripts/install-deps.sh test)" >&2
      exit 1
    }
    [ "$port" = 0 ] && port=$(free_port)
    mkdir -p "$dir/data"
    dir=$(cd "$dir" && pwd)
    rules=$(cd "$(dirname "$rules")" && pwd)/$(basename "$rules")
    targets=$(printf '"%s", ' "$@")
    cat >"$dir/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: ["$rules"]
scrape_configs:
  - job_name: sluice
    static_configs:
      - targets: [${targets%, }]
YML
    promtool check config "$dir/prometheus.yml" >"$dir/check.log" 2>&1 || {
      cat "$dir/check.log" >&2
      exit 1
    }
    # Debian's package starts none: this one belongs to the test, in its own folder.
    prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
      --web.listen-address="127.0.0.1:$port" --log.level=warn >"$dir/log" 2>&1 &
    echo $! >"$dir/pid"
    url="http://127.0.0.1:$port"
    for _ in $(seq 1 300); do
      if curl -fsS "$url/-/ready" >/dev/null 2>&1; then
        echo "$url" >"$dir/url"
        echo "$url"
        exit 0
      fi
      kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
      sleep 0.1
    done
    echo "prometheus did not become ready on $url; log follows" >&2
    cat "$dir/log" >&2
    exit 1
    ;;
  stop)
    if [ -f "$dir/pid" ]; then
      pid=$(cat "$dir/pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -rf "$dir"
    ;;
  *) usage ;;
esac
