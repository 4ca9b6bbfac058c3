"""The .deb of the build under test, made once for every suite that needs it.

The package test (test_debian_package.py), the image test and the compose test (which install it
in the image, scripts/build-image.sh) all need the same package: SLUICE_BIN's build dir packaged
through debian/ by scripts/build-deb.sh with SLUICE_DEB_PREBUILT, as `make deb` packages a release
build. Under ctest the fixture `deb` builds it once into a folder it empties first
(CMakeLists.txt, deploy.deb_package: `python3 package_under_test.py DIR`) and names that folder in
SLUICE_DEB_DIR; a suite run by hand without it builds its own into a temporary folder.

Both are keyed by the build they package: the fixture runs before the suites of each ctest run,
so a package from an earlier binary is never used.
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
TOOLS = ("dpkg-buildpackage", "dh", "dpkg-deb")


def build_dir():
    binary = os.environ.get("SLUICE_BIN") or os.path.join(REPO, "build", "dev", "sluice")
    if not os.path.isfile(binary):
        raise unittest.SkipTest(f"no sluice binary at {binary}")
    return os.path.dirname(os.path.abspath(binary))


def build(out):
    """Packages the build under test into out (sluice_*.deb and its -dbgsym); returns the .deb.
    lintian runs in `make deb`: here the package is judged by what it installs, and the build
    dependencies are those of a compile this packaging does not do."""
    built_dir = build_dir()
    # sluice.1, sluice.toml and the completions come from the binary (CMakeLists.txt,
    # sluice_reference).
    _run(["cmake", "--build", built_dir, "--target", "sluice_reference"])
    env = dict(os.environ, SLUICE_DEB_PREBUILT=built_dir, SLUICE_DEB_OUT=out,
               SLUICE_DEB_LINTIAN="0")
    _run([os.path.join(REPO, "scripts", "build-deb.sh"), "--no-check-builddeps"], env=env)
    return _the_deb(out)


def deb_under_test():
    """(path of the .deb, its folder, whether the caller owns the folder): the fixture's, or one
    built now into a temporary folder the caller removes."""
    shared = os.environ.get("SLUICE_DEB_DIR")
    if shared:
        return _the_deb(shared), shared, False
    out = tempfile.mkdtemp(prefix="sluice-deb-test-")
    try:
        return build(out), out, True
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise


def _the_deb(folder):
    debs = glob.glob(os.path.join(folder, "sluice_*.deb"))
    if len(debs) != 1:
        listing = os.listdir(folder) if os.path.isdir(folder) else "no such folder"
        raise AssertionError(f"expected one sluice_*.deb in {folder}: {listing}")
    return debs[0]


def _run(cmd, env=None):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {result.returncode}:\n"
                             f"{result.stdout[-4000:]}{result.stderr[-4000:]}")


def main(out):
    # Emptied first: a failed build leaves no package of an earlier binary for the suites to use.
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    # The suites that need the package skip for the same reasons (their require_* checks).
    if os.geteuid() != 0:
        print("no package: its suites need root")
        return 0
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        print(f"no package: missing {' '.join(missing)} (scripts/install-deps.sh test)")
        return 0
    print(f"built {build(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
