"""sluice on PostgreSQL whose answers go missing: the real binary, a real PostgreSQL started by
scripts/testenv/postgres.sh, and tests/fakes/pg_proxy.py between them, told to reset connections
after an INSERT reached the server, to swallow answers, or to delay them.

What must hold: a create whose answer was lost is 201 when the row is there (sluice reads it back
by id before it answers) or 503 `outcome_unknown`, never "nothing was published" for a row that
exists; every paste acknowledged with 201 reads back byte-identical; traffic recovers by itself.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v \
     test_postgres_misbehaving
"""

import os
import sys
import time
import unittest
from urllib.parse import urlsplit, urlunsplit

from promtext import metric
from sluice_harness import SluiceTestCase, wait_until, with_write_pool_warm
import test_postgres  # its server helper only: importing the class would run its tests here

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "fakes")))
from pg_proxy import PgProxy  # noqa: E402

INSERT = "INSERT INTO pastes"
ROW_READ = "FROM pastes WHERE id = $1"  # the point read a fill and an outcome check make


def via(url, port):
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0] + "@" if len(netloc) == 2 else ""
    return urlunsplit((parts.scheme, f"{user}127.0.0.1:{port}", parts.path, parts.query, ""))


class PostgresMisbehavingTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = test_postgres.PostgresServer()
        parts = urlsplit(cls.pg.url)
        cls.proxy = PgProxy(parts.hostname, parts.port, seed=18).start()

    @classmethod
    def tearDownClass(cls):
        cls.proxy.stop()
        cls.pg.stop()

    def setUp(self):
        super().setUp()
        self.proxy.configure(mode="pass", match=[], apps=[], probability=1.0)
        self.proxy.reset_stats()

    # Timeouts for a shared, noisy machine; the faults below do not depend on them.
    SETTINGS = {"insert-timeout": "2s", "meta-get-timeout": "2s", "read-budget": "5s",
                "create-budget": "8s", "ip-create-rate": "1000", "ip-create-burst": "1000",
                "meta-read-connections": "4", "meta-write-connections": "4"}

    def start(self, **overrides):
        settings = dict(self.SETTINGS, **{k.replace("_", "-"): v for k, v in overrides.items()})
        args = [a for k, v in settings.items() for a in (f"--{k}", v)]
        s = self.server(["--meta", via(self.pg.url, self.proxy.port), *args])
        return with_write_pool_warm(s)

    def rows(self):
        return int(self.pg.sql("SELECT count(*) FROM pastes"))

    def row_exists(self, paste_id):
        return self.pg.sql(f"SELECT count(*) FROM pastes WHERE id = '{paste_id}'") == "1"

    @staticmethod
    def body(i):
        return f"paste {i} whose answer may be lost — ünïcödé ✓\n".encode() * (i % 7 + 1)

    def assertCreatedOrUnknown(self, res):
        """201, or 503 outcome_unknown with Retry-After; never 'nothing was published'."""
        if res.status == 201:
            return res.json()
        doc = self.assertJsonError(res, 503, "outcome_unknown")
        self.assertNotIn("nothing was published", doc["error"])
        self.assertIn("may or may not", doc["error"])
        self.assertTrue(res.header("Retry-After"), res)
        self.assertEqual(res.header("Cache-Control"), "no-store")
        return None

    def assertReadsBack(self, s, created):
        for doc, body in created:
            res = s.get(f"/raw/{doc['id']}")
            self.assertStatus(res, 200)
            self.assertEqual(res.body, body, doc["id"])

    def test_inserts_reset_after_they_ran_are_201_found_by_the_check(self):
        s = self.start()
        self.proxy.configure(mode="reset", match=[INSERT])
        before = self.rows()
        created = []
        for i in range(20):
            res = s.create(self.body(i))
            doc = self.assertCreatedOrUnknown(res)
            # The reset came after the server's answer: the row is there, the check finds it.
            self.assertIsNotNone(doc, f"create {i}: {res!r}")
            created.append((doc, self.body(i)))
        self.assertEqual(self.proxy.stats()["faults"], 20)
        self.assertEqual(self.rows() - before, 20)
        m = s.metrics()
        self.assertEqual(metric(m, "sluice_insert_outcome_unknown_total", outcome="confirmed"), 20)
        self.proxy.configure(mode="pass")
        self.assertReadsBack(s, created)

    def test_lost_answers_at_random_never_say_nothing_was_published(self):
        s = self.start()
        self.proxy.configure(mode="reset_at_send", match=[INSERT], probability=0.5)
        before = self.rows()
        created, unknown = [], 0
        for i in range(40):
            doc = self.assertCreatedOrUnknown(s.create(self.body(i)))
            if doc is None:
                unknown += 1
            else:
                self.assertTrue(self.row_exists(doc["id"]), doc)
                created.append((doc, self.body(i)))
        self.assertGreater(self.proxy.stats()["faults"], 0)
        # Every acknowledged paste is there; an unknown one may or may not be.
        self.assertGreaterEqual(self.rows() - before, len(created))
        self.assertLessEqual(self.rows() - before, len(created) + unknown)
        self.proxy.configure(mode="pass")
        self.assertReadsBack(s, created)

    def test_an_outcome_that_cannot_be_checked_is_503_outcome_unknown_and_keeps_the_body(self):
        s = self.start()
        # The insert runs and its answer is lost; the check by id is lost as well.
        self.proxy.configure(mode="reset", match=[INSERT, ROW_READ])
        before = self.rows()
        ids_before = set(self.pg.sql("SELECT id FROM pastes").split())
        res = s.create(b"nobody can tell whether this was published")
        self.assertIsNone(self.assertCreatedOrUnknown(res))
        self.assertEqual(self.rows() - before, 1)  # it was: "nothing was published" would lie
        # The new row by difference: created_at has whole seconds, and the other tests of this
        # class share the database.
        [paste_id] = set(self.pg.sql("SELECT id FROM pastes").split()) - ids_before
        self.assertTrue(s.has_body(paste_id),
                        "the body of an unknown outcome must stay (the reaper owns it)")
        self.assertEqual(
            metric(s.metrics(), "sluice_insert_outcome_unknown_total", outcome="unknown"), 1)
        # Recovery without a restart: the proxy behaves again, so does sluice.
        self.proxy.configure(mode="pass")
        res = s.get(f"/raw/{paste_id}")
        self.assertStatus(res, 200)
        self.assertEqual(res.body, b"nobody can tell whether this was published")
        doc = s.create_ok(b"after the faults")
        self.assertEqual(s.get(f"/raw/{doc['id']}").body, b"after the faults")

    def test_swallowed_and_late_answers_time_out_then_the_check_finds_the_row(self):
        # A connection whose answer is swallowed stays lent until its hard limit: enough of them
        # that every insert here gets its own and is sent.
        s = self.start(insert_timeout="300ms", meta_write_connections="16")
        before = self.rows()
        created, unknown = [], 0
        for mode in ("drop", "delay"):
            self.proxy.configure(mode=mode, match=[INSERT], delay=1.0)
            for i in range(3):
                body = self.body(100 + i) + mode.encode()
                doc = self.assertCreatedOrUnknown(s.create(body))
                if doc is None:
                    unknown += 1
                else:
                    created.append((doc, body))
        self.assertEqual(self.proxy.stats()["faults"], 6)
        self.assertGreater(len(created), 0)
        time.sleep(1.5)  # the late answers have come and gone
        self.assertGreaterEqual(self.rows() - before, len(created))
        self.assertLessEqual(self.rows() - before, len(created) + unknown)
        self.proxy.configure(mode="pass")
        self.assertReadsBack(s, created)
        # Connections that lost their answers were closed and replaced: creates work again.
        wait_until(lambda: s.create(b"recovered").status == 201, timeout=20,
                   message="creates recovering after the faults")

    def test_a_refused_insert_still_says_nothing_was_published(self):
        # Control: an answer that did come back (the server said no) is not an unknown outcome.
        s = self.start()
        self.pg.sql("ALTER TABLE pastes ADD CONSTRAINT refuse_all CHECK (size_bytes < 0) NOT VALID")
        try:
            before = self.rows()
            res = s.create(b"refused by the server")
            doc = res.json()
            self.assertNotEqual(doc.get("reason"), "outcome_unknown", res)
            self.assertIn("nothing was published", doc["error"])
            self.assertEqual(self.rows(), before)
        finally:
            self.pg.sql("ALTER TABLE pastes DROP CONSTRAINT refuse_all")
        s.create_ok(b"accepted again")


if __name__ == "__main__":
    unittest.main()
