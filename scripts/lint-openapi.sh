#!/usr/bin/env bash
# Lints docs/openapi.yaml with @redocly/cli (npm test tooling; redocly.yaml holds the rules).
# Exits 77 (skipped under ctest) when the npm tooling is not installed: scripts/install-deps.sh test.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! [ -x node_modules/.bin/redocly ] || ! command -v node >/dev/null; then
  echo "@redocly/cli is not installed: run scripts/install-deps.sh test" >&2
  exit 77
fi
# No telemetry and no update check: the tests never use the network beyond loopback.
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
exec node_modules/.bin/redocly lint --format=stylish docs/openapi.yaml
