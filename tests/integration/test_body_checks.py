"""A paste body damaged in the embedded store (truncated, a byte flipped, emptied) is never served
as the paste: the read is a 503 `body_mismatch` with Retry-After and `no-store`, logged with the id
and counted on /metrics; the paste reads again once the body is right. Both places a body may live:
a row of meta.db's bodies (up to --inline-body-bytes, the default for these) and a file under blobs/.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_body_checks
"""

import unittest

from promtext import metric
from sluice_harness import PatientTestCase

TEXT = "the original text of this paste — with ünïcödé, ✓\n".encode() * 40


class BodyChecksTest(PatientTestCase):
    TIER = []  # the default: bodies this small are rows of meta.db, beside theirs
    WHERE = "inline"

    def start(self, *extra):
        # No process cache: every read goes to the store, as after a restart.
        return self.server(["--cache-bytes", "0", *self.TIER, *extra])

    def damage(self, s, paste_id, how):
        s.rewrite_body(paste_id, how(s.stored_body(paste_id)))

    def assertStoredIn(self, s, paste_id):
        inline = paste_id in s.inline_bodies()
        self.assertEqual("inline" if inline else "file", self.WHERE)

    def assertMismatch(self, s, paste_id):
        res = s.get(f"/raw/{paste_id}")
        doc = self.assertJsonError(res, 503, "body_mismatch")
        self.assertTrue(res.header("Retry-After"), res)
        self.assertEqual(res.header("Cache-Control"), "no-store")
        self.assertNotIn(b"original text", res.body)
        page = s.get(f"/{paste_id}", headers={"Accept": "text/html"})
        self.assertStatus(page, 503)
        self.assertNotIn(b"original text", page.body)
        return doc

    def test_truncated_flipped_and_emptied_bodies_are_503_never_served(self):
        s = self.start()
        doc = s.create_ok(TEXT)
        self.assertStoredIn(s, doc["id"])
        original = s.stored_body(doc["id"])
        self.assertEqual(original, TEXT)
        self.assertEqual(s.get(f"/raw/{doc['id']}").body, TEXT)

        self.damage(s, doc["id"], lambda d: d[:-5])
        self.assertMismatch(s, doc["id"])
        self.damage(s, doc["id"],
                    lambda d: original[:100] + bytes([original[100] ^ 0x01]) + original[101:])
        self.assertMismatch(s, doc["id"])
        self.damage(s, doc["id"], lambda d: b"")
        self.assertMismatch(s, doc["id"])

        m = s.metrics()
        self.assertGreaterEqual(metric(m, "sluice_body_mismatches_total", kind="size"), 2)
        self.assertGreaterEqual(metric(m, "sluice_body_mismatches_total", kind="checksum"), 1)
        self.assertIn(doc["id"], s.log())

        self.damage(s, doc["id"], lambda d: original)  # repaired: served again
        res = s.get(f"/raw/{doc['id']}")
        self.assertStatus(res, 200)
        self.assertEqual(res.body, TEXT)

    def test_a_damaged_body_is_not_kept_in_the_process_cache(self):
        s = self.server([*self.TIER])  # the process cache on, as by default
        doc = s.create_ok(TEXT)
        self.assertStoredIn(s, doc["id"])
        s.restart()  # the cache starts empty; the create had put the paste in it
        self.damage(s, doc["id"], lambda d: d[:10])
        self.assertMismatch(s, doc["id"])
        self.damage(s, doc["id"], lambda d: TEXT)
        self.assertEqual(s.get(f"/raw/{doc['id']}").body, TEXT)
        self.damage(s, doc["id"], lambda d: d[:10])  # now cached whole: the cached copy serves
        self.assertEqual(s.get(f"/raw/{doc['id']}").body, TEXT)


class BodyChecksInFilesTest(BodyChecksTest):
    TIER = ["--inline-body-bytes", "0"]  # every body a file under blobs/
    WHERE = "file"


if __name__ == "__main__":
    unittest.main()
