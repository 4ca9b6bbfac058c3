"""Abuse or growth at a glance (docs/moderation.md, "Abuse or growth, at a glance"; docs/overload.md, "Abuse or growth"): the
"abuse" object of /api/v1/status (aggregates only: no key, pseudonym or prefix, issue 32 item 7),
the admin listener's /status, /admin/abuse and `sluice admin top` (keys and prefixes in full), the
budget histogram and saturation on /metrics (no key in any label), the per-client delete limit, and
a dismissed paste served again by a second process sharing Redis.

One server serves the status tests; each test uses its own X-Forwarded-For addresses (the loopback
balancer is trusted). The Redis test starts its own redis-server and PostgreSQL and fails, rather
than skips, when either is missing. No timing is asserted: waits poll with generous limits.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v test_abuse
"""

import json
import re
import unittest

from sluice_harness import SluiceTestCase, RedisServer, run_sluice, wait_until
# The module, not its classes: a TestCase imported by name would run here too.
import test_postgres

SLOW = "0.001"  # one token in about 15 minutes: nothing refills during a test


def forwarded(client):
    return {"X-Forwarded-For": client}


class AbuseStatusTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = cls.start_class_server([
            "--trusted-proxy", "127.0.0.1",
            "--ip-create-burst", "3", "--ip-create-rate", SLOW,
            "--delete-burst", "2", "--delete-rate", SLOW])
        # Three abusers in one /24 try far past their budget; ten honest clients create once.
        for _ in range(8):
            for host in (7, 8, 9):
                cls.s.create(b"spam", headers=forwarded(f"203.0.113.{host}"))
        for i in range(10):
            res = cls.s.create(b"hello", headers=forwarded(f"198.51.{i}.20"))
            assert res.status == 201, res
        # And creators on IPv6 networks, each its own /48.
        for i in range(6):
            res = cls.s.create(b"hello", headers=forwarded(f"2001:db8:{i + 1:x}::20"))
            assert res.status == 201, res

    # Every creator's address and network, as a key, a prefix or a part of either.
    CREATORS = ["203.0.113", "198.51.", "2001:db8", "2001:0db8"]

    def status(self):
        res = self.s.get("/api/v1/status")
        self.assertStatus(res, 200)
        return res.json()

    def test_public_status_names_no_key_pseudonym_or_prefix(self):
        doc = self.status()
        self.assertEqual(set(doc["abuse"]), {"window_seconds", "budget_use",
                                             "global_cap_saturation"})

        def walk(value, where):
            if isinstance(value, dict):
                for k, v in value.items():
                    walk(k, f"{where} key")
                    walk(v, f"{where}.{k}")
            elif isinstance(value, list):
                # The one list is the budget distribution: bounds and counts, no names.
                self.assertEqual(where, "$.abuse.budget_use", value)
                for bucket in value:
                    self.assertEqual(set(bucket), {"le", "keys"}, bucket)
                    self.assertIsInstance(bucket["keys"], int)
            elif isinstance(value, str):
                for creator in self.CREATORS:
                    self.assertNotIn(creator, value, f"{where} names a creator")
        walk(doc, "$")
        # The page too: its own HTML and everything its script is given.
        for path in ("/status", "/status?refresh=1"):
            page = self.s.get(path, headers={"Accept": "text/html"})
            self.assertStatus(page, 200)
            for creator in self.CREATORS:
                self.assertNotIn(creator, page.text, f"{path} names a creator")

    def test_status_has_the_abuse_aggregates(self):
        doc = self.status()
        self.assertIsInstance(doc["reports_pending"], int)
        abuse = doc["abuse"]
        self.assertEqual(abuse["window_seconds"], 60)
        les = [b["le"] for b in abuse["budget_use"]]
        self.assertEqual(les, [0.1, 0.25, 0.5, 0.75, 0.9, 1.0, "+Inf"])
        counts = [b["keys"] for b in abuse["budget_use"]]
        self.assertEqual(counts, sorted(counts), "cumulative, as 'le' says")
        # Bimodal. A minute allows burst + rate x 60 = 3.06 creates here: each honest key used one
        # (a third), each abuser all three (0.98), and nobody is in between.
        self.assertEqual(counts[1], 0, abuse["budget_use"])                 # <= 0.25
        self.assertGreaterEqual(counts[2], 16, abuse["budget_use"])         # (0.25, 0.5]
        self.assertEqual(counts[4], counts[2], abuse["budget_use"])         # (0.5, 0.9]: none
        self.assertEqual(counts[5] - counts[4], 3, abuse["budget_use"])     # (0.9, 1]: the three
        self.assertEqual(counts[6], counts[5], abuse["budget_use"])
        self.assertGreaterEqual(abuse["global_cap_saturation"], 0.0)
        self.assertLessEqual(abuse["global_cap_saturation"], 1.0)

    def test_admin_and_cli_show_keys_in_full(self):
        res = self.s.admin_request("GET", "/admin/abuse")
        self.assertStatus(res, 200)
        abuse = res.json()["abuse"]
        self.assertEqual({row["key"] for row in abuse["top_keys"][:3]},
                         {"203.0.113.7", "203.0.113.8", "203.0.113.9"})
        self.assertJsonError(self.s.get("/admin/abuse"), 404)  # not on the public port
        self.assertJsonError(self.s.admin_request("GET", "/admin/abuse", token="wrong"), 401)
        # The admin listener's /status: the public status with who is behind the aggregates.
        res = self.s.admin_request("GET", "/status")
        self.assertStatus(res, 200)
        doc = res.json()
        self.assertEqual(set(doc), {"time_ms", "metrics", "abuse", "reports_pending"})
        abuse = doc["abuse"]
        self.assertEqual(set(abuse), {"window_seconds", "top_keys", "top_prefixes", "budget_use",
                                      "global_cap_saturation"})
        top3 = abuse["top_keys"][:3]
        self.assertEqual({row["key"] for row in top3}, {"203.0.113.7", "203.0.113.8", "203.0.113.9"})
        # Each abuser had its burst of 3 and 5 refusals (fewer once the minute has turned and the
        # older generation fades).
        for row in top3:
            self.assertEqual(set(row), {"key", "creates", "refusals"})
            self.assertLessEqual(row["creates"], 3, abuse)
            self.assertGreater(row["refusals"], row["creates"], abuse)
        self.assertEqual(abuse["top_prefixes"][0]["prefix"], "203.0.113.0/24", abuse)
        self.assertGreater(abuse["top_prefixes"][0]["refusals"], 1, abuse)
        self.assertEqual([b["le"] for b in abuse["budget_use"]],
                         [b["le"] for b in self.status()["abuse"]["budget_use"]])
        self.assertJsonError(self.s.admin_request("GET", "/status", token="wrong"), 401)
        out = run_sluice(["admin", "--admin", f"http://127.0.0.1:{self.s.admin_port}",
                          "--token-file", self.s.admin_token_file, "top"])
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("203.0.113.7", out.stdout)
        self.assertIn("budget_use", out.stdout)

    def test_metrics_have_the_histogram_and_no_key(self):
        text = self.s.get("/metrics").text
        self.assertIn("# TYPE sluice_client_budget_use histogram", text)
        self.assertRegex(text, r'sluice_client_budget_use_bucket\{le="\+Inf"\} \d+')
        self.assertRegex(text, r"sluice_global_cap_saturation [0-9.e-]+")
        self.assertRegex(text, r"sluice_reports_pending \d+")
        self.assertIsNone(re.search(r"203\.0\.113|198\.51\.", text), "a client key in /metrics")

    def test_deletes_have_their_own_loose_limit(self):
        doc = self.s.create_ok(b"to delete", headers=forwarded("192.0.2.77"))
        client = forwarded("192.0.2.78")
        self.assertJsonError(self.s.delete(doc["id"], "wrong", headers=client), 404)
        self.assertJsonError(self.s.delete(doc["id"], "wrong", headers=client), 404)
        refused = self.s.delete(doc["id"], doc["delete_token"], headers=client)
        body = self.assertJsonError(refused, 429, "delete_rate")
        self.assertGreaterEqual(int(refused.header("Retry-After")), 1)
        self.assertGreaterEqual(body["retry_after"], 1)
        # Another client's bucket is its own; the paste was never touched by the refusals.
        self.assertStatus(self.s.delete(doc["id"], doc["delete_token"],
                                        headers=forwarded("192.0.2.79")), 204)


class SharedModerationTest(SluiceTestCase):
    def test_dismissed_paste_is_served_again_by_the_other_process(self):
        # One primary (PostgreSQL) and one bucket (a shared folder of bodies) for both processes,
        # one Redis between them. Local entries are trusted for an hour, so only what moderation
        # writes to Redis and announces decides what b answers. The bug: moderation wrote a
        # deleted tombstone, and b answered 404 for the shared cache's 60 s after a dismissal.
        redis = RedisServer().start()
        self.addCleanup(redis.stop)
        pg = test_postgres.PostgresServer()
        self.addCleanup(pg.stop)
        args = ["--trusted-proxy", "127.0.0.1", "--local-cache-ttl", "1h", "--cache-timeout", "5s",
                "--report-hide-threshold", "1", "--meta", pg.url,
                *test_postgres.PostgresMetaTest.RELAXED]
        a = self.server(args, cache=redis)
        b = self.server(args, cache=redis, data_dir=a.data_dir)
        doc = a.create_ok(b"reported, then cleared")
        paste_id = doc["id"]
        self.assertStatus(b.get(f"/raw/{paste_id}"), 200)
        self.assertStatus(b.get(f"/raw/{paste_id}"), 200)  # from b's own memory now

        res = a.request("POST", f"/api/v1/pastes/{paste_id}/report",
                        body=json.dumps({"reason": "spam"}),
                        headers={"Content-Type": "application/json", **forwarded("10.7.0.1")})
        self.assertEqual(res.json()["under_review"], True, res)
        wait_until(lambda: b.get(f"/raw/{paste_id}").status == 451, timeout=10,
                   message="withheld on the other process")

        self.assertStatus(a.admin_request("POST", f"/admin/pastes/{paste_id}/dismiss",
                                          body=json.dumps({"note": "fine"})), 200)
        self.assertStatus(a.get(f"/raw/{paste_id}"), 200)
        # Well under the shared cache's 60 s: a cached tombstone would still say 404 here.
        wait_until(lambda: b.get(f"/raw/{paste_id}").status == 200, timeout=10,
                   message="served again by the other process")
        self.assertEqual(b.get(f"/raw/{paste_id}").text, "reported, then cleared")


if __name__ == "__main__":
    unittest.main()
