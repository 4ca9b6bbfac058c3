#!/bin/sh
# Runs one browser suite with node's test runner; exit 77 (skipped) without node, Chromium,
# playwright-core or axe-core, so a machine without the browser tooling still runs every other test.
set -e
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
command -v node >/dev/null 2>&1 || { echo "node not found: skipped"; exit 77; }
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || { echo "chromium not found: skipped"; exit 77; }
for module in playwright-core axe-core; do
  [ -d "$root/node_modules/$module" ] || {
    echo "$module not installed (PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci): skipped"; exit 77; }
done
exec node --test --test-reporter=spec "$1"
