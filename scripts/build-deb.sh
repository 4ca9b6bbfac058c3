#!/usr/bin/env bash
# `make deb`: the Debian package of a release build (debhelper; debian/rules), with its -dbgsym
# package, into build/deb/, then lintian's verdict on it. Extra arguments go to dpkg-buildpackage.
# SLUICE_DEB_PREBUILT=DIR packages an existing CMake build dir instead of compiling (debian/rules);
# SLUICE_DEB_OUT=DIR puts the packages elsewhere; SLUICE_DEB_LINTIAN=0 skips lintian.
set -euo pipefail
cd "$(dirname "$0")/.."

out="${SLUICE_DEB_OUT:-build/deb}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
version="$(dpkg-parsechangelog -S Version)"
arch="$(dpkg-architecture -qDEB_HOST_ARCH)"
project_version="$(sed -n 's/^project(sluice VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
if [ "${version%%-*}" != "$project_version" ]; then
  echo "debian/changelog says $version but CMakeLists.txt says $project_version: add a changelog" \
    "entry (dch -v $project_version)" >&2
  exit 1
fi

# dpkg-buildpackage writes next to the source tree by default; everything goes to $out instead.
export SLUICE_DEB_DESTDIR="$out"
src="$PWD"
if [ -n "${SLUICE_DEB_PREBUILT:-}" ]; then
  # Packaging a finished build needs only debian/: a scratch copy of it keeps debhelper's files
  # out of the tree, so a test may run beside a `make deb`.
  SLUICE_DEB_PREBUILT="$(cd "$SLUICE_DEB_PREBUILT" && pwd)"
  export SLUICE_DEB_PREBUILT
  src="$(mktemp -d "${TMPDIR:-/tmp}/sluice-deb.XXXXXX")"
  trap 'rm -rf "$src"' EXIT
  cp -rL debian "$src/debian"
fi
(cd "$src" && nice -n 10 dpkg-buildpackage -b -uc -us -j"${JOBS:-2}" \
  --buildinfo-option=-u"$out" --changes-option=-u"$out" \
  --buildinfo-file="$out/sluice_${version}_${arch}.buildinfo" \
  --changes-file="$out/sluice_${version}_${arch}.changes" "$@")
if [ -z "${SLUICE_DEB_PREBUILT:-}" ]; then
  # debhelper's bookkeeping stays out of the tree (the next build's clean would remove it anyway).
  rm -rf debian/sluice debian/sluice-dbgsym debian/.debhelper debian/files debian/*.substvars \
    debian/*.debhelper \
    debian/debhelper-build-stamp debian/*.debhelper.log
fi

deb="$out/sluice_${version}_${arch}.deb"
echo "built $deb"
if [ "${SLUICE_DEB_LINTIAN:-1}" != 0 ] && command -v lintian >/dev/null; then
  # Errors fail the build; warnings are printed for a person to judge.
  lintian --fail-on error "$deb"
fi
