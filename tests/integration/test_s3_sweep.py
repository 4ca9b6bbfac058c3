"""The expiry sweep on an S3 bucket (tests/fakes/fake_s3.py): a batch of expired bodies goes in one
DeleteObjects request, not one DELETE a body; a bucket without DeleteObjects (HTTP 501) still gets
every body removed, one DELETE at a time, and is asked for DeleteObjects only once; a key the bucket
refuses in a DeleteObjects answer sends the sweep to its body-by-body fallback
(src/worker/janitor.cc), and no expired body is left behind.

The servers are patient (tests/lib/sluice_harness.py): a 200 ms body read from the Python fake on
a busy CI machine must not turn a kept paste's read into a 503; this suite is about the sweep.

The rows stay in the embedded SQLite; the test expires pastes by rewriting expires_at while the
server is stopped, as tests/integration/test_api.py does.
"""

import os
import sys
import time

from sluice_harness import SluiceTestCase, wait_until

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fakes"))
from fake_s3 import FakeS3  # noqa: E402

BUCKET = "sluice-test"
PREFIX = "pastes/"
S3_ENV = {"AWS_ACCESS_KEY_ID": "FAKE", "AWS_SECRET_ACCESS_KEY": "FAKE", "AWS_REGION": "us-east-1"}
# The log line of src/store/s3/s3_blob_store.cc when a peer has no DeleteObjects.
NO_BATCH_DELETE = "does not implement DeleteObjects"


class S3SweepTest(SluiceTestCase):
    def setUp(self):
        super().setUp()
        self.s3 = FakeS3(BUCKET)
        self.s3.start()
        self.addCleanup(self.s3.stop)

    def sluice(self):
        args = ["--blob", f"s3://{BUCKET}", "--s3-endpoint", self.s3.endpoint, "--cache-bytes", "0",
                "--sweep-interval", "100ms"]
        return self.server(args=args, env=S3_ENV)

    def create(self, s, n, tag):
        ids = [s.create_ok(f"{tag} paste {i}", ttl="10m")["id"] for i in range(n)]
        for paste_id in ids:
            self.assertIn(PREFIX + paste_id, self.s3.objects)
        return ids

    def expire(self, s, ids, at=0):
        """Sets the pastes' expiry to Unix time `at` (0: long past); the server must be stopped."""
        for paste_id in ids:
            self.assertEqual(s.execute("UPDATE pastes SET expires_at = ? WHERE id = ?",
                                       (at, paste_id)), 1)

    def rows(self, s, ids):
        marks = ",".join("?" * len(ids))
        return s.query(f"SELECT id FROM pastes WHERE id IN ({marks})", tuple(ids))

    def wait_swept(self, s, ids, timeout=20):
        wait_until(lambda: all(PREFIX + i not in self.s3.objects for i in ids), timeout=timeout,
                   message="expired bodies removed from the bucket")
        wait_until(lambda: not self.rows(s, ids), timeout=timeout, message="expired rows purged")

    def test_a_sweep_removes_its_batch_in_one_delete_objects_request(self):
        s = self.sluice()
        expired = self.create(s, 12, "expired")
        kept = self.create(s, 3, "kept")
        s.stop()
        self.expire(s, expired)
        s.start()
        self.wait_swept(s, expired)
        # One batch of 12 at start-up: one request, however many bodies (the sweep may have run
        # again since, with nothing to delete and so no request).
        self.assertEqual(self.s3.count("delete_objects"), 1)
        self.assertEqual(self.s3.count("delete"), 0)
        self.assertEqual(sorted(self.s3.deleted), sorted(PREFIX + i for i in expired))
        for paste_id in kept:
            self.assertIn(PREFIX + paste_id, self.s3.objects)
            self.assertEqual(s.get(f"/raw/{paste_id}").status, 200)
        self.assertNotIn(NO_BATCH_DELETE, s.log())

    def test_a_bucket_without_delete_objects_gets_one_delete_a_body_and_is_asked_once(self):
        self.s3.add_rule("delete_objects", status=501, error_code="NotImplemented")
        s = self.sluice()
        first = self.create(s, 4, "first")
        later = self.create(s, 3, "later")
        kept = self.create(s, 2, "kept")
        s.stop()
        self.expire(s, first)
        # Due a few seconds after the start, so a later sweep of the same process removes them.
        self.expire(s, later, at=int(time.time()) + 3)
        s.start()
        self.wait_swept(s, first)
        self.wait_swept(s, later, timeout=30)
        # Asked once; from then on the store went body by body without asking again.
        self.assertEqual(self.s3.count("delete_objects"), 1)
        self.assertEqual(self.s3.count("delete"), len(first) + len(later))
        self.assertEqual(sorted(self.s3.deleted), sorted(PREFIX + i for i in first + later))
        for paste_id in kept:
            self.assertIn(PREFIX + paste_id, self.s3.objects)
        self.assertEqual(s.log().count(NO_BATCH_DELETE), 1, s.log())

    def test_other_not_implemented_answers_are_remembered_and_a_plain_400_is_not(self):
        cases = [(405, "MethodNotAllowed", True), (400, "NotImplemented", True),
                 (400, "InvalidRequest", False)]
        for status, code, remembered in cases:
            with self.subTest(status=status, code=code):
                self.s3.clear_rules()
                self.s3.add_rule("delete_objects", status=status, error_code=code)
                s = self.sluice()
                expired = self.create(s, 3, f"{status}{code}")
                s.stop()
                self.expire(s, expired)
                before = self.s3.count("delete_objects")
                s.start()
                # Either way every body goes: by the store's own fallback, or the sweep's.
                self.wait_swept(s, expired)
                self.assertEqual(self.s3.count("delete_objects"), before + 1)
                log = s.log()
                self.assertEqual(NO_BATCH_DELETE in log, remembered, log)
                if not remembered:
                    self.assertIn("removing the batch's bodies one by one", log)
                s.stop()

    def test_a_key_refused_in_the_batch_answer_sends_the_sweep_body_by_body(self):
        s = self.sluice()
        expired = self.create(s, 5, "expired")
        # Every DeleteObjects reports the first body as not deleted (the others go); the sweep
        # then removes the batch one DELETE at a time, which the fake lets through.
        self.s3.add_rule("delete_objects", key_errors={PREFIX + expired[0]: "AccessDenied"})
        s.stop()
        self.expire(s, expired)
        s.start()
        self.wait_swept(s, expired)
        self.assertGreaterEqual(self.s3.count("delete_objects"), 1)
        self.assertIn(PREFIX + expired[0], [k for k in self.s3.deleted])
        self.assertGreaterEqual(self.s3.count("delete"), 1)
        log = s.log()
        self.assertIn(f"key '{PREFIX + expired[0]}' not deleted: AccessDenied", log)
        self.assertIn("removing the batch's bodies one by one", log)
        self.assertNotIn(NO_BATCH_DELETE, log)


if __name__ == "__main__":
    import unittest

    unittest.main()
