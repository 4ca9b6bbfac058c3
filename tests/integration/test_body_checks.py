"""A paste body damaged in the embedded store (truncated, a byte flipped, emptied) is never served
as the paste: the read is a 503 `body_mismatch` with Retry-After and `no-store`, logged with the id
and counted on /metrics; the paste reads again once the body is right. Both places a body may live:
a row of meta.db's bodies (up to --inline-body-bytes, the default for these) and a file under blobs/.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_body_checks
"""

import sqlite3
import unittest

from promtext import metric
from sluice_harness import SluiceTestCase

TEXT = "the original text of this paste — with ünïcödé, ✓\n".encode() * 40


class BodyChecksTest(SluiceTestCase):
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

    def test_a_compressed_body_that_does_not_decode_is_503_never_served(self):
        """Small bodies are stored LZ4-compressed (include/sluice/store/body_codec.h): a block
        damaged past decoding is answered as any damaged body is, and the server stays up."""
        if self.WHERE != "inline":
            self.skipTest("only bodies beside their rows are stored compressed")
        s = self.start()
        doc = s.create_ok(TEXT)
        (codec, stored), = s.query("SELECT body_codec, body FROM pastes WHERE id = ?",
                                   (doc["id"],))
        self.assertEqual(codec, 1, "TEXT repeats itself: stored compressed")
        cases = (stored[:-3],  # the block cut short
                 stored[:4] + b"\xff" * (len(stored) - 4),  # not an LZ4 block
                 (len(TEXT) * 1000).to_bytes(4, "little") + stored[4:])  # a size over the row's
        def store(body, codec):
            conn = sqlite3.connect(s.bodies_db_path, timeout=10)
            try:
                conn.execute("UPDATE pastes SET body = ?, body_codec = ? WHERE id = ?",
                             (body, codec, doc["id"]))
                conn.commit()
            finally:
                conn.close()
        for damaged in cases:
            store(damaged, 1)
            self.assertMismatch(s, doc["id"])
        self.assertGreaterEqual(
            metric(s.metrics(), "sluice_body_mismatches_total", kind="undecodable"), len(cases))
        # The paste reads again once its body is right, in either form.
        store(stored, 1)
        self.assertEqual(s.get(f"/raw/{doc['id']}").body, TEXT)
        store(TEXT, 0)
        self.assertEqual(s.get(f"/raw/{doc['id']}").body, TEXT)

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
