"""Takedowns that stick (docs/moderation.md): a takedown records its paste's SHA-256 in the
content blocklist, and a create of exactly those bytes is refused 451 blocked_content on every
create route (form, JSON, multipart, haste) before anything is stored, in this process at once and
in another process sharing PostgreSQL within blocks_refresh. The operator's own blocks (by digest,
by the text itself, by the CLI from a file), unblocking, the listing and bad input.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v \
  test_blocked_content
"""

import hashlib
import json
import os
import shutil
import tempfile
import time
import unittest

from promtext import metric
from sluice_harness import SluiceTestCase, run_sluice, wait_until, with_write_pool_warm
from test_postgres import PostgresServer

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "..", "vectors", "envelope_v1.json")
ROOMY = ["--ip-create-rate", "1000", "--ip-create-burst", "1000"]
BOUNDARY = "----sluiceblocked5c1d"
# ModerationOptions::blocks_refresh (include/sluice/service/moderation.h): the stated bound on how
# long a change made through one process takes to reach another, plus room for a busy machine.
REFRESH_BOUND_S = 10
REFUSED = "sluice_creates_refused_total"


def sha256(text):
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def multipart(name, value, filename=None):
    disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
    return (f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n"
            "Content-Type: text/plain\r\n\r\n").encode() + value.encode() + \
        f"\r\n--{BOUNDARY}--\r\n".encode()


MULTIPART = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}


def create_routes(s, text):
    """Every create route with `text` as the paste's body: (name, response)."""
    return [
        ("json", s.request("POST", "/api/v1/pastes", body=json.dumps({"content": text}),
                           headers={"Content-Type": "application/json"})),
        ("raw", s.request("POST", "/api/v1/pastes", body=text)),
        # The page's form (its textarea, "content") and curl -F file=@... ("file").
        ("form", s.request("POST", "/", body=multipart("content", text), headers=MULTIPART)),
        ("multipart", s.request("POST", "/", body=multipart("file", text, "a.txt"),
                                headers=MULTIPART)),
        ("haste", s.request("POST", "/documents", body=text)),
    ]


class BlockedContentTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = cls.start_class_server(ROOMY)

    def admin(self, method, path, doc=None, **kw):
        return self.s.admin_request(method, path, body=None if doc is None else json.dumps(doc),
                                    headers={"Content-Type": "application/json"}, **kw)

    def take_down(self, s, text):
        doc = s.create_ok(text)
        res = s.admin_request("POST", f"/admin/pastes/{doc['id']}/takedown",
                              body=json.dumps({"reason": "illegal"}))
        self.assertStatus(res, 200)
        return doc["id"]

    def stored_rows(self):
        return self.s.query("SELECT COUNT(*) FROM pastes")[0][0]

    def test_a_taken_down_text_is_refused_451_on_every_create_route(self):
        text = "the same bytes, taken down\n"
        self.take_down(self.s, text)
        refused_before = metric(self.s.metrics(), REFUSED, reason="blocked_content")
        rows_before = self.stored_rows()
        for route, res in create_routes(self.s, text):
            with self.subTest(route=route):
                self.assertJsonError(res, 451, "blocked_content")
        # Nothing stored for any of them, and each one counted.
        self.assertEqual(self.stored_rows(), rows_before)
        self.assertEqual(metric(self.s.metrics(), REFUSED, reason="blocked_content"),
                         refused_before + 5)
        # A browser gets the error page, from the one presenter.
        page = self.s.request("POST", "/", body=multipart("content", text),
                              headers={**MULTIPART, "Accept": "text/html"})
        self.assertStatus(page, 451)
        self.assertIn("text/html", page.header("Content-Type"))
        self.assertIn("blocked_content", page.text)
        # Exactly those bytes: one byte more is another text.
        self.assertStatus(self.s.create(text + " "), 201)
        listed = self.admin("GET", "/admin/blocked-contents?limit=1000").json()
        entry = [e for e in listed["blocked_contents"] if e["sha256"] == sha256(text)]
        self.assertEqual(len(entry), 1, listed)
        self.assertEqual(entry[0]["reason"], "illegal")
        audit = self.admin("GET", "/admin/audit").json()["audit"]
        self.assertTrue(any(sha256(text) in a["detail"] for a in audit), audit)

    def test_an_encrypted_paste_of_the_same_text_is_not_matched(self):
        with open(VECTORS, encoding="utf-8") as f:
            vector = json.load(f)["vectors"][0]
        plaintext = bytes.fromhex(vector["plaintext_hex"]).decode()
        self.take_down(self.s, plaintext)
        self.assertJsonError(self.s.create(plaintext), 451, "blocked_content")
        res = self.s.request("POST", "/api/v1/pastes?encrypted=1", body=vector["envelope"])
        self.assertStatus(res, 201)

    def test_unblock_lets_the_text_through_again(self):
        text = "blocked, then let through\n"
        self.take_down(self.s, text)
        self.assertJsonError(self.s.create(text), 451, "blocked_content")
        self.assertStatus(self.admin("DELETE", f"/admin/blocked-contents/{sha256(text)}"), 204)
        self.assertStatus(self.s.create(text), 201)
        self.assertJsonError(self.admin("DELETE", f"/admin/blocked-contents/{sha256(text)}"), 404,
                             "not_blocked")

    def test_the_operator_blocks_by_digest_or_by_the_text_itself(self):
        by_digest = "blocked by its digest\n"
        res = self.admin("POST", "/admin/blocked-contents",
                         {"sha256": sha256(by_digest).upper(), "reason": "known bad"})
        self.assertStatus(res, 201)
        self.assertEqual(res.json(), {"sha256": sha256(by_digest), "added": True})
        self.assertStatus(self.admin("POST", "/admin/blocked-contents",
                                     {"sha256": sha256(by_digest)}), 200)  # there already
        self.assertJsonError(self.s.create(by_digest), 451, "blocked_content")
        by_text = "blocked by sending it\n"
        res = self.s.admin_request("POST", "/admin/blocked-contents", body=by_text,
                                   headers={"Content-Type": "text/plain"})
        self.assertStatus(res, 201)
        self.assertEqual(res.json()["sha256"], sha256(by_text))
        self.assertJsonError(self.s.create(by_text), 451, "blocked_content")

    def test_the_cli_blocks_a_file_lists_and_unblocks(self):
        base = ["admin", "--admin", f"http://127.0.0.1:{self.s.admin_port}",
                "--token-file", self.s.admin_token_file]
        text = "blocked from a file by the cli\n" + "x" * 40000  # past the admin body limit
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(text)
        self.addCleanup(os.unlink, f.name)
        res = run_sluice(base + ["block-content", f.name, "--reason", "from the cli"])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertJsonError(self.s.create(text), 451, "blocked_content")
        res = run_sluice(base + ["blocked-contents", "--limit", "1000"])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertIn(sha256(text), [e["sha256"] for e in json.loads(res.stdout)["blocked_contents"]])
        res = run_sluice(base + ["unblock-content", sha256(text)])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertStatus(self.s.create(text), 201)
        res = run_sluice(base + ["block-content", "/nonexistent/file"])
        self.assertEqual(res.returncode, 2)
        self.assertIn("neither a readable file nor 64 hex digits", res.stderr)

    def test_bad_input_gets_a_clear_error(self):
        for bad in ("zz", "a" * 63, "a" * 65, "g" * 64, ""):
            with self.subTest(sha256=bad):
                self.assertJsonError(self.admin("POST", "/admin/blocked-contents", {"sha256": bad}),
                                     400, "bad_sha256")
        self.assertJsonError(self.admin("POST", "/admin/blocked-contents", {"sha256": 7}), 400,
                             "bad_json")
        self.assertJsonError(self.admin("POST", "/admin/blocked-contents", {}), 400, "bad_sha256")
        self.assertJsonError(self.admin("DELETE", "/admin/blocked-contents/not-hex"), 400,
                             "bad_sha256")
        self.assertJsonError(self.admin("GET", "/admin/blocked-contents?after=xyz"), 400,
                             "bad_sha256")
        self.assertJsonError(self.s.admin_request("POST", "/admin/blocked-contents",
                                                  body="x" * 100000,
                                                  headers={"Content-Type": "text/plain"}), 413)
        self.assertJsonError(self.s.admin_request("POST", "/admin/blocked-contents", body="",
                                                  headers={"Content-Type": "text/plain"}), 400,
                             "empty_body")


class BlockedContentAcrossProcessesTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = PostgresServer.for_class(cls)

    RELAXED = ["--insert-timeout", "2s", "--meta-get-timeout", "2s", "--read-budget", "5s",
               "--moderation-timeout", "5s"]

    def pg_server(self, data_dir):
        s = self.server(["--meta", self.pg.url, *self.RELAXED, *ROOMY], data_dir=data_dir)
        return with_write_pool_warm(s)

    def test_a_takedown_through_one_process_is_refused_by_the_other(self):
        shared_blobs = tempfile.mkdtemp(prefix="sluice-shared-")
        self.addCleanup(shutil.rmtree, shared_blobs, ignore_errors=True)
        a = self.pg_server(shared_blobs)
        b = self.pg_server(shared_blobs)
        text = "taken down through a, refused by b\n"
        doc = a.create_ok(text)
        self.assertStatus(b.create(text), 201)  # not blocked yet
        taken_at = time.monotonic()
        self.assertStatus(a.admin_request("POST", f"/admin/pastes/{doc['id']}/takedown",
                                          body="{}"), 200)
        self.assertEqual(self.pg.sql("SELECT count(*) FROM blocked_contents WHERE "
                                     f"sha256 = '\\x{sha256(text)}'::bytea"), "1")
        self.assertJsonError(a.create(text), 451, "blocked_content")  # at once where it was made
        wait_until(lambda: metric(b.metrics(), "sluice_blocked_contents") >= 1,
                   timeout=REFRESH_BOUND_S + 10, message="b read the blocklist again")
        self.assertLess(time.monotonic() - taken_at, REFRESH_BOUND_S + 10)
        for route, res in create_routes(b, text):
            with self.subTest(route=route):
                self.assertJsonError(res, 451, "blocked_content")
        # Unblocked through b: a lets it through after its own refresh.
        self.assertStatus(b.admin_request("DELETE", f"/admin/blocked-contents/{sha256(text)}"),
                          204)
        self.assertStatus(b.create(text), 201)
        wait_until(lambda: metric(a.metrics(), "sluice_blocked_contents") == 0,
                   timeout=REFRESH_BOUND_S + 10, message="a read the blocklist again")
        self.assertStatus(a.create(text), 201)


if __name__ == "__main__":
    unittest.main()
