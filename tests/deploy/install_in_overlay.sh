#!/usr/bin/env bash
# Installs a .deb as `apt install ./sluice_*.deb` would on this Debian 12 machine, without touching
# it: in a private mount namespace, / is overlaid with a scratch upper layer and the package is
# installed, checked and purged in a chroot of that overlay. Everything it writes goes to
# WORK/upper, which the caller removes. Run as root, under `unshare --mount` (the caller does).
# Usage: install_in_overlay.sh DEB WORK
# Prints "key: value" lines the test reads; exits non-zero at the first step that fails.
set -euo pipefail
deb="$1"
work="$2"
root="$work/root"
mkdir -p "$work/upper" "$work/overlay-work" "$root"
mount --make-rprivate /
mount -t overlay overlay -o "lowerdir=/,upperdir=$work/upper,workdir=$work/overlay-work" "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"
mount -t tmpfs tmpfs "$root/run"
mount -t tmpfs tmpfs "$root/tmp"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 "$@"; }

cp "$deb" "$root/tmp/sluice.deb"
# No systemd runs here (no /run/systemd/system), so the postinst enables the unit but starts
# nothing, as in a container image build.
echo "step: install"
in_root dpkg -i /tmp/sluice.deb
echo "status: $(in_root dpkg-query -W -f='${Status} ${Version}' sluice)"
echo "user: $(in_root getent passwd sluice)"
echo "group: $(in_root getent group sluice | cut -d: -f1)"
echo "data_dir: $(in_root stat -c '%U:%G %a' /var/lib/sluice)"
echo "conffiles: $(in_root dpkg-query -W -f='${Conffiles}' sluice | tr '\n' ' ')"
echo "enabled: $(in_root readlink /etc/systemd/system/multi-user.target.wants/sluice.service || true)"
echo "binary: $(in_root /usr/bin/sluice --version)"
echo "man: $(in_root man -w sluice)"

echo "step: verify"
in_root systemd-analyze verify /lib/systemd/system/sluice.service
echo "verify: ok"
in_root systemd-analyze security --offline=yes /lib/systemd/system/sluice.service \
  > "$work/security.txt" 2>&1 || true
echo "security: $(tail -1 "$work/security.txt")"

echo "step: config"
# The shipped configuration, every key commented out, is accepted as it is.
in_root setpriv --reuid=sluice --regid=sluice --init-groups \
  /usr/bin/sluice config --check /etc/sluice/sluice.toml

echo "step: serve"
# As the unit runs it: the service user, the working directory and the configuration of the unit,
# on free ports; it must create its data under /var/lib/sluice and stop cleanly on SIGTERM.
# Not through in_root (a function, so a subshell in the background): $! must be the server's pid.
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 \
  sh -c 'cd /var/lib/sluice && exec setpriv --reuid=sluice --regid=sluice --init-groups env \
  SLUICE_CONFIG=/etc/sluice/sluice.toml SLUICE_LISTEN=127.0.0.1:0 SLUICE_ADMIN_LISTEN=127.0.0.1:0 \
  /usr/bin/sluice serve' > "$work/serve.log" 2>&1 &
serve=$!
trap 'kill -KILL "$serve" 2>/dev/null || true' EXIT
for _ in $(seq 1 200); do
  grep -q "listening on" "$work/serve.log" && break
  kill -0 "$serve" 2>/dev/null || break
  sleep 0.1
done
grep -q "listening on" "$work/serve.log" || { cat "$work/serve.log"; exit 1; }
echo "data: $(in_root stat -c '%U %n' /var/lib/sluice/sluice-data/meta.db)"
kill -TERM "$serve"
wait "$serve" && echo "serve_exit: 0" || echo "serve_exit: $?"

echo "step: purge"
in_root dpkg --purge sluice
echo "after_purge: $(in_root sh -c 'ls -d /var/lib/sluice /etc/sluice /usr/bin/sluice 2>/dev/null | tr "\n" " "')"
echo "done: ok"
