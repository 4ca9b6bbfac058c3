#!/usr/bin/env bash
# Installs what sluice needs to build, test or benchmark, and only what is missing: Debian packages
# (as root) and, for test and bench, the npm test tooling pinned by package-lock.json.
# Usage: scripts/install-deps.sh [build|test|bench|lab|hunt|fuzz|deb|image]   (each includes build)
set -euo pipefail
cd "$(dirname "$0")/.."

profile="${1:-build}"
packages=(g++ cmake make pkg-config ccache mold python3
  libboost1.74-dev libsqlite3-dev libssl-dev libfmt-dev libspdlog-dev nlohmann-json3-dev
  libtomlplusplus-dev libcli11-dev libpq-dev libsource-highlight-dev source-highlight libsystemd-dev liblz4-dev
  libcmark-gfm-dev libcmark-gfm-extensions-dev libdtl-dev
  libjemalloc-dev zlib1g-dev libcurl4-openssl-dev libgmime-3.0-dev
  node-qrcode-generator)
# libgmime-3.0-dev: `sluice admin notice --email` reads an abuse e-mail's MIME (src/notice/email.cc).
# python3: tools/compile_templates.py compiles the page templates (web/templates) at build time.
# node-qrcode-generator: the share link's QR code is drawn in the browser by Debian's library, which
# the build embeds from /usr/share/nodejs like the files in web/static (docs/web.md).
# make deb (scripts/build-deb.sh): debhelper builds the package, lintian judges it.
deb_tools=(dpkg-dev debhelper lintian)
# The real servers the tests start (each test starts and stops its own) and the browser of the UI
# tests. Node.js runs test tooling only (s3rver, playwright-core); the browser is Debian's chromium.
# prometheus brings promtool, which lints the live /metrics (tests/integration/test_metrics_format.py)
# and checks and unit-tests the alert rules (scripts/check-alert-rules.sh).
# slowhttptest runs the slow-headers, slow-body and slow-read attacks (tests/integration/test_slowhttp.py);
# pastebinit and wget are clients people already have (tests/integration/test_clients.py); jq reads
# the JSON answers in docs/usage.md's examples, which tests/docs/test_usage_examples.py runs.
# The packaging test (tests/deploy/test_debian_package.py) builds the .deb with deb_tools; strace
# lists the system calls the server makes, to hold them to the unit's SystemCallFilter. pgbouncer:
# the PostgreSQL backend suite runs once more through it in transaction pooling mode. patroni and
# etcd-server: the HA stack's Patroni variant (scripts/testenv/patroni.sh, tests/stack/
# test_stack_ha.py) and the chaos lab's "primary fails over". radosgw, ceph-mon, ceph-osd,
# ceph-mgr and ceph-common: a one-node Ceph cluster and its RADOS Gateway, the real S3 the S3
# suite also runs against (scripts/testenv/ceph-rgw.sh, tests/integration/test_ceph_rgw.py).
# The image and the compose file (make image, scripts/build-image.sh; tests/deploy/test_image.py
# and test_compose.py): mmdebstrap builds the base from Debian's packages (eatmydata speeds it up),
# since no image registry is reachable; podman builds and runs it, on runc (crun refuses these
# machines' hybrid cgroups) with netavark and aardvark-dns (the compose services find each other
# by name) and iptables, which netavark 1.4 sets its bridge's NAT up with (without it every RUN
# step and container fails: "netavark: No such file or directory"; a machine that had it by
# chance hid that); podman-compose runs the compose file. The Kubernetes test uses kubectl's Kustomize (v4
# or later: Debian 12's kubernetes-client has v2, so it is not installed here) and npm's
# kubernetes-models.
# make test runs both, so the test profile has these too.
# gettext: the translations' checks (tests/web/test_catalogs.py: msgfmt --check, msgcmp) and
# tools/extract_messages.py's msgmerge; the build reads the catalogs itself (tools/po.py).
image_tools=(podman runc netavark aardvark-dns iptables mmdebstrap eatmydata podman-compose)
test_tools=(libgtest-dev libgmock-dev libbenchmark-dev python3 curl sqlite3
  postgresql pgbouncer redis-server redis-sentinel varnish nginx-light chromium python3-botocore prometheus slowhttptest
  pastebinit wget jq "${deb_tools[@]}" strace patroni etcd-server gettext "${image_tools[@]}"
  radosgw ceph-mon ceph-osd ceph-mgr ceph-common)
case "$profile" in
  build) ;;
  test) packages+=("${test_tools[@]}") ;;
  bench) packages+=("${test_tools[@]}" wrk) ;;
  # The chaos lab's plots: Debian's matplotlib, for /usr/bin/python3.
  lab) packages+=("${test_tools[@]}" python3-matplotlib) ;;
  # make flake-hunt (tests/flake_hunt.py): stress-ng is the CPU hog and the disk writer of a loaded run.
  hunt) packages+=("${test_tools[@]}" stress-ng) ;;
  fuzz) packages+=(clang libclang-rt-14-dev) ;;
  deb) packages+=("${deb_tools[@]}") ;;
  image) packages+=("${deb_tools[@]}" "${image_tools[@]}") ;;
  *) echo "usage: $0 [build|test|bench|lab|hunt|fuzz|deb|image]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "$profile" = test ] || [ "$profile" = bench ] || [ "$profile" = lab ] || [ "$profile" = hunt ]; then
  command -v npm >/dev/null || missing+=(nodejs npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing Debian packages: ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ "$profile" = test ] || [ "$profile" = bench ] || [ "$profile" = lab ] || [ "$profile" = hunt ]; then
  # No browser download: the browser tests drive Debian's /usr/bin/chromium.
  if ! [ -d node_modules/s3rver ] || ! [ -d node_modules/playwright-core ] ||
    ! [ -d node_modules/hastebin-gen ] || ! [ -d node_modules/@redocly/cli ] ||
    ! [ -d node_modules/eslint ] || ! [ -d node_modules/prettier ] || ! [ -d node_modules/jsqr ] ||
    ! [ -d node_modules/kubernetes-models ] ||
    [ package-lock.json -nt node_modules/.package-lock.json ]; then
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
  fi
fi
