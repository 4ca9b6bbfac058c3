"""Burn after reading (docs/usage.md, "Burn after reading"): one reader gets the text, even when many ask
at once through two processes sharing one PostgreSQL; a GET never burns; nothing is cacheable.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_burn
"""

import json
import threading
import unittest

from claim_race import ClaimRaceOnPostgres, claim
from promtext import metric
from sluice_harness import SluiceTestCase, wait_until

BROWSER = {"Accept": "text/html,application/xhtml+xml"}


def create_on_every_route(test, s, field, value, json_value, page_says):
    """Creates "json", "haste", "curl" and "form" through the four create routes (the JSON API,
    haste's /documents, curl's /, the browser's form) with `field` set (`json_value` in the JSON
    body, `value` elsewhere); the form's answer must say `page_says` and show no text. Returns
    the ids in that order and the JSON create's answer."""
    made = []
    res = s.request("POST", "/api/v1/pastes", body=json.dumps({"content": "json", field: json_value}),
                    headers={"Content-Type": "application/json"})
    test.assertStatus(res, 201)
    answer = res.json()
    made.append(answer["id"])
    res = s.request("POST", f"/documents?{field}={value}", body=b"haste")
    test.assertStatus(res, 200)
    made.append(res.json()["key"])
    res = s.request("POST", f"/?{field}={value}", body=b"curl")
    test.assertStatus(res, 201)
    made.append(res.body.decode().strip().rsplit("/", 1)[1])
    boundary = "xyzzy"
    form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\nform\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"\r\n\r\n{value}\r\n"
            f"--{boundary}--\r\n").encode()
    res = s.request("POST", "/", body=form, headers={
        **BROWSER, "Content-Type": f"multipart/form-data; boundary={boundary}"})
    test.assertStatus(res, 201)
    test.assertIn(page_says, res.body)
    test.assertNotIn(b"<pre", res.body)  # the text is not shown, not rendered
    made.append(res.header("Location").rsplit("/", 1)[1])
    return made, answer


class BurnOnPostgresTest(ClaimRaceOnPostgres):
    def test_fifty_concurrent_claims_through_two_processes_have_one_winner(self):
        a, b = self.two_processes()
        created = a.request("POST", "/api/v1/pastes?burn=1", body=b"read me once")
        self.assertStatus(created, 201)
        doc = created.json()
        self.assertTrue(doc["burn"])
        self.assertTrue(doc["claim_url"].endswith(f"/api/v1/pastes/{doc['id']}/claim"))

        # A link preview's GET, raw or not, through either process, burns nothing.
        for s in (a, b):
            preview = s.get(f"/{doc['id']}", headers=BROWSER)
            self.assertStatus(preview, 200)
            self.assertIn(b"will be deleted when you open it", preview.body)
            self.assertEqual(preview.header("Cache-Control"), "no-store")
            self.assertJsonError(s.get(f"/raw/{doc['id']}"), 409, "burn_after_reading")
            self.assertJsonError(s.get(f"/api/v1/pastes/{doc['id']}"), 409, "burn_after_reading")

        results = [None] * 50
        start = threading.Event()
        threads = [threading.Thread(target=claim, args=(a if i % 2 else b, doc["id"], results, i,
                                                        start)) for i in range(50)]
        for t in threads:
            t.start()
        start.set()
        for t in threads:
            t.join()
        statuses = sorted(r.status for r in results)
        self.assertEqual(statuses, [200] + [404] * 49, [r for r in results if r.status != 404])
        winner = next(r for r in results if r.status == 200)
        self.assertEqual(winner.json()["content"], "read me once")
        self.assertEqual(winner.header("Cache-Control"), "no-store")
        self.assertEqual(self.pg.sql(f"SELECT deleted FROM pastes WHERE id = '{doc['id']}'"), "t")
        for s in (a, b):
            self.assertStatus(s.get(f"/raw/{doc['id']}"), 404)
            self.assertStatus(s.request("POST", f"/api/v1/pastes/{doc['id']}/claim", body=b""), 404)


class BurnEmbeddedTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = cls.start_class_server()

    def test_every_create_route_takes_burn(self):
        s = self.s
        made, _ = create_on_every_route(self, s, "burn", "1", True, b"burns after reading")
        for paste_id, text in zip(made, ["json", "haste", "curl", "form"]):
            self.assertJsonError(s.get(f"/raw/{paste_id}"), 409, "burn_after_reading")
            self.assertJsonError(s.get(f"/documents/{paste_id}"), 409, "burn_after_reading")
            # A mistyped format is refused before the claim: the one reading is still there.
            self.assertJsonError(s.request("POST", f"/api/v1/pastes/{paste_id}/claim?format=txt",
                                           body=b""), 400, "bad_format")
            res = s.request("POST", f"/api/v1/pastes/{paste_id}/claim?format=raw", body=b"")
            self.assertStatus(res, 200)
            self.assertEqual(res.body.decode(), text)
            self.assertEqual(res.header("Cache-Control"), "no-store")
            self.assertStatus(s.request("POST", f"/api/v1/pastes/{paste_id}/claim", body=b""), 404)

    def test_browser_confirms_then_reads_once(self):
        s = self.s
        doc = s.request("POST", "/api/v1/pastes?burn=1", body=b"<secret>").json()
        for _ in range(3):  # previews and reloads
            page = s.get(f"/{doc['id']}", headers=BROWSER)
            self.assertStatus(page, 200)
            self.assertIn(f'action="/claim/{doc["id"]}"'.encode(), page.body)
            self.assertNotIn(b"secret", page.body)
        shown = s.request("POST", f"/claim/{doc['id']}", body=b"", headers={
            **BROWSER, "Content-Type": "application/x-www-form-urlencoded"})
        self.assertStatus(shown, 200)
        self.assertIn(b"&lt;secret&gt;", shown.body)
        self.assertEqual(shown.header("Cache-Control"), "no-store")
        self.assertStatus(s.get(f"/{doc['id']}", headers=BROWSER), 404)
        self.assertStatus(s.request("POST", f"/claim/{doc['id']}", body=b"", headers=BROWSER), 404)

    def test_claim_of_an_ordinary_paste_is_refused_and_burns_nothing(self):
        s = self.s
        doc = s.create_ok(b"ordinary")
        self.assertJsonError(s.request("POST", f"/api/v1/pastes/{doc['id']}/claim", body=b""),
                             409, "not_burn")
        self.assertStatus(s.get(f"/raw/{doc['id']}"), 200)
        self.assertJsonError(s.request("POST", "/api/v1/pastes/nothere/claim", body=b""), 404)

    def test_burn_must_be_a_boolean_in_json(self):
        res = self.s.request("POST", "/api/v1/pastes", body=b'{"content": "x", "burn": "yes"}',
                             headers={"Content-Type": "application/json"})
        self.assertJsonError(res, 400, "bad_json")


class BurnModeratedTest(SluiceTestCase):
    """Moderation comes first (docs/usage.md, "Burn after reading"): a withheld or taken-down burn paste
    answers 451 to reads and claims, and no claim burns it while it is withheld."""

    def test_a_withheld_burn_paste_answers_451_and_is_not_burned(self):
        s = self.server(["--report-hide-threshold", "1", "--trusted-proxy", "127.0.0.1"])
        held = s.request("POST", "/api/v1/pastes?burn=1", body=b"held text").json()
        down = s.request("POST", "/api/v1/pastes?burn=1", body=b"down text").json()
        # From another network than the creator's (reports from its own never withhold).
        res = s.request("POST", f"/api/v1/pastes/{held['id']}/report",
                        body=json.dumps({"reason": "spam"}),
                        headers={"Content-Type": "application/json",
                                 "X-Forwarded-For": "198.51.100.9"})
        self.assertStatus(res, 202)
        self.assertTrue(res.json()["under_review"])
        page = s.get(f"/{held['id']}", headers=BROWSER)
        self.assertStatus(page, 451)
        self.assertNotIn(b"will be deleted when you open it", page.body)
        self.assertJsonError(s.get(f"/raw/{held['id']}"), 451, "under_review")
        for _ in range(2):
            self.assertJsonError(s.request("POST", f"/api/v1/pastes/{held['id']}/claim", body=b""),
                                 451, "under_review")
        self.assertStatus(s.request("POST", f"/claim/{held['id']}", body=b"", headers=BROWSER), 451)

        self.assertStatus(s.admin_request("POST", f"/admin/pastes/{down['id']}/takedown",
                                          body=json.dumps({"reason": "malware"})), 200)
        self.assertJsonError(s.request("POST", f"/api/v1/pastes/{down['id']}/claim", body=b""),
                             451, "taken_down")

        # Dismissed: it burns after reading again, its text intact.
        self.assertStatus(s.admin_request("POST", f"/admin/pastes/{held['id']}/dismiss",
                                          body="{}"), 200)
        self.assertStatus(s.get(f"/{held['id']}", headers=BROWSER), 200)
        res = s.request("POST", f"/api/v1/pastes/{held['id']}/claim?format=raw", body=b"")
        self.assertStatus(res, 200)
        self.assertEqual(res.body, b"held text")
        self.assertStatus(s.request("POST", f"/api/v1/pastes/{held['id']}/claim", body=b""), 404)


if __name__ == "__main__":
    unittest.main()


class StorageQuotaTest(SluiceTestCase):
    """max_storage_bytes (docs/operations.md, "The storage quota"): 507 from the headers, reads and deletes go on,
    a delete frees room without a restart."""

    def test_a_full_quota_refuses_creates_until_a_delete_frees_room(self):
        s = self.server(["--max-storage-bytes", "100"])
        first = s.create_ok(b"a" * 60)
        # Refused from Content-Length alone: no body is sent, and the answer still comes.
        res = s.request("POST", "/api/v1/pastes", body=None, content_length=50)
        doc = self.assertJsonError(res, 507, "storage_quota")
        self.assertIn("quota", doc["error"])
        self.assertGreater(int(res.header("Retry-After")), 0)
        self.assertEqual(res.header("Cache-Control"), "no-store")
        self.assertJsonError(s.request("POST", "/?burn=1", body=b"b" * 41), 507, "storage_quota")
        # Reads go on; a paste that fits still fits.
        self.assertStatus(s.get(f"/raw/{first['id']}"), 200)
        fits = s.create_ok(b"c" * 40)
        metrics = s.metrics()
        self.assertEqual(metric(metrics, "sluice_storage_live_bytes"), 100)
        self.assertEqual(metric(metrics, "sluice_storage_quota_bytes"), 100)
        self.assertEqual(metric(metrics, "sluice_storage_created_bytes_24h"), 100)
        page = s.get("/status")
        self.assertIn(b"Storage against the quota", page.body)
        self.assertIn(b"100.0% of the quota", page.body)

        self.assertStatus(s.delete(first["id"], token=first["delete_token"]), 204)
        again = s.create_ok(b"d" * 50)
        self.assertJsonError(s.request("POST", "/api/v1/pastes", body=b"e" * 11), 507,
                             "storage_quota")
        # A burn paste's claim frees its bytes too.
        burn = s.request("POST", "/api/v1/pastes?burn=1", body=b"f" * 10).json()
        self.assertStatus(s.request("POST", f"/api/v1/pastes/{burn['id']}/claim", body=b""), 200)
        self.assertEqual(metric(s.metrics(), "sluice_storage_live_bytes"), 90)
        s.create_ok(b"g" * 10)
        # The count is the store's, not only this process's: a restart reads it back.
        s.restart()
        wait_until(lambda: metric(s.metrics(), "sluice_storage_live_bytes") == 100,
                   message="live bytes read back from the store at start")
        self.assertJsonError(s.request("POST", "/api/v1/pastes", body=b"h"), 507, "storage_quota")
        self.assertStatus(s.delete(again["id"], token=again["delete_token"]), 204)
        self.assertStatus(s.delete(fits["id"], token=fits["delete_token"]), 204)
        s.create_ok(b"i" * 90)
