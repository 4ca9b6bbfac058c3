"""The admin listener on a Unix socket (docs/moderation.md): admin_listen = "unix:/PATH".

The admin API answers over the socket with the token and 401 without; the file has mode 0660; a
second server on the same path refuses to start while the first runs; `sluice admin` talks to it;
after SIGTERM the file is gone, and after kill -9 the stale file is replaced by the next server. A
path that is not a socket is never removed.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_admin_socket
"""

import fcntl
import http.client
import json
import os
import shutil
import socket
import stat
import tempfile
import unittest

from sluice_harness import SluiceTestCase, SluiceServer, clean_env, run_sluice

import subprocess


class UnixConnection(http.client.HTTPConnection):
    """http.client over a Unix socket: the host is only what the Host header says."""

    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.path)
        self.sock = sock


def socket_dir(test):
    # A short folder of its own: sun_path holds 107 bytes, and TMPDIR may be long.
    path = tempfile.mkdtemp(prefix="sluice-sock-", dir="/tmp")
    test.addCleanup(shutil.rmtree, path, True)
    return path


def admin(s, path, method, target, token=True):
    headers = {"Authorization": f"Bearer {s.admin_token}"} if token else {}
    conn = UnixConnection(path)
    try:
        return s.request(method, target, headers=headers, conn=conn)
    finally:
        conn.close()


def start_refused(s, timeout=20):
    """Runs a server that must refuse to start; returns (exit status, output)."""
    done = subprocess.run(s.command(), capture_output=True, text=True, timeout=timeout,
                          env=clean_env(s.env), stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout + done.stderr


class AdminSocketTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="sluice-sock-", dir="/tmp")
        cls.path = os.path.join(cls.dir, "admin.sock")
        cls.addClassCleanup(shutil.rmtree, cls.dir, True)
        cls.s = cls.start_class_server(["--admin-listen", f"unix:{cls.path}"])

    def test_answers_with_the_token_and_401_without(self):
        self.assertIn(f"admin listener at unix:{self.path}", self.s.log())
        res = admin(self.s, self.path, "GET", "/admin/reports")
        self.assertStatus(res, 200)
        self.assertIn("pastes", res.json())
        self.assertStatus(admin(self.s, self.path, "GET", "/metrics"), 200)
        self.assertJsonError(admin(self.s, self.path, "GET", "/admin/reports", token=False), 401)
        conn = UnixConnection(self.path)
        try:
            wrong = self.s.request("GET", "/admin/audit", conn=conn,
                                   headers={"Authorization": "Bearer not-the-token-at-all"})
        finally:
            conn.close()
        self.assertJsonError(wrong, 401)
        # The public port is still TCP and still has no admin path.
        self.assertJsonError(self.s.get("/admin/reports"), 404)

    def test_the_socket_file_has_mode_0660(self):
        st = os.lstat(self.path)
        self.assertTrue(stat.S_ISSOCK(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o660)
        self.assertEqual(st.st_uid, os.getuid())

    def test_a_second_server_on_the_same_path_refuses_to_start(self):
        other = SluiceServer(args=["--admin-listen", self.path])
        self.addCleanup(other.cleanup)
        code, output = start_refused(other)
        self.assertNotEqual(code, 0, output)
        self.assertIn(f"cannot listen on unix:{self.path}: another process is already listening "
                      "there", output)
        # The first server's file is untouched and still answers.
        self.assertStatus(admin(self.s, self.path, "GET", "/admin/reports"), 200)

    def test_sluice_admin_talks_over_the_socket(self):
        created = self.s.request("POST", "/api/v1/pastes", body="over the socket")
        self.assertStatus(created, 201)
        paste_id = created.json()["id"]
        for where in (f"unix:{self.path}", self.path):
            res = run_sluice(["admin", "--admin", where, "--token-file", self.s.admin_token_file,
                              "show", paste_id])
            self.assertEqual(res.returncode, 0, res.stderr)
            self.assertEqual(json.loads(res.stdout)["content"], "over the socket")
        res = run_sluice(["admin", "--admin", "unix:relative.sock", "--token-file",
                          self.s.admin_token_file, "reports"])
        self.assertEqual(res.returncode, 2, res)
        self.assertIn("absolute", res.stderr)
        help_text = run_sluice(["admin", "--help"]).stdout
        self.assertIn("unix:/PATH", help_text)


class AdminSocketLockTest(SluiceTestCase):
    def test_a_held_lock_on_the_path_refuses_the_start_and_keeps_a_stale_file(self):
        # A server starting on a killed one's file holds PATH.lock through the stale check: a
        # second one started at that moment must neither remove the file nor bind beside it.
        path = os.path.join(socket_dir(self), "admin.sock")
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(path)
        stale.close()  # bound, never listened on: what a killed server leaves
        inode = os.lstat(path).st_ino
        with open(path + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            s = SluiceServer(args=["--admin-listen", f"unix:{path}"])
            self.addCleanup(s.cleanup)
            code, output = start_refused(s)
            self.assertNotEqual(code, 0, output)
            self.assertIn(f"cannot listen on unix:{path}: another process is already listening "
                          f"there, or starting to ({path}.lock is locked)", output)
            self.assertEqual(os.lstat(path).st_ino, inode, "the stale file was touched")
        # Once the lock is free, the next server takes the path, stale file and all.
        s = SluiceServer(args=["--admin-listen", f"unix:{path}"]).start()
        self.addCleanup(s.cleanup)
        self.assertIn("removing a stale socket file", s.log())
        self.assertStatus(admin(s, path, "GET", "/admin/reports"), 200)


class AdminSocketLifecycleTest(SluiceTestCase):
    def test_sigterm_removes_the_file_and_a_killed_servers_file_is_replaced(self):
        path = os.path.join(socket_dir(self), "admin.sock")
        s = self.server(["--admin-listen", f"unix:{path}"])
        self.assertTrue(stat.S_ISSOCK(os.lstat(path).st_mode))
        s.stop(expect_code=0)
        self.assertFalse(os.path.exists(path), "the socket file outlived a clean stop")

        s.start()
        s.kill()  # kill -9: nothing removes the file
        self.assertTrue(stat.S_ISSOCK(os.lstat(path).st_mode))
        s.start()
        self.assertIn("removing a stale socket file", s.log())
        self.assertStatus(admin(s, path, "GET", "/admin/reports"), 200)
        self.assertEqual(stat.S_IMODE(os.lstat(path).st_mode), 0o660)

    def test_a_path_that_is_not_a_socket_is_refused_and_kept(self):
        path = os.path.join(socket_dir(self), "admin.sock")
        with open(path, "w") as f:
            f.write("not a socket\n")
        s = SluiceServer(args=["--admin-listen", path])
        self.addCleanup(s.cleanup)
        code, output = start_refused(s)
        self.assertNotEqual(code, 0, output)
        self.assertIn("the path exists and is not a socket", output)
        with open(path) as f:
            self.assertEqual(f.read(), "not a socket\n")

    def test_a_relative_or_too_long_path_is_refused_at_start(self):
        res = run_sluice(["serve", "--admin-listen", "unix:admin.sock"])
        self.assertEqual(res.returncode, 2, res)
        self.assertIn("must be absolute", res.stdout + res.stderr)
        res = run_sluice(["serve", "--admin-listen", "/" + "a" * 107])
        self.assertEqual(res.returncode, 2, res)
        self.assertIn("at most 107 bytes", res.stdout + res.stderr)


if __name__ == "__main__":
    unittest.main()
