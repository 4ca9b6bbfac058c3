#!/usr/bin/env bash
# Lints the browser's own files (web/static): ESLint on the JavaScript (eslint.config.mjs) and
# Prettier's format check on the JavaScript and CSS (.prettierrc.json). Fix the format with
#   node_modules/.bin/prettier --write web/static
# Exits 77 (skipped under ctest) when the npm tooling is not installed: scripts/install-deps.sh test.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! [ -x node_modules/.bin/eslint ] || ! [ -x node_modules/.bin/prettier ] ||
  ! command -v node >/dev/null; then
  echo "eslint and prettier are not installed: run scripts/install-deps.sh test" >&2
  exit 77
fi
status=0
node_modules/.bin/eslint --max-warnings 0 web/static || status=1
node_modules/.bin/prettier --check web/static || status=1
exit "$status"
