"""What the image and compose tests share: podman as these machines need it, the image built from
the build under test, and HTTP to a published port.

podman here needs runc (crun refuses the machine's hybrid cgroups) and limits no higher than this
process has (raising them is not permitted), which is the harness's business, not the user's.
"""

import http.client
import json
import os
import resource
import shutil
import subprocess
import unittest

from package_under_test import deb_under_test
from sluice_harness import wait_until  # noqa: F401  (the suites import it from here)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
# Tagged apart from `make image`'s localhost/sluice, so a test never replaces a person's image.
TEST_IMAGE = "localhost/sluice-test"


def run(cmd, timeout=120, check=False, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {result.returncode}:\n"
                             f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result


def podman_env():
    return dict(os.environ, PODMAN_RUNTIME="runc")


def podman(*args, timeout=120, check=False):
    return run(["podman", "--runtime", "runc", *args], timeout=timeout, check=check)


def ulimit_args():
    """--ulimit flags no higher than this machine lets a container have: podman's defaults are
    above them, and runc may not raise a limit (a nproc of 65536 was refused here, 20000 not)."""
    nofile = min(v for v in resource.getrlimit(resource.RLIMIT_NOFILE) + (16384,)
                 if v != resource.RLIM_INFINITY)
    return ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", "nproc=4096:4096"]


def require_podman(*tools):
    if os.geteuid() != 0:
        raise unittest.SkipTest("needs root (podman's networks and the .deb's build)")
    missing = [t for t in ("podman", "runc", "mmdebstrap", "dpkg-buildpackage", *tools)
               if shutil.which(t) is None]
    if missing:
        raise unittest.SkipTest(f"missing {' '.join(missing)}: scripts/install-deps.sh image")


def build_image():
    """Builds TEST_IMAGE from the build under test: its .deb, the one the package test installs
    (package_under_test.py), on scripts/build-image.sh's base, which is kept between runs.
    Returns the image's name and the build's last line (its size and time)."""
    deb, folder, owned = deb_under_test()
    try:
        # A cold machine builds the base first (mmdebstrap): minutes.
        built = run([os.path.join(REPO, "scripts", "build-image.sh"), deb],
                    env=dict(podman_env(), SLUICE_IMAGE=TEST_IMAGE), cwd=REPO, timeout=1800,
                    check=True)
    finally:
        if owned:
            shutil.rmtree(folder, ignore_errors=True)
    return f"{TEST_IMAGE}:latest", built.stdout.strip().splitlines()[-1]


class Http:
    """Plain HTTP/1.1 to 127.0.0.1:port, one connection per request."""

    def __init__(self, port):
        self.port = port

    def request(self, method, path, body=None, headers=None, timeout=10):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            res = conn.getresponse()
            return res.status, res.read()
        finally:
            conn.close()

    def create(self, text):
        status, body = self.request("POST", "/api/v1/pastes", body=text.encode(),
                                    headers={"Content-Type": "text/plain"})
        if status != 201:
            raise AssertionError(f"create answered {status}: {body[:300]!r}")
        return json.loads(body)["id"]

    def raw(self, paste_id):
        return self.request("GET", f"/raw/{paste_id}")

    def healthy(self):
        try:
            return self.request("GET", "/healthz", timeout=2)[0] == 200
        except OSError:
            return False
