#!/usr/bin/env bash
# An S3-compatible peer for the blob-store tests: s3rver (npm, pinned in package-lock.json).
#
#   s3rver.sh start DIR PORT [BUCKET]   start it on 127.0.0.1:PORT (0: a free port) with its data
#                                       in DIR/data and BUCKET (default sluice-test) created; prints
#                                       the endpoint and writes it to DIR/endpoint
#   s3rver.sh start-tls DIR PORT [BUCKET]
#                                       the same over HTTPS, with a throw-away CA (DIR/ca.pem) and a
#                                       certificate for localhost and 127.0.0.1 made by openssl
#   s3rver.sh check-signatures DIR      put tests/backend/sigv4_checking_proxy.py in front of the
#                                       s3rver of DIR (s3rver 3.x does not verify SigV4 signatures;
#                                       the proxy does, with botocore); prints its endpoint and
#                                       writes it to DIR/checked_endpoint. Needs PYTHON (default
#                                       python3) with botocore.
#   s3rver.sh stop DIR                  stop what was started with DIR (pids in DIR/*.pid)
#
# Its credentials are s3rver's defaults: AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER.
# Only the pid this script recorded is ever signalled.
set -euo pipefail
testenv=$(cd "$(dirname "$0")" && pwd)

here="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$here/node_modules/s3rver/bin/s3rver.js"

usage() {
  echo "usage: $0 start DIR PORT [BUCKET] | stop DIR" >&2
  exit 2
}

[[ $# -ge 2 ]] || usage
cmd="$1"
dir="$2"

case "$cmd" in
  start | start-tls)
    [[ $# -ge 3 ]] || usage
    port="$3"
    bucket="${4:-sluice-test}"
    if [[ ! -f "$bin" ]]; then
      echo "s3rver is not installed: run 'npm ci' in $here" >&2
      exit 1
    fi
    mkdir -p "$dir/data"
    if [[ "$port" == 0 ]]; then
      port="$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => {
        console.log(s.address().port); s.close(); });')"
    fi
    if [[ -f "$dir/s3rver.pid" ]] && kill -0 "$(cat "$dir/s3rver.pid")" 2>/dev/null; then
      echo "s3rver already running for $dir (pid $(cat "$dir/s3rver.pid"))" >&2
      exit 1
    fi
    # s3rver encrypts its ListObjectsV2 continuation tokens with DES, which OpenSSL 3 keeps only in
    # its legacy provider: without it every truncated listing is a 500 InternalError.
    scheme=http
    tls_args=()
    if [[ "$cmd" == start-tls ]]; then
      scheme=https
      "$testenv/tls-cert.sh" "$dir" DNS:localhost,IP:127.0.0.1
      tls_args=(--key "$dir/server.key" --cert "$dir/server.pem")
    fi
    node --openssl-legacy-provider "$bin" -d "$dir/data" -a 127.0.0.1 -p "$port" --silent \
      "${tls_args[@]}" --configure-bucket "$bucket" >"$dir/s3rver.log" 2>&1 &
    echo $! >"$dir/s3rver.pid"
    # Ready when it answers HTTP at all (an anonymous request gets an S3 error body).
    for _ in $(seq 1 100); do
      if curl -sk -o /dev/null "$scheme://127.0.0.1:$port/" 2>/dev/null; then
        # By name over TLS, so the certificate's host name is what gets verified.
        host=127.0.0.1
        [[ "$scheme" == https ]] && host=localhost
        echo "$scheme://$host:$port" >"$dir/endpoint"
        cat "$dir/endpoint"
        exit 0
      fi
      if ! kill -0 "$(cat "$dir/s3rver.pid")" 2>/dev/null; then
        echo "s3rver exited; its log:" >&2
        cat "$dir/s3rver.log" >&2
        rm -f "$dir/s3rver.pid"
        exit 1
      fi
      sleep 0.1
    done
    echo "s3rver did not answer on port $port within 10 s" >&2
    kill "$(cat "$dir/s3rver.pid")" 2>/dev/null || true
    rm -f "$dir/s3rver.pid"
    exit 1
    ;;
  check-signatures)
    [[ -f "$dir/endpoint" ]] || { echo "no s3rver started in $dir" >&2; exit 1; }
    rm -f "$dir/checked_endpoint"
    "${PYTHON:-python3}" "$here/tests/backend/sigv4_checking_proxy.py" "$(cat "$dir/endpoint")" \
      "$dir" >"$dir/proxy.log" 2>&1 &
    echo $! >"$dir/proxy.pid"
    for _ in $(seq 1 100); do
      if [[ -f "$dir/checked_endpoint" ]]; then
        cat "$dir/checked_endpoint"
        exit 0
      fi
      if ! kill -0 "$(cat "$dir/proxy.pid")" 2>/dev/null; then
        echo "the signature-checking proxy exited; its log:" >&2
        cat "$dir/proxy.log" >&2
        rm -f "$dir/proxy.pid"
        exit 1
      fi
      sleep 0.1
    done
    echo "the signature-checking proxy did not start within 10 s" >&2
    exit 1
    ;;
  stop)
    if [[ -f "$dir/proxy.pid" ]]; then
      kill "$(cat "$dir/proxy.pid")" 2>/dev/null || true
      rm -f "$dir/proxy.pid" "$dir/checked_endpoint"
    fi
    if [[ -f "$dir/s3rver.pid" ]]; then
      pid="$(cat "$dir/s3rver.pid")"
      # A test may have left it stopped (SIGSTOP): let it run so it can take the TERM.
      kill -CONT "$pid" 2>/dev/null || true
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
      rm -f "$dir/s3rver.pid" "$dir/endpoint"
    fi
    ;;
  *)
    usage
    ;;
esac
