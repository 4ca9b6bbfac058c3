"""`sluice serve --meta postgres://...` against a real PostgreSQL that this suite starts and stops
with scripts/testenv/postgres.sh (in a temporary folder, on a free port). No server is a failure.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_postgres
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from promtext import metric
from sluice_harness import SluiceTestCase, run_sluice, wait_until, with_write_pool_warm

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.normpath(os.path.join(HERE, "..", "..", "scripts", "testenv", "postgres.sh"))


class PostgresServer:
    """tls=True: reached only over TLS with a password, as a managed PostgreSQL (postgres.sh
    start-tls); `url` then asks for sslmode=verify-full and `password` is the user's password."""

    def __init__(self, tls=False):
        self.dir = tempfile.mkdtemp(prefix="sluice-pg-")
        self.url = self._script("start-tls" if tls else "start", self.dir, "0").strip()
        self.password = None
        if tls:
            with open(os.path.join(self.dir, "password"), encoding="ascii") as f:
                self.password = f.read().strip()

    @classmethod
    def for_class(cls, test_class, **kw):
        """A server for every test of `test_class`, stopped after its last test even when one
        fails (call it from setUpClass)."""
        server = cls(**kw)
        test_class.addClassCleanup(server.stop)
        return server

    def _script(self, *args):
        return subprocess.run([SCRIPT, *args], check=True, capture_output=True, text=True,
                              timeout=120).stdout

    def pause(self):
        self._script("pause", self.dir)

    def resume(self):
        self._script("resume", self.dir)

    def stop(self):
        self._script("stop", self.dir)

    def sql(self, query):
        env = dict(os.environ, PGPASSWORD=self.password) if self.password else None
        return subprocess.run(["psql", self.url, "-tAc", query], check=True, capture_output=True,
                              text=True, timeout=30, env=env).stdout.strip()


class PostgresMetaTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = PostgresServer.for_class(cls)

    # Store timeouts sized for a shared, noisy test machine, not for production (20 ms reads, 50 ms
    # inserts); the outage checks do not depend on them: refusals are fast whatever the timeout.
    RELAXED = ["--insert-timeout", "2s", "--meta-get-timeout", "2s", "--read-budget", "5s"]

    def pg_server(self, *extra, data_dir=None):
        s = self.server(["--meta", self.pg.url, *self.RELAXED, *extra], data_dir=data_dir)
        return with_write_pool_warm(s)

    def test_migrate_twice_applies_nothing_the_second_time(self):
        first = run_sluice(["migrate", "--meta", self.pg.url])
        self.assertEqual(first.returncode, 0, first.stderr)
        second = run_sluice(["migrate", "--meta", self.pg.url])
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertIn("(0 migrations applied now)", second.stdout)

    def test_migrate_refuses_a_url_that_is_not_postgres(self):
        res = run_sluice(["migrate", "--meta", "mysql://x@y/z"])
        self.assertEqual(res.returncode, 2)

    def test_rows_live_in_postgres_not_in_sqlite(self):
        s = self.pg_server()
        doc = s.create_ok(b"kept in postgres")
        self.assertStatus(s.get(f"/raw/{doc['id']}"), 200)
        self.assertEqual(self.pg.sql(f"SELECT deleted FROM pastes WHERE id = '{doc['id']}'"), "f")
        self.assertFalse(os.path.exists(os.path.join(s.data_dir, "meta.db")))
        self.assertStatus(s.delete(doc["id"], token=doc["delete_token"]), 204)
        self.assertEqual(self.pg.sql(f"SELECT deleted FROM pastes WHERE id = '{doc['id']}'"), "t")
        self.assertStatus(s.get(f"/raw/{doc['id']}"), 404)

    def test_two_processes_share_the_metadata(self):
        shared_blobs = tempfile.mkdtemp(prefix="sluice-shared-")
        self.addCleanup(shutil.rmtree, shared_blobs, ignore_errors=True)
        a = self.pg_server(data_dir=shared_blobs)
        b = self.pg_server(data_dir=shared_blobs)
        doc = a.create_ok(b"written through a, read through b")
        res = b.get(f"/raw/{doc['id']}")
        self.assertStatus(res, 200)
        self.assertEqual(res.body, b"written through a, read through b")
        self.assertStatus(b.delete(doc["id"], token=doc["delete_token"]), 204)
        self.assertStatus(b.get(f"/raw/{doc['id']}"), 404)

    def test_an_outage_answers_503_quickly_and_traffic_resumes(self):
        s = self.pg_server("--breaker-open-for", "1s")
        doc = s.create_ok(b"before the outage")
        self.pg.pause()
        try:
            for i in range(8):
                started = time.monotonic()
                res = s.get(f"/raw/missing00{i:03d}")
                self.assertStatus(res, 503)
                self.assertLess(time.monotonic() - started, 3.0)
            self.assertEqual(metric(s.metrics(), "sluice_breaker_state", dependency="meta"), 1)
        finally:
            self.pg.resume()
        wait_until(lambda: s.get("/raw/missing00999").status == 404, timeout=20,
                   message="reads resuming after PostgreSQL came back")
        self.assertStatus(s.get(f"/raw/{doc['id']}"), 200)
        s.create_ok(b"after the outage")


class PostgresFleetWithoutRedisTest(SluiceTestCase):
    """Two processes on one PostgreSQL and no Redis, as the claim-race tests run. Nothing tells a
    process that another deleted or withheld a paste, so each may serve its own cached copy only
    for `local_cache_ttl` (docs/scale-out.md, "Metadata in PostgreSQL"); before that rule applied
    without Redis, b served a paste deleted on a for as long as b's cache kept it."""

    TTL = 2.0  # --local-cache-ttl, short so the test is short; the default is 5 s
    # b stops serving within TTL of caching the paste, hence of the delete. The bound adds 10 s for
    # a machine shared by several builds: a wait on a condition, never a sleep. Before the rule
    # applied without Redis, b served the paste until its cache evicted it (the paste's week).
    WITHIN = TTL + 10.0

    @classmethod
    def setUpClass(cls):
        cls.pg = PostgresServer.for_class(cls)

    def setUp(self):
        super().setUp()
        shared_blobs = tempfile.mkdtemp(prefix="sluice-shared-")
        self.addCleanup(shutil.rmtree, shared_blobs, ignore_errors=True)
        args = ["--meta", self.pg.url, *PostgresMetaTest.RELAXED, "--trusted-proxy", "127.0.0.1",
                "--report-hide-threshold", "1", "--local-cache-ttl", f"{self.TTL:g}s"]
        self.a, self.b = (self.server(args, data_dir=shared_blobs) for _ in range(2))
        for s in (self.a, self.b):
            with_write_pool_warm(s)

    def cached_on_b(self, body):
        doc = self.a.create_ok(body)
        def hits():
            return metric(self.b.metrics(), "sluice_paste_cache_total", outcome="hit")
        before = hits()
        self.assertStatus(self.b.get(f"/raw/{doc['id']}"), 200)  # fills b's cache
        self.assertStatus(self.b.get(f"/raw/{doc['id']}"), 200)
        self.assertGreater(hits(), before, "b served the paste from its memory")
        return doc

    def assertStopsBeingServedOnB(self, paste_id, status, since):
        res = wait_until(lambda: (r := self.b.get(f"/raw/{paste_id}")).status != 200 and r,
                         timeout=self.WITHIN, interval=0.05,
                         message=f"b stops serving {paste_id} within local_cache_ttl")
        self.assertStatus(res, status)
        print(f"\n{paste_id}: served by b {time.monotonic() - since:.2f} s after the change on a "
              f"(local_cache_ttl {self.TTL:g} s)", flush=True)

    def test_a_paste_deleted_on_one_process_stops_being_served_on_the_other(self):
        doc = self.cached_on_b(b"deleted on a")
        self.assertStatus(self.a.delete(doc["id"], token=doc["delete_token"]), 204)
        self.assertStopsBeingServedOnB(doc["id"], 404, time.monotonic())

    def test_a_paste_taken_down_on_one_process_stops_being_served_on_the_other(self):
        doc = self.cached_on_b(b"taken down on a")
        res = self.a.admin_request("POST", f"/admin/pastes/{doc['id']}/takedown",
                                   body=json.dumps({"reason": "test"}),
                                   headers={"Content-Type": "application/json"})
        self.assertStatus(res, 200)
        self.assertStopsBeingServedOnB(doc["id"], 451, time.monotonic())

    def test_a_paste_withheld_by_reports_on_one_process_stops_being_served_on_the_other(self):
        doc = self.cached_on_b(b"reported on a")
        res = self.a.request("POST", f"/api/v1/pastes/{doc['id']}/report",
                             body=json.dumps({"reason": "spam"}),
                             headers={"Content-Type": "application/json",
                                      "X-Forwarded-For": "10.7.0.1"})
        self.assertEqual(res.json()["under_review"], True, res)
        self.assertStatus(self.a.get(f"/raw/{doc['id']}"), 451)
        self.assertStopsBeingServedOnB(doc["id"], 451, time.monotonic())


if __name__ == "__main__":
    unittest.main()
