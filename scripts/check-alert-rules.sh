#!/usr/bin/env bash
# Checks deploy/prometheus/sluice.rules.yml with promtool (Debian's prometheus package): the syntax
# and PromQL (`check rules`), then each alert firing and not firing (`test rules`).
# Exits 77 (skipped under ctest) when promtool is missing: scripts/install-deps.sh test.
set -euo pipefail
cd "$(dirname "$0")/../deploy/prometheus"
if ! command -v promtool >/dev/null; then
  echo "promtool is not installed: run scripts/install-deps.sh test" >&2
  exit 77
fi
promtool check rules sluice.rules.yml
promtool test rules sluice.rules.test.yml
