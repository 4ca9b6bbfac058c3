# Shared by the bench scripts: sourced, not run.

# Exits with an install hint unless every named command exists.
require_tools() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install -y $tool)" >&2; exit 2; }
  done
}

# Prints the absolute path of the sluice binary to measure: $SLUICE_BIN, or a fresh release build.
sluice_binary() {
  local bin
  if [ -n "${SLUICE_BIN:-}" ]; then
    bin=$SLUICE_BIN
  else
    cmake --preset release >/dev/null
    cmake --build build/release -j"${JOBS:-2}" --target sluice >&2
    bin=build/release/sluice
  fi
  realpath "$bin"
}

# bench_work NAME: a scratch folder $work under bench/work and an EXIT trap that stops every pid
# the script adds to $pids (its servers) and removes the folder. A script with more to stop
# defines bench_cleanup_extra, which the trap calls before the folder goes.
bench_work() {
  mkdir -p bench/work
  work=$(mktemp -d "$(pwd)/bench/work/$1.XXXXXX")
  pids=()
  trap bench_cleanup EXIT
}
bench_cleanup() {
  set +e
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  if declare -F bench_cleanup_extra >/dev/null; then bench_cleanup_extra; fi
  rm -rf "$work"
}

# Prints a free loopback port.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# to_ms VALUE: wrk's "812.00us" / "1.23ms" / "1.02s" / "1.5m" in milliseconds.
to_ms() {
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
    else if (v ~ /m$/) { sub(/m$/, "", v); printf "%.3f", v * 60000 }
    else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
    else printf "%s", v }'
}

# Admission limits lifted: a benchmark of the store and the HTTP path, not of the limiter (whose own
# cost is in bench/results/admission.txt; shed answers are in bench/results/shed.md). At the
# defaults one client (wrk, 127.0.0.1) may create 1 paste/s.
# shellcheck disable=SC2034  # used by the scripts that source this file
lifted_limits=(--ip-create-rate 1000000 --ip-create-burst 1000000
               --ip-create-bytes-rate 1e12 --ip-create-bytes-burst 1e12
               --global-create-rate 1000000 --global-create-burst 1000000
               --global-create-bytes-rate 1e12 --global-create-bytes-burst 1e12
               --create-slots 1024 --create-slots-per-client 1024 --create-slots-per-network 1024
               --create-slot-bytes 1073741824
               --ip-read-rate 1000000 --ip-read-burst 1000000)

# wait_for_sluice_url LOG PID: prints the http://127.0.0.1:PORT a starting server logged, or exits.
wait_for_sluice_url() {
  local log=$1 pid=$2 url
  for _ in $(seq 100); do
    url=$(grep -o 'listening on http://127\.0\.0\.1:[0-9]*' "$log" | head -1 | sed 's/listening on //' || true)
    if [ -n "$url" ]; then echo "$url"; return 0; fi
    kill -0 "$pid" 2>/dev/null || { echo "sluice exited:" >&2; tail -n 5 "$log" >&2; exit 1; }
    sleep 0.1
  done
  echo "sluice did not report its address" >&2
  exit 1
}

# paste_of_10k SOURCE OUT: OUT holds SOURCE repeated and cut to 10 KiB: a paste of real lines.
paste_of_10k() {
  python3 - "$1" "$2" <<'PY'
import sys
text = open(sys.argv[1], "rb").read()
while len(text) < 10240:
    text += text
open(sys.argv[2], "wb").write(text[:10240])
PY
}

# start_labelled_sluice LABEL BIN: BIN serving from $work/LABEL (data and log) with the lifted limits
# and no admin listener, its pid added to the caller's pids; sets sluice_url. Not in a subshell:
# the server must be this shell's child to be waited.
# shellcheck disable=SC2154  # work and pids are the calling script's
start_labelled_sluice() {
  local label=$1 bin=$2
  mkdir -p "$work/$label"
  "$bin" serve --listen 127.0.0.1:0 --admin-listen "" --data-dir "$work/$label/data" \
    "${lifted_limits[@]}" >"$work/$label/log" 2>&1 &
  pids+=($!)
  sluice_url=$(wait_for_sluice_url "$work/$label/log" "$!")
}

# create_paste URL FILE [QUERY]: creates a paste of FILE through the API and prints its id.
create_paste() {
  curl -fsS -X POST -H 'Content-Type: text/plain; charset=utf-8' --data-binary @"$2" \
    "$1/api/v1/pastes${3:+?$3}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'
}

# start_lifted_sluice BIN DATA_DIR LOG: starts BIN on an empty DATA_DIR (made afresh) with the
# lifted limits, on free ports (the default admin port may belong to another sluice), and sets
# sluice_pid and sluice_url. Not in a subshell: the server must be this shell's child to be waited.
start_lifted_sluice() {
  local bin=$1 data=$2 log=$3
  rm -rf "$data"
  mkdir -p "$data"
  "$bin" serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --data-dir "$data" \
    "${lifted_limits[@]}" >"$log" 2>&1 &
  sluice_pid=$!
  sluice_url=$(wait_for_sluice_url "$log" "$sluice_pid")
}

# wrk_seconds WRK_OUTPUT -> how long the run took, in seconds ("requests in 10.01s," or, for runs of a
# minute or more, "requests in 1.00m,").
wrk_seconds() {
  local took
  took=$(awk '/ requests in / {d = $4; sub(/,$/, "", d); print d}' "$1")
  awk -v ms="$(to_ms "$took")" 'BEGIN {printf "%.3f", ms / 1000}'
}

# require_created WRK_OUTPUT: a create run whose answers were mostly refusals measured the limiter,
# not the store (bench/wrk/create.lua prints "status CODE COUNT" and "non_201 COUNT"): stop there.
require_created() {
  awk '/ requests in / {n = $1} /^non_201 / {bad = $2}
       END { if (n > 0 && bad > n / 100) {
               printf "%s: %d of %d creates were not 201; a limit is not lifted?\n", FILENAME, bad, n > "/dev/stderr"
               exit 1 } }' "$1"
}

# The kernel log's length now, for host_events_since. A host that pauses and forks a VM mid-run
# (the guest logs "crng reseeded due to virtual machine fork") leaves the rest of the run on
# another machine state: a 10 s wrk run took 43 s and the rates fell by a third afterwards
# (docs/benchmarks.md, "History").
kernel_log_mark() { dmesg 2>/dev/null | wc -l; }

# host_events_since MARK: a report cell naming the VM forks the kernel logged since MARK. The log
# is a ring: if it wrapped during the run, lines are missed, never invented.
host_events_since() {
  local mark=$1 log forks
  if ! log=$(dmesg 2>/dev/null) || [ -z "$log" ]; then
    echo "unknown (dmesg not readable)"
    return
  fi
  forks=$(printf '%s\n' "$log" | tail -n +"$((mark + 1))" | grep -c "virtual machine fork" || true)
  if [ "$forks" -gt 0 ]; then
    echo "**the host forked this VM $forks time(s) during the run: its rounds span two machine states**"
  else
    echo "none logged"
  fi
}

# start_static_nginx DIR ROOT FILE [KEEPALIVE_REQUESTS]: nginx serving ROOT as static files on a
# free loopback port, with Debian's defaults and logs off, its configuration and temp files under
# DIR; waits until ROOT/FILE is served and sets nginx_pid and nginx_url. The reference a sluice read
# is compared with in the same run (bench/run_embedded_bench.sh, bench/read_pairs.sh,
# bench/run_create_bench.sh, bench/hot_read_vs_nginx.sh). It keeps its connections as sluice does
# (sluice has no per-connection request cap): at nginx's default keepalive_requests (1,000) each
# wrk connection reconnects about once a second, so the two would not do the same work. Measured
# side by side the reconnects cost nginx nothing visible (bench/results/hot-read.md, OLD_NGINX=1),
# but a ratio should not rest on that. KEEPALIVE_REQUESTS=1000 gives the default back.
# /nginx_status is stub_status (its "accepts" counts connections).
# Not in a subshell, so that nginx is this shell's child; stop it with kill -QUIT.
start_static_nginx() {
  local dir=$1 root=$2 file=$3 keepalive_requests=${4:-1000000} port
  port=$(free_port)
  mkdir -p "$dir/logs" "$dir/tmp"
  cat >"$dir/nginx.conf" <<NGINX
# Generated by bench/lib.sh (start_static_nginx): Debian's defaults for a static file, logs off,
# connections kept (keepalive_requests $keepalive_requests).
user root;
worker_processes auto;
daemon off;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  types { text/plain txt; }
  default_type application/octet-stream;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  keepalive_requests $keepalive_requests;
  keepalive_timeout 300s;
  server {
    listen 127.0.0.1:$port;
    root $root;
    location = /nginx_status { stub_status; }
  }
}
NGINX
  nginx -p "$dir" -c "$dir/nginx.conf" &
  nginx_pid=$!
  nginx_url="http://127.0.0.1:$port"
  for _ in $(seq 100); do
    curl -fsS -o /dev/null "$nginx_url/$file" 2>/dev/null && return 0
    kill -0 "$nginx_pid" 2>/dev/null || { echo "nginx exited" >&2; exit 1; }
    sleep 0.1
  done
  echo "nginx did not serve $nginx_url/$file" >&2
  exit 1
}

# write_code_corpus FILE: this repository's own sources (C++, Python, shell) in one file, for
# bench/wrk/create.lua's CORPUS: pastes as compressible as real ones are (bench/README.md, BODY).
write_code_corpus() {
  find src include tests -type f \( -name '*.cc' -o -name '*.h' -o -name '*.py' -o -name '*.sh' \) \
    -print0 | sort -z | xargs -0 cat >"$1"
}
