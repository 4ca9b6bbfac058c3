"""Expiry after N views (docs/sharing.md, "Expire after N views"): exactly N readers get the text,
even when fifty ask at once through two processes sharing one PostgreSQL; a GET (a link preview)
spends no view; every create route takes max_views; nothing is cacheable.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_max_views
"""

import threading
import unittest

from claim_race import ClaimRaceOnPostgres, claim
from sluice_harness import SluiceTestCase

from test_burn import BROWSER, create_on_every_route
FORM = "application/x-www-form-urlencoded"


class MaxViewsOnPostgresTest(ClaimRaceOnPostgres):
    def test_fifty_concurrent_readers_through_two_processes_get_exactly_five_texts(self):
        a, b = self.two_processes()
        created = a.request("POST", "/api/v1/pastes?max_views=5", body=b"five readers")
        self.assertStatus(created, 201)
        doc = created.json()
        self.assertEqual((doc["max_views"], doc["views_left"]), (5, 5))
        views = f"SELECT views_left FROM pastes WHERE id = '{doc['id']}'"
        self.assertEqual(self.pg.sql(views), "5")

        # Link previews (GETs of every kind, through either process) spend nothing.
        for s in (a, b):
            for _ in range(3):
                preview = s.get(f"/{doc['id']}", headers=BROWSER)
                self.assertStatus(preview, 200)
                self.assertIn(b'id="views-left">5<', preview.body)
                self.assertNotIn(b"five readers", preview.body)
                self.assertEqual(preview.header("Cache-Control"), "no-store")
                self.assertJsonError(s.get(f"/raw/{doc['id']}"), 409, "burn_after_reading")
                self.assertJsonError(s.get(f"/api/v1/pastes/{doc['id']}"), 409,
                                     "burn_after_reading")
        self.assertEqual(self.pg.sql(views), "5")

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
        self.assertEqual(statuses, [200] * 5 + [404] * 45,
                         [(r.status, r.body[:200]) for r in results if r.status not in (200, 404)])
        winners = [r for r in results if r.status == 200]
        for w in winners:
            self.assertEqual(w.json()["content"], "five readers")
            self.assertEqual(w.header("Cache-Control"), "no-store")
        # Each winner was told how many views remain after its own; together 4, 3, 2, 1, 0.
        self.assertEqual(sorted(w.json()["views_left"] for w in winners), [0, 1, 2, 3, 4])
        self.assertEqual(self.pg.sql(f"SELECT deleted FROM pastes WHERE id = '{doc['id']}'"), "t")
        # One body owed, by the last claim (the janitor may have paid it already; the store's
        # contract test counts it exactly).
        self.assertLessEqual(int(self.pg.sql(
            f"SELECT count(*) FROM outbox WHERE paste_id = '{doc['id']}'")), 1)
        for s in (a, b):
            self.assertStatus(s.get(f"/{doc['id']}", headers=BROWSER), 404)


class MaxViewsEmbeddedTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = cls.start_class_server()

    def claim_raw(self, paste_id):
        return self.s.request("POST", f"/api/v1/pastes/{paste_id}/claim?format=raw", body=b"")

    def test_every_create_route_takes_max_views(self):
        s = self.s
        made, answer = create_on_every_route(self, s, "max_views", "2", 2, b"shown 2 times")
        self.assertEqual(answer["max_views"], 2)
        for paste_id, text in zip(made, ["json", "haste", "curl", "form"]):
            self.assertJsonError(s.get(f"/raw/{paste_id}"), 409, "burn_after_reading")
            for left in ("1", "0"):
                res = self.claim_raw(paste_id)
                self.assertStatus(res, 200)
                self.assertEqual(res.body.decode(), text)
                self.assertEqual(res.header("Sluice-Views-Left"), left)
                self.assertEqual(res.header("Cache-Control"), "no-store")
            self.assertStatus(self.claim_raw(paste_id), 404)

    def test_burn_is_max_views_one(self):
        doc = self.s.request("POST", "/api/v1/pastes?burn=1", body=b"once").json()
        self.assertEqual((doc["max_views"], doc["views_left"]), (1, 1))
        self.assertStatus(self.claim_raw(doc["id"]), 200)
        self.assertStatus(self.claim_raw(doc["id"]), 404)

    def test_the_browser_page_says_how_many_views_are_left(self):
        s = self.s
        doc = s.request("POST", "/api/v1/pastes?max_views=3", body=b"<three>").json()
        page = s.get(f"/{doc['id']}", headers=BROWSER)
        self.assertIn(b"can be opened 3 more times", page.body)
        for left in (2, 1):
            shown = s.request("POST", f"/claim/{doc['id']}", body=b"",
                              headers={**BROWSER, "Content-Type": FORM})
            self.assertStatus(shown, 200)
            self.assertIn(b"&lt;three&gt;", shown.body)
            self.assertIn(f"{left} more reader".encode(), shown.body)
            self.assertEqual(shown.header("Cache-Control"), "no-store")
        last = s.request("POST", f"/claim/{doc['id']}", body=b"",
                         headers={**BROWSER, "Content-Type": FORM})
        self.assertIn(b"This was its last view", last.body)
        self.assertStatus(s.get(f"/{doc['id']}", headers=BROWSER), 404)

    def test_bad_max_views_are_refused_before_anything_is_stored(self):
        s = self.s
        for q in ("0", "-1", "x", "1.5", "10001", "99999999999999999999999"):
            self.assertJsonError(s.request("POST", f"/api/v1/pastes?max_views={q}", body=b"x"),
                                 400, "invalid_max_views")
        for v in ("\"3\"", "0", "-2", "2.5", "true"):
            res = s.request("POST", "/api/v1/pastes", body=f'{{"content": "x", "max_views": {v}}}',
                            headers={"Content-Type": "application/json"})
            self.assertJsonError(res, 400, "bad_json")
        res = s.request("POST", "/api/v1/pastes", body=b'{"content": "x", "max_views": 10001}',
                        headers={"Content-Type": "application/json"})
        self.assertJsonError(res, 400, "invalid_max_views")


if __name__ == "__main__":
    unittest.main()


class MaxViewsThroughACrashTest(SluiceTestCase):
    """docs/sharing.md, "At most N, not exactly N, when a server dies": a kill -9 among concurrent
    claims may spend views unread, but never gives the text to more than N readers, and a reader
    whose claim was cut may claim again while views are left."""

    def test_a_kill_among_concurrent_claims_never_gives_more_than_n_texts(self):
        s = self.server()
        n = 20
        created = s.request("POST", f"/api/v1/pastes?max_views={n}", body=b"twenty readers")
        self.assertStatus(created, 201)
        paste_id = created.json()["id"]

        given = []  # the texts readers received, across the kill and after it
        lock = threading.Lock()
        start = threading.Event()

        def reader():
            start.wait()
            try:
                r = s.request("POST", f"/api/v1/pastes/{paste_id}/claim", body=b"", timeout=30)
            except OSError:
                return  # cut by the kill: the view may or may not have been spent
            if r.status == 200:
                with lock:
                    given.append(r.json()["content"])

        threads = [threading.Thread(target=reader) for _ in range(n)]
        for t in threads:
            t.start()
        start.set()
        s.kill()  # among the claims: some answered, some cut, some never arrived
        for t in threads:
            t.join()
        s.start()
        # Claim on until the paste is gone: whatever the crash spent unread is simply missing.
        for _ in range(n + 1):
            r = s.request("POST", f"/api/v1/pastes/{paste_id}/claim", body=b"")
            if r.status == 404:
                break
            self.assertStatus(r, 200)
            given.append(r.json()["content"])
        else:
            self.fail("the paste outlived more than N claims")
        self.assertLessEqual(len(given), n)
        self.assertTrue(all(text == "twenty readers" for text in given), given)
        self.assertEqual(s.request("POST", f"/api/v1/pastes/{paste_id}/claim", body=b"").status,
                         404)
