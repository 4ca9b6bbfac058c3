"""sluice against an S3 that answers wrongly (tests/fakes/fake_s3.py): interim answers, redirects,
bodies shorter or longer than announced, listings with dates it cannot read or that never advance.

What must hold whatever the bucket says: no paste is served as another, no acknowledged paste loses
its body to the orphan reaper, a wrong answer is a 503 with Retry-After (never a 500), sluice
recovers without a restart once the bucket behaves, and the reaper's List requests stay bounded.
The metadata stays in the embedded SQLite; only the bodies go to the fake.
"""

import os
import sys
import threading
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

from promtext import metric
from sluice_harness import SluiceTestCase, wait_until

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fakes"))
from fake_s3 import FakeS3  # noqa: E402

BUCKET = "sluice-test"
PREFIX = "pastes/"
REAP_INTERVAL = 0.2  # seconds
# List requests one reaper pass may make (src/store/s3/s3_blob_store.cc, kMaxListRequests).
MAX_LISTS_PER_PASS = 4
S3_ENV = {"AWS_ACCESS_KEY_ID": "FAKE", "AWS_SECRET_ACCESS_KEY": "FAKE", "AWS_REGION": "us-east-1"}


class S3MisbehavingTest(SluiceTestCase):
    def setUp(self):
        super().setUp()
        self.s3 = FakeS3(BUCKET)
        self.s3.start()
        self.addCleanup(self.s3.stop)

    def sluice(self, *extra):
        # No paste cache, so every read goes to the bucket, and room for the concurrent reads of
        # one test client.
        args = ["--blob", f"s3://{BUCKET}", "--s3-endpoint", self.s3.endpoint, "--cache-bytes", "0",
                "--fill-cap", "64", "--fill-cap-per-client", "64",
                "--reap-interval", f"{int(REAP_INTERVAL * 1000)}ms", *extra]
        return self.server(args=args, env=S3_ENV)

    def assertRefused(self, res):
        """A dependency's wrong answer: 503 with Retry-After and a JSON error, never a 500."""
        self.assertJsonError(res, 503)
        self.assertIsNotNone(res.header("Retry-After"), res)
        self.assertGreaterEqual(int(res.header("Retry-After")), 1)

    def assertReads(self, s, paste_id, text):
        """The paste reads back whole. A 503 (a timeout on a busy test machine) is asked again; a
        404, a 500 or another body never is."""
        res = self.eventually(lambda: s.get(f"/raw/{paste_id}"))
        self.assertStatus(res, 200)
        self.assertEqual(res.text, text, f"/raw/{paste_id} served another body")

    def eventually(self, request):
        """`request()` until it answers other than 503 (which must carry Retry-After), 20 times at
        most: the polite client, for a store call that timed out on a busy machine."""
        for _ in range(20):
            res = request()
            if res.status != 503:
                return res
            self.assertRefused(res)
            time.sleep(0.1)
        return res

    def create_ok(self, s, text):
        res = self.eventually(lambda: s.create(text))
        self.assertStatus(res, 201)
        return res.json()["id"]

    # ---- the client's connections stay in step -----------------------------------------------
    def test_interim_answers_never_serve_one_paste_as_another(self):
        s = self.sluice()
        # Half the answers, PUT and GET alike, come after one or two "100 Continue".
        self.s3.add_rule("put", interim=1, probability=0.5)
        self.s3.add_rule("get", interim=2, probability=0.5)
        texts = [f"paste number {i}: " + "x" * (i % 17) for i in range(80)]
        with ThreadPoolExecutor(16) as pool:
            ids = list(pool.map(lambda t: self.create_ok(s, t), texts))
        self.assertEqual(len(set(ids)), len(ids))

        def read(i):
            res = self.eventually(lambda: s.get(f"/raw/{ids[i % len(ids)]}"))
            return i % len(ids), res

        with ThreadPoolExecutor(16) as pool:
            for i, res in pool.map(read, range(4 * len(ids))):
                self.assertStatus(res, 200)
                self.assertEqual(res.text, texts[i], f"paste {ids[i]} served as another")
        self.assertGreater(self.s3.count("get"), 2 * len(ids))  # the reads did reach the bucket

    def test_bytes_past_the_announced_end_are_refused_and_never_read_as_the_next_answer(self):
        s = self.sluice()
        a = self.create_ok(s, "the text of paste A, long enough")
        b = self.create_ok(s, "the text of paste B, long enough")
        # Content-Length 5 bytes short: the last 5 bytes would answer the next read.
        self.s3.add_rule("get", cl_delta=-5, left=1)
        self.assertRefused(s.get(f"/raw/{a}"))
        for _ in range(5):
            self.assertReads(s, b, "the text of paste B, long enough")
        # A whole second answer after the real one, carrying paste A's text.
        stray = b"HTTP/1.1 200 OK\r\nContent-Length: 32\r\n\r\nthe text of paste A, long enough"
        self.s3.add_rule("get", extra=stray, left=1)
        res = s.get(f"/raw/{b}")
        self.assertIn(res.status, (200, 503), res)
        if res.status == 200:
            self.assertEqual(res.text, "the text of paste B, long enough")
        else:
            self.assertRefused(res)
        for _ in range(5):
            self.assertReads(s, b, "the text of paste B, long enough")
            self.assertReads(s, a, "the text of paste A, long enough")

    def test_a_short_body_is_503_and_the_next_read_is_whole(self):
        s = self.sluice()
        a = self.create_ok(s, "a body that will be cut short")
        self.s3.add_rule("get", close_short=5, left=1)
        self.assertRefused(s.get(f"/raw/{a}"))
        self.assertReads(s, a, "a body that will be cut short")

    def test_interim_answers_on_a_put_do_not_shift_creates(self):
        s = self.sluice()
        # The first PUT is answered "100 Continue" then 200: the 200 is its answer, not the
        # second's, whose PUT fails and must fail the create.
        self.s3.add_rule("put", interim=1, left=1)
        first = self.create_ok(s, "first")
        self.s3.add_rule("put", status=500, left=1)
        self.assertRefused(s.create("second"))
        self.s3.add_rule("put", interim=1, status=500, left=1)
        self.assertRefused(s.create("second, again"))
        third = self.create_ok(s, "third")
        self.assertReads(s, first, "first")
        self.assertReads(s, third, "third")

    # ---- wrong statuses are 503, and sluice recovers without a restart ---------------------------
    def test_redirects_interim_only_and_odd_statuses_are_503_with_retry_after(self):
        s = self.sluice()
        a = self.create_ok(s, "read me after the storm")
        cases = [dict(status=301, location="http://127.0.0.1:1/elsewhere"),
                 dict(status=307, location="http://127.0.0.1:1/elsewhere"),
                 dict(status=302), dict(status=418), dict(status=204), dict(only_interim=True),
                 dict(status=101), dict(empty=True, cl_delta=3)]
        for how in cases:
            with self.subTest(how=how):
                self.s3.clear_rules()
                self.s3.add_rule("get", **how)
                self.assertRefused(s.get(f"/raw/{a}"))
        for status in (301, 307, 400):
            with self.subTest(put=status):
                self.s3.clear_rules()
                self.s3.add_rule("put", status=status)
                self.assertRefused(s.create("refused by a confused bucket"))
        self.s3.clear_rules()
        self.assertReads(s, a, "read me after the storm")
        b = self.create_ok(s, "created after the storm")
        self.assertReads(s, b, "created after the storm")
        self.assertTrue(s.running())

    # ---- the reaper deletes only what it can date ----------------------------------------------
    def passes(self, s):
        return metric(s.metrics(), "sluice_orphans_undated_total")

    def test_reaper_dates_rfc1123_and_keeps_what_it_cannot_date(self):
        s = self.sluice()
        texts = {}
        for i in range(30):
            texts[self.create_ok(s, f"acknowledged paste {i}")] = f"acknowledged paste {i}"
        # An orphan two hours old, which the reaper must remove: proof that it runs and dates.
        old = time.time() - 2 * 3600
        self.s3.put_object(PREFIX + "ZZorphan0001", b"orphan", mtime=old)
        self.s3.list_dates = "rfc1123"
        wait_until(lambda: PREFIX + "ZZorphan0001" in self.s3.deleted, timeout=15,
                   message="dated old orphan reaped")
        # Undatable listings: an old orphan stays, and so do all the young pastes.
        for dates in ("garbage", "missing"):
            with self.subTest(dates=dates):
                self.s3.list_dates = dates
                self.s3.put_object(PREFIX + "ZZorphan0002", b"orphan", mtime=old)
                before = self.passes(s)
                wait_until(lambda: self.passes(s) >= before + 2 * (len(texts) + 1), timeout=15,
                           message="two reaper passes over the undated listing")
                self.assertNotIn(PREFIX + "ZZorphan0002", self.s3.deleted)
        self.assertEqual([k for k in self.s3.deleted if k != PREFIX + "ZZorphan0001"], [])
        for paste_id, text in texts.items():
            self.assertReads(s, paste_id, text)
        self.assertIn("no readable modification time", s.log())

    def test_reaper_with_creates_in_flight_loses_no_acknowledged_paste(self):
        s = self.sluice()
        stop = threading.Event()
        created = {}
        errors = []

        def creator(n):
            i = 0
            while not stop.is_set():
                text = f"in flight {n}.{i}"
                res = s.create(text)
                if res.status == 201:
                    created[res.json()["id"]] = text
                elif res.status != 503:
                    errors.append(res)
                i += 1

        for dates in ("rfc1123", "garbage", "missing", "iso"):
            self.s3.list_dates = dates
            stop.clear()
            workers = [threading.Thread(target=creator, args=(n,)) for n in range(3)]
            for w in workers:
                w.start()
            time.sleep(8 * REAP_INTERVAL)
            stop.set()
            for w in workers:
                w.join()
        self.assertEqual(errors, [])
        self.assertGreater(len(created), 20)
        self.assertEqual(self.s3.deleted, [])
        for paste_id, text in created.items():
            self.assertReads(s, paste_id, text)

    def test_a_listing_that_never_advances_ends_the_pass_with_a_warning(self):
        s = self.sluice()
        ids = [self.create_ok(s, f"listed forever {i}") for i in range(5)]
        self.s3.put_object(PREFIX + "ZZorphan0003", b"orphan", mtime=time.time() - 2 * 3600)
        self.s3.list_stuck = True
        start = time.monotonic()
        lists_before = self.s3.count("list")
        time.sleep(3.0)
        elapsed = time.monotonic() - start
        lists = self.s3.count("list") - lists_before
        passes = elapsed / REAP_INTERVAL + 1
        self.assertGreater(lists, 0)
        self.assertLessEqual(lists, passes * MAX_LISTS_PER_PASS,
                             f"{lists} List requests in {elapsed:.1f} s")
        self.assertIn("does not advance", s.log())
        self.assertGreater(metric(s.metrics(), "sluice_reaper_stalls_total"), 0)
        for i, paste_id in enumerate(ids):
            self.assertReads(s, paste_id, f"listed forever {i}")
        # Once the listing behaves, the pass runs to its end again and finds the orphan.
        self.s3.list_stuck = False
        wait_until(lambda: PREFIX + "ZZorphan0003" in self.s3.deleted, timeout=15,
                   message="orphan reaped once the listing advances")
        self.assertEqual(self.s3.deleted, [PREFIX + "ZZorphan0003"])


if __name__ == "__main__":
    unittest.main()
