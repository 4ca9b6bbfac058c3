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
