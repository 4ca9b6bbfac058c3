"""`sluice admin backup DEST` (docs/operations.md, "Backups"): a copy of a live embedded store,
made while creates go on, that a server started on it serves: every paste acknowledged before the
copy began reads back byte-identical, inline and on files; a deleted one stays deleted; a paste
acknowledged during the copy is either there whole or absent, never damaged. The copy passes
SQLite's quick_check, holds to --rate, never leaves a half-written database under its final name,
and refuses a destination it could damage.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_backup
"""

import base64
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import threading
import time
import unittest

from sluice_harness import SluiceTestCase, clean_env, run_sluice, sluice_bin, wait_until

# Over inline_body_bytes (64 KiB): files under blobs/, not rows of meta.db.
LARGE = 100_000


def body(i, size):
    """Text that does not compress (the store compresses bodies), different for every i."""
    noise = random.Random(i).randbytes(size)
    return (f"paste {i}: ".encode() + base64.b64encode(noise))[:size]


class Creator:
    """Creates pastes one after another on its own thread until stopped; keeps what was
    acknowledged (id -> body) and every answer that was not a 201."""

    def __init__(self, server):
        self.server = server
        self.made = {}
        self.refused = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        i = 0
        while not self._stop.is_set():
            data = body(10_000 + i, LARGE if i % 10 == 0 else 2_000)
            res = self.server.create(data)
            if res.status == 201:
                self.made[res.json()["id"]] = data
            else:
                self.refused.append(res)
            i += 1

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(30)


class BackupTest(SluiceTestCase):
    def setUp(self):
        super().setUp()
        self.root = tempfile.mkdtemp(prefix="sluice-backup-")
        self.addCleanup(shutil.rmtree, self.root, ignore_errors=True)

    def backup(self, data_dir, dest, *args, timeout=120):
        return run_sluice(["admin", "backup", "--data-dir", data_dir, dest, *args],
                          timeout=timeout)

    def filled(self, small=300, large=5):
        """A server with `small` 10 KB pastes (rows and bodies in meta.db), `large` ones on
        files, and two deleted. Returns (server, {id: body}, deleted ids)."""
        s = self.server()
        made = {}
        for i in range(small):
            data = body(i, 10_000)
            made[s.create_ok(data)["id"]] = data
        for i in range(large):
            data = body(1000 + i, LARGE)
            made[s.create_ok(data)["id"]] = data
        deleted = []
        for i in range(2):
            doc = s.create_ok(body(2000 + i, LARGE if i else 500))
            self.assertEqual(s.delete(doc["id"], doc["delete_token"]).status, 204)
            deleted.append(doc["id"])
        return s, made, deleted

    def assertServes(self, s, made):
        for paste_id, data in made.items():
            res = s.get(f"/raw/{paste_id}")
            self.assertEqual(res.status, 200, f"{paste_id} in the copy: {res!r}")
            self.assertEqual(res.body, data, f"{paste_id}: another body in the copy")

    def test_a_copy_made_under_creates_serves_every_paste_acknowledged_before_it(self):
        s, before, deleted = self.filled()
        dest = os.path.join(self.root, "copy")
        with Creator(s) as during:
            wait_until(lambda: len(during.made) >= 20, timeout=30, message="creates under way")
            done = self.backup(s.data_dir, dest, "--check")
            acknowledged_at_end = dict(during.made)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertIn("meta.db: quick_check ok", done.stdout)
        self.assertIn("body files", done.stdout)
        # The server went on answering creates while the copy held its snapshot.
        self.assertEqual(during.refused, [], f"creates refused during the backup: {during.refused[:3]}")
        self.assertFalse(os.path.exists(os.path.join(dest, "meta.db.partial")))

        restored = self.server(data_dir=dest)
        self.assertServes(restored, before)
        for paste_id in deleted:
            self.assertEqual(restored.get(f"/raw/{paste_id}").status, 404, paste_id)
        # Made during the copy: whole, or not there (after the snapshot); never another body.
        present = 0
        for paste_id, data in acknowledged_at_end.items():
            res = restored.get(f"/raw/{paste_id}")
            self.assertIn(res.status, (200, 404), f"{paste_id}: {res!r}")
            if res.status == 200:
                self.assertEqual(res.body, data, paste_id)
                present += 1
        # The snapshot began after the creator's first 20 acknowledgements.
        self.assertGreaterEqual(present, 20)
        # And the copy takes new pastes like any data dir.
        self.assertEqual(restored.create(b"after the restore").status, 201)

    def test_the_rate_holds_and_a_killed_copy_leaves_no_database_under_its_name(self):
        s, made, _ = self.filled(small=400, large=0)
        # What the copy reads: the database as the server sees it, its WAL's pages included.
        with sqlite3.connect(f"file:{s.db_path}?mode=ro", uri=True) as db:
            size_mb = (db.execute("PRAGMA page_count").fetchone()[0] *
                       db.execute("PRAGMA page_size").fetchone()[0]) / 1e6
        self.assertGreater(size_mb, 3)
        # A copy of about 2 s at the rate asked for cannot end sooner, however fast the disk.
        rate = size_mb / 2
        dest = os.path.join(self.root, "paced")
        began = time.monotonic()
        done = self.backup(s.data_dir, dest, "--rate", f"{rate:.3f}")
        took = time.monotonic() - began
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertGreaterEqual(took, 1.5, f"{size_mb:.1f} MB at {rate:.2f} MB/s in {took:.2f} s")

        # Stopped with SIGKILL half-way through a slow copy: the partial file only.
        killed = os.path.join(self.root, "killed")
        proc = subprocess.Popen([sluice_bin(), "admin", "backup", "--data-dir", s.data_dir, killed,
                                 "--rate", f"{rate / 10:.4f}"], env=clean_env(None),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_until(lambda: os.path.exists(os.path.join(killed, "meta.db.partial")), timeout=20,
                   message="the copy under way")
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=20)
        self.assertFalse(os.path.exists(os.path.join(killed, "meta.db")))
        # A second copy into a new folder is whole.
        again = os.path.join(self.root, "again")
        self.assertEqual(self.backup(s.data_dir, again, "--check").returncode, 0)
        s.stop()
        self.assertServes(self.server(data_dir=again), made)

    def test_a_paste_deleted_before_its_body_was_copied_is_deleted_in_the_copy_too(self):
        """The snapshot has the row; its file is gone by the time the copy reaches it. The copy
        must not keep a live row without a body (503 body_missing after a restore): the paste is
        marked deleted there, as in the source."""
        s = self.server()
        made = {}
        for i in range(12):
            data = body(3000 + i, LARGE)
            doc = s.create_ok(data)
            made[doc["id"]] = (data, doc["delete_token"])
        dest = os.path.join(self.root, "copy")
        # About 0.5 s a body file: the test stops the copy once its first file is written.
        proc = subprocess.Popen([sluice_bin(), "admin", "backup", "--data-dir", s.data_dir, dest,
                                 "--rate", "0.2"], env=clean_env(None),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(proc.kill)
        copied = lambda: {name for _, _, names in os.walk(os.path.join(dest, "blobs"))
                          for name in names}
        wait_until(lambda: copied(), timeout=60, message="the copy's first body file")
        proc.send_signal(signal.SIGSTOP)
        # Every paste whose body was not copied yet is deleted, and its file goes (the outbox).
        deleted = [i for i in made if i not in copied()]
        self.assertTrue(deleted, "every body was copied before the copy was stopped")
        for paste_id in deleted:
            self.assertEqual(s.delete(paste_id, made[paste_id][1]).status, 204)
        wait_until(lambda: not any(os.path.exists(s.blob_path(i))
                                   for i in deleted),
                   timeout=30, message="the deleted pastes' files removed")
        proc.send_signal(signal.SIGCONT)
        out, err = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 0, out + err)
        self.assertIn(f"{len(deleted)} marked deleted", out)
        s.stop()

        restored = self.server(data_dir=dest)
        for paste_id in deleted:
            self.assertEqual(restored.get(f"/raw/{paste_id}").status, 404, paste_id)
        self.assertServes(restored, {i: made[i][0] for i in made if i not in deleted})
        # The copy's count of live bytes dropped with them: a restore does not start with space
        # that no paste holds.
        with sqlite3.connect(f"file:{os.path.join(dest, 'meta.db')}?mode=ro", uri=True) as db:
            live = db.execute("SELECT live_bytes FROM storage_usage WHERE slot = 0").fetchone()[0]
        self.assertEqual(live, sum(len(made[i][0]) for i in made if i not in deleted))

    def test_refuses_what_it_would_damage_or_cannot_copy(self):
        s = self.server()
        s.create_ok("one")
        full = os.path.join(self.root, "full")
        os.makedirs(full)
        with open(os.path.join(full, "keep.txt"), "w") as f:
            f.write("an operator's file")
        cases = [
            ([s.data_dir, full], "exists and is not an empty folder"),
            ([s.data_dir, os.path.join(s.data_dir, "inside")], "inside the data dir"),
            ([s.data_dir + "/", os.path.join(s.data_dir, "inside")], "inside the data dir"),
            ([s.data_dir, s.data_dir], "exists and is not an empty folder"),
            ([os.path.join(self.root, "nowhere"), os.path.join(self.root, "x")], "no meta.db"),
        ]
        for (data_dir, dest), message in cases:
            with self.subTest(data_dir=data_dir, dest=dest):
                done = self.backup(data_dir, dest)
                self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
                self.assertIn(message, done.stderr)
        with open(os.path.join(full, "keep.txt")) as f:
            self.assertEqual(f.read(), "an operator's file")
        self.assertFalse(os.path.exists(os.path.join(s.data_dir, "inside")))
        for rate in ("-1", "0.001", "1e308", "nan", "fast"):
            with self.subTest(rate=rate):
                done = self.backup(s.data_dir, os.path.join(self.root, "r"), "--rate", rate)
                self.assertNotEqual(done.returncode, 0, done.stdout)
                self.assertIn("--rate", done.stderr)
                self.assertFalse(os.path.exists(os.path.join(self.root, "r")))
        missing = run_sluice(["admin", "backup", "--data-dir", s.data_dir])
        self.assertNotEqual(missing.returncode, 0, missing.stderr)
        self.assertIn("DEST", missing.stderr)

    @unittest.skipUnless(os.geteuid() == 0, "only root can be refused as root")
    def test_root_is_refused_for_a_store_another_user_owns(self):
        """As root on a stopped store, SQLite's reader would create meta.db-wal and -shm owned by
        root; the command names the owner instead and touches nothing."""
        s = self.server()
        s.create_ok("one")
        s.stop()
        nobody = 65534
        for root, dirs, files in os.walk(s.data_dir):
            for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                os.chown(name, nobody, nobody)
        before = sorted(os.listdir(s.data_dir))
        dest = os.path.join(self.root, "as-root")
        done = self.backup(s.data_dir, dest)
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        self.assertIn("not as root", done.stderr)
        self.assertIn("sudo -u nobody", done.stderr)
        self.assertEqual(sorted(os.listdir(s.data_dir)), before)
        self.assertFalse(os.path.exists(dest))


if __name__ == "__main__":
    unittest.main()
