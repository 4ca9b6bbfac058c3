"""The Debian package, built from the build under test and installed without touching this machine.

`make deb` builds a release build first; to stay within a minute this packages the build of
SLUICE_BIN instead, through the same debian/ (scripts/build-deb.sh with SLUICE_DEB_PREBUILT), once
for this suite and the image's (package_under_test.py, ctest's fixture `deb`). The
package's contents and control data are checked with dpkg-deb, then it is installed, checked, run
and purged in a chroot over an overlay of / in a private mount namespace
(tests/deploy/install_in_overlay.sh), and the unit is held to `systemd-analyze verify` and to a
`systemd-analyze security` exposure of 2.0 or better. A system call the server makes that the
unit's SystemCallFilter would refuse fails the test too (strace lists them).
"""

import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sluice_harness import SluiceServer  # noqa: E402
from package_under_test import deb_under_test  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
UNIT = os.path.join(REPO, "deploy", "systemd", "sluice.service")
MAX_EXPOSURE = 2.0


def project_version():
    with open(os.path.join(REPO, "CMakeLists.txt")) as f:
        return re.search(r"project\(sluice VERSION ([0-9.]+)", f.read()).group(1)


def run(cmd, timeout=300, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def require_tools():
    if os.geteuid() != 0:
        raise unittest.SkipTest("needs root (dpkg in a chroot over an overlay of /)")
    missing = [t for t in ("dpkg-buildpackage", "dh", "systemd-analyze", "unshare", "dpkg-deb")
               if shutil.which(t) is None]
    if missing:
        raise unittest.SkipTest(f"missing {' '.join(missing)}: scripts/install-deps.sh test")


def exposure(report):
    match = re.search(r"Overall exposure level for \S+: ([0-9.]+)", report)
    if not match:
        raise AssertionError(f"no exposure level in:\n{report}")
    return float(match.group(1))


class DebianPackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_tools()
        # The package of the build under test, made once for this suite and the image's
        # (package_under_test.py): a failed build fails here with its output.
        cls.deb, cls.out, cls.owns_out = deb_under_test()

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "owns_out", False):
            shutil.rmtree(cls.out, ignore_errors=True)

    def test_the_package_holds_the_service_files(self):
        listing = run(["dpkg-deb", "-c", self.deb]).stdout
        paths = {line.split()[-1] for line in listing.splitlines()}
        for path in ("./usr/bin/sluice", "./usr/share/man/man1/sluice.1.gz",
                     "./etc/sluice/sluice.toml", "./lib/systemd/system/sluice.service",
                     "./usr/lib/sysusers.d/sluice.conf", "./usr/lib/tmpfiles.d/sluice.conf",
                     "./usr/share/doc/sluice/copyright",
                     "./usr/share/doc/sluice/examples/sluice.toml",
                     "./usr/share/bash-completion/completions/sluice",
                     "./usr/share/zsh/vendor-completions/_sluice"):
            self.assertIn(path, paths, listing)
        self.assertFalse([p for p in paths if p.startswith("./usr/local")], listing)
        # Stripped: the debug information went to the -dbgsym package.
        self.assertTrue(glob.glob(os.path.join(self.out, "sluice-dbgsym_*.*deb")),
                        os.listdir(self.out))
        extracted = tempfile.mkdtemp(prefix="sluice-deb-x-")
        self.addCleanup(shutil.rmtree, extracted, ignore_errors=True)
        run(["dpkg-deb", "-x", self.deb, extracted], check=True)
        sections = run(["readelf", "-S", os.path.join(extracted, "usr/bin/sluice")]).stdout
        self.assertNotIn(".debug_info", sections)
        # The packaged bash completion is the binary's and completes its commands.
        completion = os.path.join(extracted, "usr/share/bash-completion/completions/sluice")
        completed = run(["bash", "-c", f'source "{completion}"; COMP_WORDS=(sluice se); '
                         'COMP_CWORD=1; _sluice; echo "${COMPREPLY[@]}"'])
        self.assertEqual(completed.stdout.split(), ["serve"], completed.stderr)
        # The unit is the repository's, unchanged for the /usr prefix.
        with open(os.path.join(extracted, "lib/systemd/system/sluice.service")) as f, \
                open(UNIT) as g:
            self.assertEqual(f.read(), g.read())

    def test_control_data(self):
        info = run(["dpkg-deb", "-I", self.deb]).stdout
        self.assertRegex(info, r"(?m)^ Package: sluice$")
        self.assertRegex(info, rf"(?m)^ Version: {re.escape(project_version())}$")
        depends = re.search(r"(?m)^ Depends: (.*)$", info).group(1)
        for needed in ("libsource-highlight-common", "libsystemd0", "libpq5",
                       "systemd | systemd-standalone-sysusers | systemd-sysusers"):
            self.assertIn(needed, depends)
        control = tempfile.mkdtemp(prefix="sluice-deb-ctl-")
        self.addCleanup(shutil.rmtree, control, ignore_errors=True)
        run(["dpkg-deb", "-e", self.deb, control], check=True)
        with open(os.path.join(control, "conffiles")) as f:
            self.assertEqual(f.read().split(), ["/etc/sluice/sluice.toml"])
        with open(os.path.join(control, "postinst")) as f:
            postinst = f.read()
        for step in ("systemd-sysusers", "systemd-tmpfiles", "deb-systemd-helper"):
            self.assertIn(step, postinst)

    def test_installed_checked_run_and_purged_in_an_overlay(self):
        work = tempfile.mkdtemp(prefix="sluice-deb-root-")
        self.addCleanup(shutil.rmtree, work, ignore_errors=True)
        result = run(["unshare", "--mount", os.path.join(HERE, "install_in_overlay.sh"),
                      self.deb, work], timeout=240)
        report = dict(line.split(": ", 1) for line in result.stdout.splitlines()
                      if ": " in line)
        detail = f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
        if result.returncode != 0 and "step" not in report and "mount" in result.stderr:
            raise unittest.SkipTest(f"cannot overlay / here: {result.stderr.strip()}")
        self.assertEqual(report.get("done"), "ok", detail)
        self.assertEqual(report["status"], f"install ok installed {project_version()}", detail)
        user = report["user"].split(":")
        self.assertEqual((user[0], user[5], user[6]),
                         ("sluice", "/var/lib/sluice", "/usr/sbin/nologin"), detail)
        self.assertLess(int(user[2]), 1000, "a system user")
        self.assertEqual(report["group"], "sluice")
        self.assertEqual(report["data_dir"], "sluice:sluice 750")
        self.assertIn("/etc/sluice/sluice.toml", report["conffiles"])
        self.assertEqual(report["enabled"], "/lib/systemd/system/sluice.service")
        self.assertEqual(report["binary"], f"sluice {project_version()}")
        self.assertEqual(report["verify"], "ok", detail)
        self.assertEqual(report["data"], "sluice /var/lib/sluice/sluice-data/meta.db", detail)
        self.assertEqual(report["serve_exit"], "0", detail)
        self.assertEqual(report["after_purge"].strip(), "", detail)
        with open(os.path.join(work, "security.txt")) as f:
            security = f.read()
        score = exposure(security)
        print(f"\nsystemd-analyze security sluice.service (installed): {score}")
        self.assertLessEqual(score, MAX_EXPOSURE, security)


class UnitTest(unittest.TestCase):
    """The unit alone, as the repository has it: quick, no package needed."""

    def setUp(self):
        if shutil.which("systemd-analyze") is None:
            raise unittest.SkipTest("no systemd-analyze")

    def test_exposure_is_2_or_better(self):
        report = run(["systemd-analyze", "security", "--offline=yes", UNIT]).stdout
        score = exposure(report)
        print(f"\nsystemd-analyze security --offline=yes deploy/systemd/sluice.service: {score}")
        self.assertLessEqual(score, MAX_EXPOSURE, report)

    def test_the_brief_settings_are_there(self):
        with open(UNIT) as f:
            lines = {l.strip() for l in f if l.strip() and not l.startswith("#")}
        for line in ("Type=notify", "ExecReload=/bin/kill -HUP $MAINPID", "ProtectSystem=strict",
                     "ProtectHome=yes", "PrivateTmp=yes", "NoNewPrivileges=yes",
                     "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
                     "SystemCallFilter=@system-service", "ReadWritePaths=/var/lib/sluice",
                     "User=sluice"):
            self.assertIn(line, lines)
        self.assertTrue([l for l in lines if l.startswith("LimitNOFILE=")])


class SystemCallsTest(unittest.TestCase):
    """Every system call a serving sluice makes (highlight workers included) is one the unit's
    SystemCallFilter lets through: a refused one would be EPERM in production only."""

    def setUp(self):
        if shutil.which("strace") is None or shutil.which("systemd-analyze") is None:
            raise unittest.SkipTest("needs strace and systemd-analyze")

    def expand(self, group, seen=None):
        """The calls of a systemd syscall group, its nested groups expanded."""
        seen = set() if seen is None else seen
        if group in seen:
            return set()
        seen.add(group)
        if not group.startswith("@"):
            return {group}
        listing = run(["systemd-analyze", "syscall-filter", group]).stdout
        calls = set()
        for line in listing.splitlines()[1:]:
            entry = line.strip()
            if not entry or entry.startswith("#"):
                continue
            calls |= self.expand(entry, seen)
        return calls

    def allowed(self):
        with open(UNIT) as f:
            filters = [l.strip().split("=", 1)[1] for l in f
                       if l.startswith("SystemCallFilter=")]
        # In order, as systemd applies them: the first (an allow list) sets the calls, a `~` line
        # takes some away, a later plain line gives some back.
        allow = set()
        for spec in filters:
            calls = set()
            for group in spec.lstrip("~").split():
                calls |= self.expand(group)
            allow = allow - calls if spec.startswith("~") else allow | calls
        self.assertIn("execve", allow)
        return allow

    def test_what_a_server_calls_is_allowed(self):
        server = SluiceServer()
        self.addCleanup(server.cleanup)
        trace = os.path.join(server.root, "strace")
        # -f follows the highlight workers; the server is the traced command, so the harness's
        # SIGTERM goes to strace, which passes it on and exits with the server's status.
        command = server.command
        server.command = lambda: ["strace", "-f", "-qq", "-o", trace] + command()
        server.start()
        paste = server.create_ok("int main(void) { return 0; }")["id"]
        for lang in ("cpp", "python"):
            self.assertEqual(server.get(f"/{paste}?lang={lang}",
                                        headers={"Accept": "text/html"}).status, 200)
        self.assertEqual(server.get(f"/api/v1/pastes/{paste}").status, 200)
        self.assertEqual(server.get("/metrics").status, 200)
        # SIGTERM to sluice itself (strace would stop tracing and kill it): it drains, ends its
        # workers, and strace exits with its status once it has traced all of that.
        with open(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children") as f:
            sluice_pid = int(f.read().split()[0])
        os.kill(sluice_pid, signal.SIGTERM)
        server.proc.wait(timeout=60)
        server.stop(expect_code=0)
        calls = set()
        with open(trace) as f:
            for line in f:
                m = re.match(r"\d+\s+([a-z0-9_]+)\(", line)
                if m:
                    calls.add(m.group(1))
        self.assertIn("execve", calls)  # the trace did see the workers start
        refused = sorted(calls - self.allowed())
        self.assertEqual(refused, [], f"calls the unit's SystemCallFilter refuses: {refused}")

if __name__ == "__main__":
    unittest.main()
