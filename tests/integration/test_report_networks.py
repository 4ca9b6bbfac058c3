"""Hiding a paste costs more than three requests (docs/moderation.md): reports count once per
network (IPv4 /24, IPv6 /48 forwarded through a trusted proxy), never from the creator's network;
the report form takes only same-origin posts and the API only application/json; a dismissal asks
for the threshold again from networks that have not reported; "keep" holds for good; each network
takes part in a few withholdings a day, and the process withholds only so fast.

Every test reports from networks of its own (the loopback balancer is trusted), so one server
serves the class.

Run: cd tests/integration && PYTHONPATH=../lib SLUICE_BIN=... python3 -m unittest -v \
    test_report_networks
"""

import json
import os
import re
import unittest

from promtext import metric
from sluice_harness import SluiceTestCase, run_sluice

CREATOR = "192.0.2.250"
FORM = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "text/html"}


class ReportNetworksTest(SluiceTestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = cls.start_class_server([
            "--trusted-proxy", "127.0.0.1", "--report-hide-threshold", "3",
            "--report-burst", "20", "--report-global-burst", "1000",
            "--report-withholds-per-network-per-day", "2", "--report-withholds-per-hour", "1000"])

    def create(self, text, client=CREATOR):
        res = self.s.request("POST", "/api/v1/pastes", body=text,
                             headers={"X-Forwarded-For": client})
        self.assertStatus(res, 201)
        return res.json()["id"]

    def report(self, paste_id, client, content_type="application/json", reason="spam"):
        return self.s.request("POST", f"/api/v1/pastes/{paste_id}/report",
                              body=json.dumps({"reason": reason}),
                              headers={"Content-Type": content_type, "X-Forwarded-For": client})

    def assertServed(self, paste_id):
        self.assertStatus(self.s.get(f"/raw/{paste_id}"), 200)

    def assertWithheld(self, paste_id):
        self.assertJsonError(self.s.get(f"/raw/{paste_id}"), 451, "under_review")

    def queued(self, paste_id):
        page = self.s.admin_request("GET", "/admin/reports?limit=1000").json()
        mine = [p for p in page["pastes"] if p["id"] == paste_id]
        return mine[0] if mine else None

    # ---- counted by network ----------------------------------------------------------------

    def test_three_keys_of_one_ipv6_48_are_one_reporter(self):
        paste_id = self.create("one site")
        for key in ("2001:db8:100:1::7", "2001:db8:100:2::7", "2001:db8:100:ffff::7"):
            res = self.report(paste_id, key)
            self.assertIn(res.status, (200, 202), res)
        self.assertServed(paste_id)
        self.assertEqual(self.queued(paste_id)["networks"], 1)

    def test_three_keys_of_one_ipv4_24_are_one_reporter(self):
        paste_id = self.create("one hoster")
        self.assertStatus(self.report(paste_id, "203.0.113.1"), 202)
        for key in ("203.0.113.2", "203.0.113.3"):
            self.assertEqual(self.report(paste_id, key).json()["counted"], False)
        self.assertServed(paste_id)

    def test_the_creators_network_never_counts(self):
        paste_id = self.create("mine", client="198.18.5.1")
        self.assertStatus(self.report(paste_id, "198.18.5.77"), 202)
        self.assertStatus(self.report(paste_id, "198.18.6.1"), 202)
        self.assertStatus(self.report(paste_id, "198.18.7.1"), 202)
        self.assertServed(paste_id)
        self.assertEqual(self.queued(paste_id)["votes"], 2)
        self.assertStatus(self.report(paste_id, "198.18.8.1"), 202)
        self.assertWithheld(paste_id)

    # ---- the form and the API take no cross-site report -------------------------------------

    def test_the_form_refuses_a_foreign_origin_or_site(self):
        paste_id = self.create("form target")
        for n, extra in enumerate(({"Origin": "https://evil.example"},
                                   {"Origin": "null"},
                                   {"Sec-Fetch-Site": "cross-site"},
                                   {"Sec-Fetch-Site": "same-site", "Origin": self.s.base_url},
                                   {})):  # neither header and no token
            res = self.s.request("POST", f"/report/{paste_id}", body="reason=spam",
                                 headers={**FORM, **extra,
                                          "X-Forwarded-For": f"198.19.{n + 1}.1"})
            self.assertStatus(res, 403)
            self.assertIn("text/html", res.header("Content-Type"))
            self.assertIn("did not come from this site", res.text)
            api = self.s.request("POST", f"/report/{paste_id}", body="reason=spam",
                                 headers={"Content-Type": FORM["Content-Type"], **extra,
                                          "X-Forwarded-For": f"198.19.{n + 1}.1"})
            self.assertJsonError(api, 403, "cross_site")
        self.assertServed(paste_id)
        self.assertIsNone(self.queued(paste_id))

    def test_the_form_takes_its_own_origin_and_its_own_token(self):
        paste_id = self.create("form ok")
        own = self.s.request("POST", f"/report/{paste_id}", body="reason=spam",
                             headers={**FORM, "Origin": self.s.base_url,
                                      "X-Forwarded-For": "198.20.1.1"})
        self.assertStatus(own, 200)
        fetched = self.s.request("POST", f"/report/{paste_id}", body="reason=spam",
                                 headers={**FORM, "Sec-Fetch-Site": "same-origin",
                                          "X-Forwarded-For": "198.20.2.1"})
        self.assertStatus(fetched, 200)
        form = self.s.get(f"/report/{paste_id}", headers={"Accept": "text/html"})
        cookie = form.header("Set-Cookie")
        self.assertRegex(cookie, r"^sluice_report=[A-Za-z0-9_-]{22}; Path=/report;")
        self.assertIn("HttpOnly", cookie)
        self.assertIn("SameSite=Strict", cookie)
        token = re.search(r'name="token" value="([^"]+)"', form.text).group(1)
        self.assertEqual(cookie.split(";")[0], f"sluice_report={token}")
        # The cookie without the field, the field without the cookie, or two that differ: refused.
        for cookie_header, field in ((f"sluice_report={token}", ""), ("", token),
                                     (f"sluice_report={token}", "A" * 22)):
            res = self.s.request("POST", f"/report/{paste_id}",
                                 body=f"reason=spam&token={field}",
                                 headers={**FORM, "Cookie": cookie_header,
                                          "X-Forwarded-For": "198.20.3.1"})
            self.assertStatus(res, 403)
        sent = self.s.request("POST", f"/report/{paste_id}", body=f"reason=spam&token={token}",
                              headers={**FORM, "Cookie": f"other=1; sluice_report={token}",
                                       "X-Forwarded-For": "198.20.3.1"})
        self.assertStatus(sent, 200)
        self.assertWithheld(paste_id)  # three networks, each through one of the three ways

    def test_the_api_takes_only_application_json(self):
        paste_id = self.create("api target")
        for n, content_type in enumerate(("text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x")):
            self.assertJsonError(self.report(paste_id, f"198.21.{n + 1}.1", content_type), 415,
                                 "unsupported_media_type")
        self.assertServed(paste_id)
        self.assertStatus(self.report(paste_id, "198.21.9.1", "application/json; charset=utf-8"),
                          202)

    # ---- reviews -------------------------------------------------------------------------

    def test_after_a_dismissal_the_same_networks_cannot_hide_it_again(self):
        paste_id = self.create("dismissed once")
        first = ("198.22.1.1", "198.22.2.1", "2001:db8:122::1")
        for key in first:
            self.assertStatus(self.report(paste_id, key), 202)
        self.assertWithheld(paste_id)
        self.assertStatus(self.s.admin_request("POST", f"/admin/pastes/{paste_id}/dismiss",
                                               body="{}"), 200)
        self.assertServed(paste_id)
        for key in ("198.22.1.9", "198.22.2.9", "2001:db8:122:5::1"):  # the same three networks
            res = self.report(paste_id, key)
            self.assertStatus(res, 200)
            self.assertEqual(res.json()["counted"], False)
        self.assertServed(paste_id)
        self.assertIsNone(self.queued(paste_id))
        for key in ("198.22.3.1", "198.22.4.1"):
            self.assertStatus(self.report(paste_id, key), 202)
        self.assertServed(paste_id)
        self.assertStatus(self.report(paste_id, "198.22.5.1"), 202)
        self.assertWithheld(paste_id)

    def test_keep_queues_later_reports_and_never_hides(self):
        paste_id = self.create("kept")
        self.assertStatus(self.s.admin_request("POST", f"/admin/pastes/{paste_id}/dismiss",
                                               body=json.dumps({"note": "fine", "keep": True})),
                          200)
        for n in range(5):
            self.assertStatus(self.report(paste_id, f"198.23.{n + 1}.1"), 202)
        self.assertServed(paste_id)
        row = self.queued(paste_id)
        self.assertEqual((row["keep"], row["votes"], row["moderation"]), (True, 5, "none"))
        self.assertJsonError(
            self.s.admin_request("POST", f"/admin/pastes/{paste_id}/dismiss",
                                 body=json.dumps({"keep": "yes"})), 400, "bad_json")

    def test_a_network_takes_part_in_two_withholdings_a_day(self):
        # --report-withholds-per-network-per-day 2: the same three networks hide two pastes, and
        # the third stays served until three others report it.
        voters = ("198.24.1.1", "198.24.2.1", "198.24.3.1")
        ids = [self.create(f"budget {n}") for n in range(3)]
        for paste_id in ids:
            for key in voters:
                self.assertIn(self.report(paste_id, key).status, (200, 202))
        self.assertWithheld(ids[0])
        self.assertWithheld(ids[1])
        self.assertServed(ids[2])
        self.assertEqual(self.queued(ids[2])["votes"], 0)
        for key in ("198.24.4.1", "198.24.5.1", "198.24.6.1"):
            self.assertStatus(self.report(ids[2], key), 202)
        self.assertWithheld(ids[2])

    # ---- the queue, paged, and `sluice admin` --------------------------------------------

    def test_the_queue_pages_and_the_cli_follows_it(self):
        ids = [self.create(f"paged {n}") for n in range(5)]
        for n, paste_id in enumerate(ids):
            self.assertStatus(self.report(paste_id, f"198.25.{n + 1}.1", reason="other"), 202)
        seen, before, pages = [], None, 0
        while True:
            path = "/admin/reports?limit=2" + (f"&before={before}" if before else "")
            page = self.s.admin_request("GET", path).json()
            self.assertLessEqual(len(page["pastes"]), 2)
            seen += [p["id"] for p in page["pastes"]]
            pages += 1
            before = page["next"]
            if before is None:
                break
        self.assertEqual(len(seen), len(set(seen)), "no paste twice")
        self.assertTrue(set(ids) <= set(seen))
        self.assertGreaterEqual(pages, 3)
        self.assertJsonError(self.s.admin_request("GET", "/admin/reports?before=nonsense"), 400,
                             "bad_cursor")
        base = ["admin", "--admin", f"http://127.0.0.1:{self.s.admin_port}",
                "--token-file", self.s.admin_token_file]
        res = run_sluice(base + ["reports", "--limit", "3"])
        self.assertEqual(res.returncode, 0, res.stderr)
        doc = json.loads(res.stdout)
        self.assertEqual(len(doc["pastes"]), 3)
        self.assertIsNotNone(doc["next"])
        res = run_sluice(base + ["reports", "--limit", "100000"])
        self.assertEqual(res.returncode, 0, res.stderr)
        listed = [p["id"] for p in json.loads(res.stdout)["pastes"]]
        self.assertEqual(listed, seen[:len(listed)])
        self.assertTrue(set(ids) <= set(listed))
        res = run_sluice(base + ["dismiss", ids[0], "--keep", "--note", "cli"])
        self.assertEqual(res.returncode, 0, res.stderr)
        self.assertEqual(json.loads(res.stdout)["keep"], True)


class WithholdRateTest(SluiceTestCase):
    """Past report_withholds_per_hour the process queues reported pastes instead of hiding them,
    and says so on /metrics (the alert deploy/prometheus/sluice.rules.yml raises on it)."""

    def test_past_the_rate_a_paste_stays_served_and_the_metric_counts_it(self):
        s = self.server(["--trusted-proxy", "127.0.0.1", "--report-withholds-per-hour", "1",
                         "--report-global-burst", "100"])
        ids = [s.create_ok(b"rate %d" % n)["id"] for n in range(2)]
        for n, paste_id in enumerate(ids):
            for k in range(3):
                res = s.request("POST", f"/api/v1/pastes/{paste_id}/report",
                                body=json.dumps({"reason": "spam"}),
                                headers={"Content-Type": "application/json",
                                         "X-Forwarded-For": f"198.26.{10 * n + k}.1"})
                self.assertStatus(res, 202)
        self.assertJsonError(s.get(f"/raw/{ids[0]}"), 451, "under_review")
        self.assertStatus(s.get(f"/raw/{ids[1]}"), 200)
        text = s.metrics()
        self.assertEqual(metric(text, "sluice_report_withholds_total", result="withheld"), 1)
        self.assertEqual(metric(text, "sluice_report_withholds_total", result="deferred"), 1)
        self.assertIn("withhold rate is spent", s.log())


if __name__ == "__main__":
    unittest.main()
