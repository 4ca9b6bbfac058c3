#!/usr/bin/env bash
# `make image`: the sluice image (Containerfile) from a .deb, on a base built here from Debian's
# packages, since no image registry need be reachable: mmdebstrap makes the root filesystem, podman
# imports it. Nothing downloads a binary; apt fetches Debian's packages as for any install.
#
#   scripts/build-image.sh [DEB]       the image, tagged $SLUICE_IMAGE (default localhost/sluice)
#                                      :VERSION and :latest; DEB defaults to build/deb/'s for this
#                                      version (make deb)
#   scripts/build-image.sh services    the image of the compose file's PostgreSQL, Redis and nginx
#                                      (deploy/compose/compose.yaml), tagged $SLUICE_SERVICES_IMAGE
#
# --format docker: the OCI format has no HEALTHCHECK.
# A base is kept between runs under a tag that is the hash of what it was built from (the Debian
# release, its package list, the mmdebstrap options), so a second build redoes only the top layer.
# The sluice base holds the .deb's dependencies (read from its Depends), so the Containerfile's
# install needs no network either; the same Containerfile builds FROM the official
# debian:bookworm-slim elsewhere. PODMAN_RUNTIME (e.g. runc) picks podman's OCI runtime.
set -euo pipefail
cd "$(dirname "$0")/.."

release=bookworm
image="${SLUICE_IMAGE:-localhost/sluice}"
services_image="${SLUICE_SERVICES_IMAGE:-localhost/sluice-services:$release}"
podman=(podman ${PODMAN_RUNTIME:+--runtime "$PODMAN_RUNTIME"})
# mmtarfilter (the path excludes) is a Python script run once per package: Debian's python3, not
# whichever a version manager puts first on PATH.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
# What debian:bookworm-slim leaves out (debuerreotype's slimming): manuals, documentation but the
# copyright files, translations. They stay out of later installs too (dpkg.cfg.d in the base).
# merged-usr: /bin, /lib and /sbin as links into /usr, as Debian 12 has them, made by the hook rather
# than by the usrmerge package (which would bring in perl). eatmydata: dpkg's fsyncs skipped while
# the base is built (a third of its time), none in the image.
mmdebstrap_options=(--variant=minbase --format=tar
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr --hook-dir=/usr/share/mmdebstrap/hooks/eatmydata
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*')

# base NAME PACKAGE...: prints the tag of a base with these packages, building it if missing.
base() {
  local name=$1
  shift
  local key packages tag
  packages=$(printf '%s\n' "$@" | sort -u | paste -sd, -)
  key=$(printf '%s\n' "$release" "$packages" "${mmdebstrap_options[*]}" | sha256sum | cut -c1-16)
  tag="localhost/$name:$release-$key"
  # One build of a base at a time: `make test` starts the services base in the background while
  # it compiles, and the compose test may ask for it before that is done; it then waits here and
  # finds it built. (This runs in a $(...) subshell: the lock goes with it.)
  exec {lock}>"${TMPDIR:-/tmp}/sluice-base-$key.lock"
  flock "$lock"
  if "${podman[@]}" image exists "$tag"; then
    echo "base $tag is built (from: $packages)" >&2
  else
    echo "building base $tag with mmdebstrap (from: $packages)..." >&2
    local tar
    tar=$(mktemp "${TMPDIR:-/tmp}/sluice-base.XXXXXX.tar")
    if ! nice -n 10 mmdebstrap "${mmdebstrap_options[@]}" --include="$packages" "$release" "$tar" >&2 ||
      ! "${podman[@]}" import --change 'CMD ["bash"]' \
        --message "mmdebstrap $release: $packages" "$tar" "$tag" >/dev/null; then
      rm -f "$tar"
      exit 1
    fi
    rm -f "$tar"
  fi
  echo "$tag"
}

# The first alternative of each of the .deb's dependencies, except those an extra package the
# Containerfile installs already satisfies (the standalone sysusers for systemd).
deb_dependencies() {
  local deb=$1
  shift
  dpkg-deb -f "$deb" Pre-Depends Depends | sed 's/^[A-Za-z-]*: //' | tr ',' '\n' |
    while read -r group; do
      [ -n "$group" ] || continue
      local satisfied=0 alt
      for alt in $(echo "$group" | sed 's/([^)]*)//g; s/:any//g' | tr '|' ' '); do
        for extra in "$@"; do [ "$alt" = "$extra" ] && satisfied=1; done
      done
      [ "$satisfied" = 1 ] || echo "$group" | sed 's/([^)]*)//g; s/|.*//; s/:any//; s/ //g'
    done
}

if [ "${1:-}" = services ]; then
  started=$(date +%s)
  # One image for the three services of the compose file, each started with its own command.
  tag=$(base sluice-services-base postgresql redis-server nginx-light)
  "${podman[@]}" tag "$tag" "$services_image"
  echo "built $services_image in $(($(date +%s) - started)) s"
  exit 0
fi

started=$(date +%s)
version=$(dpkg-parsechangelog -S Version)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
deb="${1:-build/deb/sluice_${version}_${arch}.deb}"
[ -f "$deb" ] || { echo "no package at $deb: make deb (or give the .deb's path)" >&2; exit 1; }
runtime_packages=$(sed -n 's/^ARG RUNTIME_PACKAGES="\(.*\)"$/\1/p' Containerfile)
[ -n "$runtime_packages" ] || { echo "Containerfile: no ARG RUNTIME_PACKAGES" >&2; exit 1; }
# shellcheck disable=SC2086
base_tag=$(base sluice-base $runtime_packages $(deb_dependencies "$deb" $runtime_packages))

context=$(mktemp -d "${TMPDIR:-/tmp}/sluice-image.XXXXXX")
trap 'rm -rf "$context"' EXIT
cp "$deb" "$context/"
package_version=$(dpkg-deb -f "$deb" Version)
previous=$("${podman[@]}" image inspect --format '{{.Id}}' "$image:latest" 2>/dev/null || true)
"${podman[@]}" build --pull=never --format docker -f Containerfile --build-arg "BASE=$base_tag" \
  --label "org.opencontainers.image.version=$package_version" \
  --label "org.opencontainers.image.source=sluice $(git describe --always --dirty 2>/dev/null || echo unknown)" \
  -t "$image:$package_version" -t "$image:latest" "$context" >&2
# The image this one replaced under the tag, once nothing else names it: make test builds one for
# every binary it tests (tests/deploy/podman_harness.py), and untagged images would pile up in the
# store run after run. One a container still uses stays (podman refuses).
if [ -n "$previous" ]; then
  names=$("${podman[@]}" image inspect --format '{{len .RepoTags}}' "$previous" 2>/dev/null || true)
  [ "$names" != 0 ] || "${podman[@]}" image rm "$previous" >/dev/null 2>&1 || true
fi
size=$("${podman[@]}" image inspect --format '{{.Size}}' "$image:latest")
echo "built $image:$package_version ($((size / 1000000)) MB) in $(($(date +%s) - started)) s"
