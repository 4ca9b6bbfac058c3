#!/usr/bin/env bash
# Installs the Debian packages sluice needs to build, test or benchmark, and only those missing.
# Usage: scripts/install-deps.sh [build|test|bench|fuzz]   (each includes build)
set -euo pipefail

profile="${1:-build}"
packages=(g++ cmake make pkg-config ccache
  libboost1.74-dev libsqlite3-dev libssl-dev libfmt-dev libspdlog-dev nlohmann-json3-dev
  libtomlplusplus-dev libcli11-dev)
case "$profile" in
  build) ;;
  test) packages+=(libgtest-dev libgmock-dev libbenchmark-dev python3 curl sqlite3) ;;
  bench) packages+=(libgtest-dev libgmock-dev libbenchmark-dev python3 curl sqlite3 wrk nginx-light) ;;
  fuzz) packages+=(clang libclang-rt-14-dev) ;;
  *) echo "usage: $0 [build|test|bench|fuzz]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "missing Debian packages: ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
